/**
 * Cluster mode: how long after a store is acknowledged on node A does node B serve it as a
 * semantic hit? Two nodes in one process on a fresh PostgreSQL schema (the change feed goes
 * through the server as between machines).
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/sync-delay.ts [rounds]
 */
import { performance } from 'node:perf_hooks';
import { rmSync } from 'node:fs';
import { loadConfig } from '../src/config.ts';
import { createUseLiteEmbedder } from '../src/embedding/use-lite.ts';
import { createKey } from '../src/keys/keys.ts';
import { createRuntime } from '../src/runtime.ts';
import { freshSchema } from '../test/services.ts';
import { tempDir } from '../test/helpers.ts';

const url = process.env.DATABASE_URL;
if (!url) throw new Error('set DATABASE_URL');
const rounds = Number(process.argv[2] ?? 30);
const { schema, drop } = freshSchema();
const dir = tempDir();
const config = loadConfig({ REPRISE_DATA_DIR: dir, DATABASE_URL: url, REPRISE_PG_SCHEMA: schema, REPRISE_EMBEDDER: 'none' });
const embedder = await createUseLiteEmbedder();
const a = await createRuntime(config, { embedder });
const b = await createRuntime(config, { embedder });
const account = await a.ctx.store.createAccount('sync', 'unlimited');
await createKey(a.ctx.store, account);
const delays: number[] = [];
for (let i = 0; i < rounds; i++) {
  const q = `Benchmark question number ${i}: how long does sync take between nodes?`;
  await embedder.embed([q]);
  await a.ctx.cache.store(account, { messages: [{ role: 'user', content: q }], answer: `a${i}`, model: 'm' });
  const t0 = performance.now();
  for (;;) {
    const r = await b.ctx.cache.check(account, {
      messages: [{ role: 'user', content: q }],
      cacheTypes: ['semantic'],
      similarityThreshold: 0.5,
    });
    if (r.cacheHit) break;
    await new Promise((r) => setImmediate(r));
  }
  delays.push(performance.now() - t0);
}
delays.sort((x, y) => x - y);
const at = (p: number) => delays[Math.min(delays.length - 1, Math.floor(delays.length * p))]?.toFixed(1);
console.log(`semantic hit on node B after a store on node A: p50 ${at(0.5)} ms, p90 ${at(0.9)} ms, max ${at(1)} ms (${rounds} rounds)`);
await a.close();
await b.close();
await embedder.close();
await drop();
rmSync(dir, { recursive: true, force: true });
