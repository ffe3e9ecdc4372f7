/**
 * Cluster mode: how long after a store is acknowledged on node A does node B serve it as a
 * semantic hit, and after a key is revoked on A does B refuse it (B remembers key lookups until
 * a change is announced)? Two nodes in one process on a fresh PostgreSQL schema (the change
 * feeds go through the server as between machines).
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/sync-delay.ts [rounds]
 */
import { performance } from 'node:perf_hooks';
import { rmSync } from 'node:fs';
import { loadConfig } from '../src/config.ts';
import { createUseLiteEmbedder } from '../src/embedding/use-lite.ts';
import { authenticate, createKey, presentedHash } from '../src/keys/keys.ts';
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
const revocations: number[] = [];
for (let i = 0; i < rounds; i++) {
  const { secret, key } = await createKey(a.ctx.store, account);
  const hash = presentedHash(secret) as string;
  // B has looked the key up (and, once it hears changes, remembers it).
  for (let j = 0; j < 3; j++) if (!(await authenticate(b.ctx.store, hash))) throw new Error('key not found on B');
  await a.ctx.store.revokeKey(key.id);
  const t0 = performance.now();
  while (await authenticate(b.ctx.store, hash)) await new Promise((r) => setImmediate(r));
  revocations.push(performance.now() - t0);
}
const at = (xs: number[], p: number) => [...xs].sort((x, y) => x - y)[Math.min(xs.length - 1, Math.floor(xs.length * p))]?.toFixed(1);
const spread = (xs: number[]) => `p50 ${at(xs, 0.5)} ms, p90 ${at(xs, 0.9)} ms, max ${at(xs, 1)} ms (${rounds} rounds)`;
console.log(`semantic hit on node B after a store on node A: ${spread(delays)}`);
console.log(`key refused on node B after its revocation on node A: ${spread(revocations)}`);
await a.close();
await b.close();
await embedder.close();
await drop();
rmSync(dir, { recursive: true, force: true });
