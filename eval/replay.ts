/**
 * Replays the real chat prompts of `../shared/eval/prompts_*.jsonl` through the real CacheService
 * as a client would (every user turn checked at the default threshold; on a miss the conversation
 * so far is stored) and writes every semantic hit for review: what was asked, the request whose
 * answer was served (the last two user turns of each) and the score.
 *
 *   node --import tsx eval/replay.ts [--data DIR] [--limit 2000] [--threshold 0.85] [--out FILE]   (default: replay-hits.json in the temp dir)
 *
 * The prompt sets carry no labels: whether a hit was right is for a reader to judge
 * (docs/quality.md, "Real traffic").
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { CalibratedScorer } from '../src/cache/calibrated.ts';
import { loadConfig } from '../src/config.ts';
import { createUseLiteEmbedder } from '../src/embedding/use-lite.ts';
import { createRuntime } from '../src/runtime.ts';
import { CachedEmbedder, defaultEvalDir, promptConversations } from './data.ts';

const { values } = parseArgs({
  options: {
    data: { type: 'string' },
    limit: { type: 'string', default: '2000' },
    threshold: { type: 'string', default: '0.85' },
    out: { type: 'string', default: path.join(tmpdir(), 'replay-hits.json') },
  },
});
const dir = values.data ?? defaultEvalDir();
const limit = Number(values.limit);
if (!dir) {
  console.error('no evaluation data: pass --data DIR (the folder of prompts_*.jsonl)');
  process.exit(2);
}
if (!Number.isInteger(limit) || limit < 1) {
  console.error(`--limit must be a positive whole number, not ${values.limit}`);
  process.exit(2);
}
const threshold = Number(values.threshold);
if (values.threshold.trim() === '' || !(threshold >= 0 && threshold <= 1)) {
  console.error(`--threshold must be a number from 0 to 1, not ${values.threshold}`);
  process.exit(2);
}

const conversations = promptConversations(dir);

const dataDir = mkdtempSync(path.join(tmpdir(), 'reprise-replay-'));
const config = loadConfig({ REPRISE_DATA_DIR: dataDir, REPRISE_SQLITE_SYNCHRONOUS: 'NORMAL', REPRISE_EMBEDDER: 'none' });
const embedder = new CachedEmbedder(await createUseLiteEmbedder({ memoSize: 0 }));
const runtime = await createRuntime(config, { embedder, scorer: new CalibratedScorer() });
const hits: { score: number | null; query: string[]; served: string[] }[] = [];
let checks = 0;
let exact = 0;
try {
  const account = await runtime.ctx.store.createAccount('replay', 'unlimited');
  for (const conversation of conversations.slice(0, limit)) {
    for (let i = 0; i < conversation.length; i++) {
      if (conversation[i]?.role !== 'user') continue;
      const messages = conversation.slice(0, i + 1).map((m) => ({ role: m.role, content: m.content.slice(0, 50_000) }));
      const asked = messages
        .filter((m) => m.role === 'user')
        .map((m) => m.content)
        .slice(-2);
      checks++;
      const r = await runtime.ctx.cache.check(account, { messages, similarityThreshold: threshold });
      if (!r.cacheHit) {
        // The stored answer is what was asked, so a hit shows which request it was served from.
        await runtime.ctx.cache.store(account, { messages, answer: JSON.stringify(asked), model: 'replay' });
      } else if (r.cacheType === 'exact') exact++;
      else hits.push({ score: r.similarityScore, query: asked, served: JSON.parse(r.answer) as string[] });
    }
  }
} finally {
  await runtime.close();
  await embedder.close();
  rmSync(dataDir, { recursive: true, force: true });
}
writeFileSync(values.out, `${JSON.stringify(hits, null, 1)}\n`);
console.log(`${checks} checks: ${exact} exact hits, ${hits.length} semantic hits written to ${values.out}`);
