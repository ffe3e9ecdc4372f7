/**
 * Cluster benchmark: two Reprise nodes (two processes) on one PostgreSQL (a fresh schema) and
 * one Redis, driven together over loopback. Reports exact-hit throughput across both nodes
 * beside one node alone, stores on node A served as hits by node B, and the shared limiter.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379 \
 *     node --import tsx bench/cluster.ts [seconds]
 */
import { rmSync } from 'node:fs';
import { freshSchema, uniquePrefix } from '../test/services.ts';
import { tempDir } from '../test/helpers.ts';
import { runCli, startServerProcess, api } from '../test/process.ts';
import { load } from './load.ts';

const databaseUrl = process.env.DATABASE_URL;
const redisUrl = process.env.REDIS_URL;
if (!databaseUrl || !redisUrl) throw new Error('set DATABASE_URL and REDIS_URL');
const seconds = Number(process.argv[2] ?? 5);
const { schema, drop } = freshSchema();
const dir = tempDir('reprise-cluster-bench-');
const env = {
  REPRISE_DATA_DIR: dir,
  DATABASE_URL: databaseUrl,
  REDIS_URL: redisUrl,
  REPRISE_PG_SCHEMA: schema,
  REPRISE_REDIS_PREFIX: uniquePrefix(),
  REPRISE_EMBED_WORKERS: '1',
  LOG_LEVEL: 'warn',
};
const created = await runCli(['keys', 'create', '--account', 'bench', '--plan', 'unlimited', '--json'], env);
const key = (JSON.parse(created.stdout) as { key: string }).key;
const [a, b] = await Promise.all([startServerProcess({ ...env, LOG_LEVEL: 'info' }), startServerProcess({ ...env, LOG_LEVEL: 'info' })]);
try {
  const messages = [{ role: 'user', content: 'What is the capital of Australia?' }];
  await api(a.url, 'POST', '/api/v1/store', key, { messages, answer: 'Canberra.', model: 'gpt-4o', tokens_used: 12 });
  const onB = await api(b.url, 'POST', '/api/v1/check', key, { messages });
  console.log(`store on A, exact hit on B at once: ${onB.json.cache_type === 'exact'}`);
  const body = JSON.stringify({ messages });
  const headers = { authorization: `Bearer ${key}` };
  const alone = await load({ url: `${a.url}/api/v1/check`, headers, body, connections: 16, duration: seconds });
  const [ra, rb] = await Promise.all([
    load({ url: `${a.url}/api/v1/check`, headers, body, connections: 8, duration: seconds }),
    load({ url: `${b.url}/api/v1/check`, headers, body, connections: 8, duration: seconds }),
  ]);
  console.log(`exact hits, one node:  ${alone.requestsPerSecond.toFixed(0)}/s, p50 ${alone.p50} ms, p99 ${alone.p99} ms`);
  console.log(
    `exact hits, two nodes: ${(ra.requestsPerSecond + rb.requestsPerSecond).toFixed(0)}/s (A ${ra.requestsPerSecond.toFixed(0)}, B ${rb.requestsPerSecond.toFixed(0)}), p99 ${Math.max(ra.p99, rb.p99)} ms`,
  );
  // Each node writes its counts in batches (every second): poll until both read the same.
  const t0 = Date.now();
  let ua = (await api(a.url, 'GET', '/api/v1/usage', key)).json;
  let ub = (await api(b.url, 'GET', '/api/v1/usage', key)).json;
  while (JSON.stringify(ua) !== JSON.stringify(ub) && Date.now() - t0 < 5000) {
    await new Promise((r) => setTimeout(r, 50));
    [ua, ub] = [(await api(a.url, 'GET', '/api/v1/usage', key)).json, (await api(b.url, 'GET', '/api/v1/usage', key)).json];
  }
  const same = JSON.stringify(ua) === JSON.stringify(ub);
  console.log(`usage identical on both nodes: ${same}${same ? ` after ${Date.now() - t0} ms` : ''} (${ua.total_requests} requests)`);
} finally {
  await a.stop();
  await b.stop();
  await drop();
  rmSync(dir, { recursive: true, force: true });
}
