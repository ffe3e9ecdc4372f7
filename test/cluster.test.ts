import assert from 'node:assert/strict';
import { once } from 'node:events';
import { appendFileSync, cpSync, existsSync, writeFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { loadConfig } from '../src/config.ts';
import { entry } from '../src/store/conformance.ts';
import { PostgresStore } from '../src/store/postgres.ts';
import { closeSharedEmbedder, sharedEmbedder, startTestApp, tempDir, user, type TestApp } from './helpers.ts';
import { api, runCli, startCli, startServerProcess } from './process.ts';
import { eventually, freshSchema, serviceUrl, skipReason, uniquePrefix } from './services.ts';

const skip = skipReason('DATABASE_URL') || skipReason('REDIS_URL');

/** The environment of cluster nodes on `schema` (their limits in Redis under a prefix of their own), without a data directory. */
const nodeEnv = (schema: string) => ({
  REPRISE_EMBEDDER: 'none',
  DATABASE_URL: serviceUrl('DATABASE_URL') as string,
  REPRISE_PG_SCHEMA: schema,
  REDIS_URL: serviceUrl('REDIS_URL') as string,
  REPRISE_REDIS_PREFIX: uniquePrefix(),
});

/** A schema of the suite's own, dropped after it, with the embedder its nodes shared closed. */
function nodeSchema(): string {
  const { schema, drop } = freshSchema();
  after(async () => {
    await drop();
    await closeSharedEmbedder();
  });
  return schema;
}

/** The two entries the snapshot suites look for again after a restart. */
async function storeSpiderAndMars(app: TestApp, key: string): Promise<void> {
  await app.post('/api/v1/store', { messages: [user('How many legs does a spider have?')], answer: 'Eight.' }, key);
  await app.post('/api/v1/store', { messages: [user('Which planet is known as the Red Planet?')], answer: 'Mars.' }, key);
}

describe('cluster: two nodes on one PostgreSQL and one Redis', { skip }, () => {
  const { schema, drop } = freshSchema();
  let a: TestApp;
  let b: TestApp;
  before(async () => {
    const dir = tempDir();
    const file = path.join(dir, 'reprise.json');
    writeFileSync(
      file,
      JSON.stringify({
        plans: { burst10: { requests_per_minute: 6, burst: 10 }, two: { requests_per_minute: 6000, burst: 10_000, max_entries: 2 } },
      }),
    );
    const env = {
      REPRISE_DATA_DIR: dir,
      REPRISE_EMBEDDER: 'none',
      REPRISE_CONFIG: file,
      DATABASE_URL: serviceUrl('DATABASE_URL') as string,
      REPRISE_PG_SCHEMA: schema,
      REDIS_URL: serviceUrl('REDIS_URL') as string,
      REPRISE_REDIS_PREFIX: uniquePrefix(),
    };
    const embedder = await sharedEmbedder();
    // Node A migrates the schema; node B starts against it at the same time.
    [a, b] = await Promise.all([
      startTestApp({ config: loadConfig(env), embedder, keepData: true }),
      startTestApp({ config: loadConfig(env), embedder, keepData: true }),
    ]);
  });
  after(async () => {
    await a?.close();
    await b?.close();
    await drop();
    await closeSharedEmbedder();
  });

  test('a store on A is an exact hit on B at once and a semantic hit on B shortly after', async () => {
    const key = await a.key('shared-cache');
    const messages = [user('What is the speed of light in a vacuum?')];
    const stored = await a.post('/api/v1/store', { messages, answer: 'About 299,792 km/s.', model: 'gpt-4o', tokens_used: 9 }, key);
    assert.equal(stored.json().stored, true);
    const exact = (await b.post('/api/v1/check', { messages, cache_types: ['exact'] }, key)).json();
    assert.equal(exact.cache_type, 'exact');
    assert.equal(exact.answer, 'About 299,792 km/s.');

    const started = Date.now();
    const hitOnB = await eventually(async () => {
      const r = (
        await b.post('/api/v1/check', { messages: [user('In a vacuum, what is the speed of light?')], similarity_threshold: 0.6 }, key)
      ).json();
      return r.cache_type === 'semantic';
    });
    assert.ok(hitOnB, 'B serves the semantic hit');
    assert.ok(Date.now() - started < 10_000);
  });

  test("stores on both nodes at once for an account's last entry: one is taken, the other refused", async () => {
    for (let round = 0; round < 5; round++) {
      const key = await a.key(`last-entry-${round}`, 'two');
      assert.equal((await a.post('/api/v1/store', { messages: [user('first')], answer: '1' }, key)).statusCode, 200);
      const raced = await Promise.all([
        a.post('/api/v1/store', { messages: [user('on A')], answer: 'A' }, key),
        b.post('/api/v1/store', { messages: [user('on B')], answer: 'B' }, key),
      ]);
      assert.deepEqual(raced.map((r) => r.statusCode).sort(), [200, 403], `round ${round}`);
      assert.equal(raced.find((r) => r.statusCode === 403)?.json().error.code, 'STORAGE_QUOTA_EXCEEDED');
      for (const node of [a, b]) assert.equal((await node.get('/api/v1/usage', key)).json().storage.entries, 2);
    }
  });

  test('a key revoked on one node is refused by the other as soon as the change is announced', async () => {
    const key = await a.key('revoker');
    assert.equal((await b.get('/api/v1/usage', key)).statusCode, 200);
    assert.equal((await b.get('/api/v1/usage', key)).statusCode, 200);
    const account = await a.runtime.ctx.store.getAccountByName('revoker');
    const [k] = await a.runtime.ctx.store.listKeys(account?.id ?? '');
    await a.runtime.ctx.store.revokeKey(k?.id ?? '');
    assert.equal((await a.get('/api/v1/usage', key)).statusCode, 401);
    assert.ok(await eventually(async () => (await b.get('/api/v1/usage', key)).statusCode === 401), 'node B refuses the key');
  });

  test('a burst spread over both nodes is limited at the plan burst in total', async () => {
    const key = await a.key('bursty', 'burst10');
    // Both on the shared buckets (a node whose Redis call timed out, on a busy machine, is on its own ones for a second).
    const shared = async (n: TestApp) => (await n.get('/healthz')).json().checks.limiter === 'ok';
    assert.ok(await eventually(async () => (await shared(a)) && (await shared(b))));
    const codes: number[] = [];
    for (let i = 0; i < 16; i++) codes.push((await (i % 2 ? a : b).get('/api/v1/usage', key)).statusCode);
    assert.equal(codes.filter((c) => c === 200).length, 10);
    assert.equal(codes.filter((c) => c === 429).length, 6);
    const last = await a.get('/api/v1/usage', key);
    assert.equal(last.headers['x-ratelimit-limit'], '6');
    assert.equal(last.headers['x-ratelimit-remaining'], '0');
  });

  test('a node just started counts its first requests in the shared buckets, Redis being slow to connect', async () => {
    const key = await a.key('early', 'burst10');
    for (let i = 0; i < 10; i++) assert.equal((await a.get('/api/v1/usage', key)).statusCode, 200);
    // A Redis far away: each connection is made 300 ms after it is asked for.
    const redisUrl = new URL(serviceUrl('REDIS_URL') as string);
    const far = createServer((client) => {
      client.pause();
      setTimeout(() => {
        const upstream = connect(Number(redisUrl.port || 6379), redisUrl.hostname);
        client.pipe(upstream).pipe(client);
        client.resume();
        client.on('error', () => upstream.destroy());
        upstream.on('error', () => client.destroy());
      }, 300);
    });
    far.listen(0, '127.0.0.1');
    await once(far, 'listening');
    const { port } = far.address() as AddressInfo;
    const config = { ...a.config, redisUrl: `redis://127.0.0.1:${port}` };
    const c = await startTestApp({ config, embedder: await sharedEmbedder(), keepData: true });
    try {
      // Its first request, as soon as it is up: the burst spent on A is spent for it too.
      const first = await c.get('/api/v1/usage', key);
      assert.equal(first.statusCode, 429);
      assert.equal((await c.get('/healthz')).json().checks.limiter, 'ok');
    } finally {
      await c.close();
      far.close();
    }
  });

  test("a load balancer's health probes of every node do not add up: each node limits an address's public requests on its own", async () => {
    // One address probing many nodes often would otherwise find every node refusing its probes
    // (429) once they pass the limit together, and take the whole cluster out of service.
    let refused = false;
    for (let i = 0; i < 2000 && !refused; i++) refused = (await a.get('/healthz')).statusCode === 429;
    assert.ok(refused, 'node A refuses the address once past its limit');
    const probe = await b.get('/healthz');
    assert.equal(probe.statusCode, 200);
    assert.equal(probe.headers['x-ratelimit-limit'], '600');
    assert.equal(probe.headers['x-ratelimit-remaining'], '999');
  });

  test('usage read from either node adds up to the same figures once both have written their counts', async () => {
    const key = await a.key('counted');
    const messages = [user('Name the largest ocean.')];
    await a.post('/api/v1/check', { messages }, key);
    await b.post('/api/v1/store', { messages, answer: 'The Pacific.', model: 'gpt-4o', tokens_used: 100 }, key);
    await Promise.all([
      a.post('/api/v1/check', { messages }, key),
      b.post('/api/v1/check', { messages }, key),
      b.post('/api/v1/check', { messages: [user('unrelated: how do magnets work?')] }, key),
    ]);
    // A node's own requests count at once; the other node's once it has written its batch.
    const own = (await a.get('/api/v1/usage', key)).json();
    assert.ok(own.total_requests >= 2, `node A sees its own 2 requests (${own.total_requests})`);
    let ua: Record<string, unknown> = {};
    let ub: Record<string, unknown> = {};
    const agreed = await eventually(async () => {
      ua = (await a.get('/api/v1/usage', key)).json();
      ub = (await b.get('/api/v1/usage', key)).json();
      return ua.total_requests === 4 && ub.total_requests === 4;
    });
    assert.ok(agreed, `both nodes count 4 requests (A ${ua.total_requests}, B ${ub.total_requests})`);
    assert.deepEqual(ua, ub);
    assert.equal(ua.cache_hits, 2);
    assert.equal(ua.exact_hits, 2);
    assert.equal(ua.cache_misses, 2);
    const hit = (await a.post('/api/v1/check', { messages }, key)).json();
    assert.equal(hit.metadata.usage_count, 3);
  });

  test('a usage body read while checks are counted has a series that adds up to its figures', async () => {
    const key = await a.key('series-while-counting');
    for (let round = 0; round < 10; round++) {
      const [usage] = await Promise.all([
        a.get('/api/v1/usage?granularity=hour', key),
        ...Array.from({ length: 20 }, (_, i) => a.post('/api/v1/check', { messages: [user(`counted while read ${i}`)] }, key)),
      ]);
      const u = usage.json();
      const sum = (field: string) => u.series.reduce((n: number, p: Record<string, number>) => n + (p[field] ?? 0), 0);
      assert.equal(sum('total_requests'), u.total_requests, `round ${round}: the series counts the requests of the figures`);
      assert.equal(sum('cache_misses'), u.cache_misses, `round ${round}`);
    }
  });
});

describe('cluster: the CLI against PostgreSQL', { skip: skipReason('DATABASE_URL') }, () => {
  const { schema, drop } = freshSchema();
  after(drop);

  test('only keys create makes the tables of a schema that has none, and says so; other commands name the schema', async () => {
    const env = { DATABASE_URL: serviceUrl('DATABASE_URL') as string, REPRISE_PG_SCHEMA: schema, REPRISE_DATA_DIR: tempDir() };
    const schemaExists = async () => {
      const client = new pg.Client({ connectionString: env.DATABASE_URL });
      await client.connect();
      try {
        return (await client.query('SELECT 1 FROM information_schema.schemata WHERE schema_name = $1', [schema])).rowCount === 1;
      } finally {
        await client.end();
      }
    };
    // A mistyped or forgotten REPRISE_PG_SCHEMA would otherwise list an empty schema made on the spot.
    for (const args of [
      ['accounts', 'list'],
      ['keys', 'list', '--account', 'acme'],
    ]) {
      const res = await runCli(args, env);
      assert.equal(res.code, 1, args.join(' '));
      assert.equal(
        res.stderr.trim(),
        `reprise: no Reprise tables in schema ${schema} of DATABASE_URL (REPRISE_PG_SCHEMA): start the server once, or check the schema`,
      );
    }
    assert.equal(await schemaExists(), false);
    const created = await runCli(['keys', 'create', '--account', 'acme', '--json'], env);
    assert.equal(created.code, 0, created.stderr);
    assert.match(
      created.stderr,
      new RegExp(`no Reprise tables in schema ${schema} of DATABASE_URL \\(REPRISE_PG_SCHEMA\\) yet; creating them`),
    );
    const again = await runCli(['keys', 'create', '--account', 'acme', '--json'], env);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stderr, '');
    const listed = await runCli(['accounts', 'list', '--json'], env);
    assert.equal(listed.code, 0, listed.stderr);
    assert.deepEqual(
      JSON.parse(listed.stdout).map((a: { name: string }) => a.name),
      ['acme'],
    );
  });
});

describe('cluster: a node restarted loads its own index snapshot and applies the changes made meanwhile', { skip }, () => {
  const { schema, drop } = freshSchema();
  const other = freshSchema();
  after(async () => {
    await drop();
    await other.drop();
    await closeSharedEmbedder();
  });

  test('the snapshot saved at its shutdown, then the stores and deletes of the other node; none beside another database', async () => {
    const shared = nodeEnv(schema);
    const aDir = tempDir();
    const configA = loadConfig({ ...shared, REPRISE_DATA_DIR: aDir });
    const embedder = await sharedEmbedder();
    let a: TestApp | null = await startTestApp({ config: configA, embedder, keepData: true });
    const b = await startTestApp({ config: loadConfig({ ...shared, REPRISE_DATA_DIR: tempDir() }), embedder, keepData: true });
    const paraphrase = async (node: TestApp, key: string, question: string) =>
      (await node.post('/api/v1/check', { messages: [user(question)], similarity_threshold: 0.6 }, key)).json();
    try {
      const key = await a.key('node-snapshot');
      const spider = (
        await a.post('/api/v1/store', { messages: [user('How many legs does a spider have?')], answer: 'Eight.' }, key)
      ).json();
      await a.post('/api/v1/store', { messages: [user('Which planet is known as the Red Planet?')], answer: 'Mars.' }, key);
      await a.close();
      a = null;
      assert.ok(existsSync(path.join(aDir, 'index', 'manifest.json')), 'the node saved its index at shutdown');

      // While A is down, B stores one entry and deletes another.
      await b.post('/api/v1/store', { messages: [user('What is the boiling point of water at sea level?')], answer: '100 °C.' }, key);
      const deleted = await b.app.inject({
        method: 'DELETE',
        url: `/api/v1/entries/${spider.entry_id}`,
        headers: { authorization: `Bearer ${key}` },
      });
      assert.equal(deleted.statusCode, 200);

      a = await startTestApp({ config: configA, embedder, keepData: true });
      assert.equal(a.runtime.vectorsFromSnapshot, 2);
      await a.runtime.indexLoaded;
      // The snapshot's two, less the deleted one, and the one B stored.
      assert.equal(a.runtime.index.size, 2);
      assert.equal((await paraphrase(a, key, 'At sea level, what is the boiling point of water?')).answer, '100 °C.');
      assert.equal((await paraphrase(a, key, 'Which planet is called the Red Planet?')).answer, 'Mars.');
      assert.equal((await paraphrase(a, key, 'How many legs do spiders have?')).cache_hit, false);
      await a.close();
      a = null;

      // The same directory beside another database: its snapshot is not that database's.
      a = await startTestApp({ config: loadConfig({ ...shared, REPRISE_PG_SCHEMA: other.schema, REPRISE_DATA_DIR: aDir }), embedder });
      assert.equal(a.runtime.vectorsFromSnapshot, 0);
      assert.equal(a.runtime.index.size, 0);
    } finally {
      await a?.close();
      await b.close();
    }
  });
});

describe('cluster: a node that read its index from PostgreSQL saves it once whole', { skip }, () => {
  const schema = nodeSchema();

  test('a node started without a snapshot saves the index it read, and a start after a crash loads it', async () => {
    const shared = nodeEnv(schema);
    const embedder = await sharedEmbedder();
    const b = await startTestApp({ config: loadConfig({ ...shared, REPRISE_DATA_DIR: tempDir() }), embedder, keepData: true });
    let a: TestApp | null = null;
    let restarted: TestApp | null = null;
    try {
      const key = await b.key('node-rebuilt');
      await storeSpiderAndMars(b, key);
      const aDir = tempDir();
      a = await startTestApp({ config: loadConfig({ ...shared, REPRISE_DATA_DIR: aDir }), embedder, keepData: true });
      assert.equal(a.runtime.vectorsFromSnapshot, 0, 'read from PostgreSQL');
      // A killed at this moment: what its data directory holds, started on.
      const crashedDir = tempDir();
      cpSync(path.join(aDir, 'index'), path.join(crashedDir, 'index'), { recursive: true });
      await b.post('/api/v1/store', { messages: [user('What is the boiling point of water at sea level?')], answer: '100 °C.' }, key);
      restarted = await startTestApp({ config: loadConfig({ ...shared, REPRISE_DATA_DIR: crashedDir }), embedder });
      assert.equal(restarted.runtime.vectorsFromSnapshot, 2, 'the snapshot saved once the index was whole is loaded');
      await restarted.runtime.indexLoaded;
      const paraphrase = async (question: string) =>
        (await restarted?.post('/api/v1/check', { messages: [user(question)], similarity_threshold: 0.6 }, key))?.json();
      assert.equal((await paraphrase('Which planet is called the Red Planet?')).answer, 'Mars.');
      assert.equal((await paraphrase('At sea level, what is the boiling point of water?')).answer, '100 °C.');
    } finally {
      await restarted?.close();
      await a?.close();
      await b.close();
    }
  });
});

describe('cluster: a node snapshot and a change committed late, after the node was stopped', { skip }, () => {
  const schema = nodeSchema();

  test('a delete whose change number the node had given up on, committed while it was down, is applied at its next start', async () => {
    const config = loadConfig({ ...nodeEnv(schema), REPRISE_DATA_DIR: tempDir() });
    const embedder = await sharedEmbedder();
    let a: TestApp | null = await startTestApp({ config, embedder, keepData: true, runtime: { syncPollMs: 50 } });
    const late = new pg.Client({ connectionString: serviceUrl('DATABASE_URL') as string });
    const other = new pg.Client({ connectionString: serviceUrl('DATABASE_URL') as string });
    await late.connect();
    await other.connect();
    try {
      await late.query(`SET search_path TO ${schema}`);
      await other.query(`SET search_path TO ${schema}`);
      const key = await a.key('late-change');
      const spider = (
        await a.post('/api/v1/store', { messages: [user('How many legs does a spider have?')], answer: 'Eight.' }, key)
      ).json();
      await a.post('/api/v1/store', { messages: [user('Which planet is known as the Red Planet?')], answer: 'Mars.' }, key);
      await a.runtime.indexLoaded;
      assert.equal(a.runtime.index.size, 2);
      // A delete takes its change number, and stays uncommitted while more than a thousand
      // changes after it commit (deletes of entries no index holds).
      await late.query('BEGIN');
      const gone = (await late.query('DELETE FROM entries WHERE public_id = $1 RETURNING id, account_id, context_hash', [spider.entry_id]))
        .rows[0] as { id: string; account_id: string; context_hash: string };
      await late.query(`INSERT INTO entry_changes (entry_id, op, account_id, context_hash) VALUES ($1, 'delete', $2, $3)`, [
        gone.id,
        gone.account_id,
        gone.context_hash,
      ]);
      const last = Number(
        (
          await other.query(
            `INSERT INTO entry_changes (entry_id, op, account_id, context_hash)
             SELECT 0, 'delete', 'nobody', 'none' FROM generate_series(1, 1500) RETURNING seq`,
          )
        ).rows.at(-1).seq,
      );
      // The node gives the missing number up (a transaction rolled back, most likely), and stops.
      const sync = a.runtime.sync;
      assert.ok(sync);
      assert.ok(await eventually(async () => sync.appliedThrough >= last, 30_000), 'the node moved past the missing number');
      await a.close();
      a = null;
      await late.query('COMMIT');

      a = await startTestApp({ config, embedder, keepData: true, runtime: { syncPollMs: 50 } });
      assert.equal(a.runtime.vectorsFromSnapshot, 2, 'the snapshot was loaded');
      await a.runtime.indexLoaded;
      assert.equal(a.runtime.index.size, 1, 'the vector of the entry deleted is out of the index');
    } finally {
      await late.query('ROLLBACK').catch(() => undefined);
      await late.end();
      await other.end();
      await a?.close();
    }
  });
});

describe('cluster: a node snapshot when the change log was pruned up to it', { skip }, () => {
  const schema = nodeSchema();

  test('a node started from its snapshot and stopped at once leaves a snapshot the next start loads', async () => {
    const config = loadConfig({ ...nodeEnv(schema), REPRISE_DATA_DIR: tempDir() });
    const embedder = await sharedEmbedder();
    const client = new pg.Client({ connectionString: serviceUrl('DATABASE_URL') as string });
    await client.connect();
    let a: TestApp | null = await startTestApp({ config, embedder, keepData: true });
    try {
      await client.query(`SET search_path TO ${schema}`);
      const key = await a.key('pruned-log');
      const qa: [string, string][] = [
        ['How many legs does a spider have?', 'Eight.'],
        ['Which planet is known as the Red Planet?', 'Mars.'],
        ['What is the boiling point of water at sea level?', '100 °C.'],
      ];
      for (const [q, answer] of qa) await a.post('/api/v1/store', { messages: [user(q)], answer }, key);
      await a.runtime.indexLoaded;
      const sync = a.runtime.sync;
      assert.ok(sync);
      assert.ok(await eventually(async () => sync.appliedThrough >= 3));
      await a.close();
      a = null;
      const seq = Number((await client.query('SELECT seq FROM index_snapshots')).rows[0].seq);
      // The change log pruned up to the snapshot's number (as a week after its changes).
      await client.query('DELETE FROM entry_changes WHERE seq < $1', [seq]);

      a = await startTestApp({ config, embedder, keepData: true });
      assert.equal(a.runtime.vectorsFromSnapshot, 3);
      await a.runtime.indexLoaded;
      await a.close();
      a = null;
      a = await startTestApp({ config, embedder, keepData: true });
      assert.equal(a.runtime.vectorsFromSnapshot, 3, 'the snapshot saved at the second stop is loaded');
      await a.runtime.indexLoaded;
      assert.equal(a.runtime.index.size, 3);
    } finally {
      await a?.close();
      await client.end();
    }
  });
});

describe('cluster: a node snapshot when PostgreSQL refuses its record at shutdown', { skip }, () => {
  const schema = nodeSchema();

  test('the snapshot loaded at start stays on disk, and the next start loads it', async () => {
    const config = loadConfig({ ...nodeEnv(schema), REPRISE_DATA_DIR: tempDir() });
    const embedder = await sharedEmbedder();
    const client = new pg.Client({ connectionString: serviceUrl('DATABASE_URL') as string });
    await client.connect();
    let a: TestApp | null = await startTestApp({ config, embedder, keepData: true });
    try {
      await client.query(`SET search_path TO ${schema}`);
      const key = await a.key('record-refused');
      await storeSpiderAndMars(a, key);
      await a.runtime.indexLoaded;
      await a.close();
      a = null;
      a = await startTestApp({ config, embedder, keepData: true });
      assert.equal(a.runtime.vectorsFromSnapshot, 2);
      await a.runtime.indexLoaded;
      await a.post('/api/v1/store', { messages: [user('What is the boiling point of water at sea level?')], answer: '100 °C.' }, key);
      // The record of the snapshot cannot be written at this stop.
      await client.query('ALTER TABLE index_snapshots RENAME TO index_snapshots_away');
      await a.close();
      a = null;
      await client.query('ALTER TABLE index_snapshots_away RENAME TO index_snapshots');

      a = await startTestApp({ config, embedder, keepData: true });
      assert.equal(a.runtime.vectorsFromSnapshot, 2, 'the snapshot of the start before is loaded');
      await a.runtime.indexLoaded;
      assert.equal(a.runtime.index.size, 3, 'and the store made since is applied from the change log');
    } finally {
      await a?.close();
      await client.end();
    }
  });
});

describe('cluster: a node snapshot damaged, and a data directory shared', { skip }, () => {
  const schema = nodeSchema();

  test("a damaged snapshot is not loaded; a second node on the same directory keeps none and leaves the first one's", async () => {
    const dir = tempDir();
    const config = loadConfig({ ...nodeEnv(schema), REPRISE_DATA_DIR: dir });
    const embedder = await sharedEmbedder();
    let a: TestApp | null = await startTestApp({ config, embedder, keepData: true });
    let b: TestApp | null = null;
    try {
      const key = await a.key('damaged');
      await storeSpiderAndMars(a, key);
      await a.runtime.indexLoaded;
      await a.close();
      a = null;
      appendFileSync(path.join(dir, 'index', 'flat.bin'), Buffer.from([1, 2, 3, 4]));
      a = await startTestApp({ config, embedder, keepData: true });
      assert.equal(a.runtime.vectorsFromSnapshot, 0, 'the damaged snapshot is not loaded');
      await a.runtime.indexLoaded;
      assert.equal(a.runtime.index.size, 2, 'the index is read from PostgreSQL');

      // A second node on the same directory, while the first runs.
      b = await startTestApp({ config, embedder, keepData: true });
      assert.equal(b.runtime.vectorsFromSnapshot, 0);
      await b.runtime.indexLoaded;
      assert.equal(b.runtime.index.size, 2);
      await a.close();
      a = null;
      await b.close();
      b = null;
      a = await startTestApp({ config, embedder, keepData: true });
      assert.equal(a.runtime.vectorsFromSnapshot, 2, 'the snapshot of the first node is loaded');
    } finally {
      await a?.close();
      await b?.close();
    }
  });
});

describe('cluster: a node snapshot and an account deleted while the node was down', { skip }, () => {
  const schema = nodeSchema();

  test('the vectors of the account deleted are out of the index loaded from the snapshot', async () => {
    const shared = nodeEnv(schema);
    const config = loadConfig({ ...shared, REPRISE_DATA_DIR: tempDir() });
    const embedder = await sharedEmbedder();
    let a: TestApp | null = await startTestApp({ config, embedder, keepData: true });
    const b = await startTestApp({ config: loadConfig({ ...shared, REPRISE_DATA_DIR: tempDir() }), embedder });
    try {
      const gone = await a.key('gone');
      const kept = await a.key('kept');
      await storeSpiderAndMars(a, gone);
      await a.post('/api/v1/store', { messages: [user('Which planet is known as the Red Planet?')], answer: 'Mars.' }, kept);
      await a.runtime.indexLoaded;
      await a.close();
      a = null;
      const account = await b.runtime.ctx.store.getAccountByName('gone');
      assert.ok(account);
      // As `reprise accounts delete`: the account, then its entries.
      assert.equal((await b.runtime.ctx.store.deleteAccount(account.id))?.entries, 2);
      assert.equal((await b.runtime.ctx.store.purgeDeletedAccounts?.())?.entries, 2);

      a = await startTestApp({ config, embedder, keepData: true });
      assert.equal(a.runtime.vectorsFromSnapshot, 3);
      await a.runtime.indexLoaded;
      assert.equal(a.runtime.index.size, 1);
    } finally {
      await a?.close();
      await b.close();
    }
  });
});

describe('cluster: an account being deleted', { skip }, () => {
  const schema = nodeSchema();

  test(
    "its keys are refused on every node from the deletion's start, and none of its stores is taken meanwhile",
    { timeout: 60_000 },
    async () => {
      const env = nodeEnv(schema);
      const [a, b] = await Promise.all([
        startTestApp({ config: loadConfig({ ...env, REPRISE_DATA_DIR: tempDir() }) }),
        startTestApp({ config: loadConfig({ ...env, REPRISE_DATA_DIR: tempDir() }) }),
      ]);
      // Another transaction holds one of the account's entries: the deletion's removal of its
      // entries waits for it, as it waits for the time 100,000 entries take to delete.
      const holder = new pg.Client({ connectionString: serviceUrl('DATABASE_URL') as string, options: `-c search_path=${schema}` });
      await holder.connect();
      const watcher = new pg.Client({ connectionString: serviceUrl('DATABASE_URL') as string });
      await watcher.connect();
      let held = false;
      try {
        const key = await a.key('leaving');
        const other = await b.key('staying');
        const store = (i: number) => ({ messages: [user(`How do I cook rice, take ${i}?`)], answer: `Boil it ${i}.` });
        assert.equal((await a.post('/api/v1/store', store(0), key)).statusCode, 200);
        // Both nodes remember the key (checks that miss: hits would have counts to write to the entry held).
        for (const node of [a, b]) assert.equal((await node.post('/api/v1/check', store(9), key)).json().cache_hit, false);
        const account = await a.runtime.ctx.store.getAccountByName('leaving');
        assert.ok(account);

        await holder.query('BEGIN');
        held = true;
        await holder.query('SELECT 1 FROM entries WHERE account_id = $1 FOR UPDATE', [account.id]);
        // `reprise accounts delete`, its connections named so that its wait can be seen.
        const app = `reprise-delete-${uniquePrefix().split(':')[1]}`;
        const url = new URL(env.DATABASE_URL);
        url.searchParams.set('application_name', app);
        const deleting = startCli(['accounts', 'delete', 'leaving', '--yes'], {
          ...env,
          DATABASE_URL: url.href,
          REPRISE_DATA_DIR: tempDir(),
        });
        const holderPid = (await holder.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
        const waitsForHolder = async () =>
          (
            await watcher.query(
              'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND $2 = ANY(pg_blocking_pids(pid))',
              [app, holderPid],
            )
          ).rows[0].n > 0;
        assert.ok(await eventually(waitsForHolder, 30_000), 'the deletion waits for the entry held');

        for (const node of [a, b]) {
          const stored = await node.post('/api/v1/store', store(1), key);
          assert.equal(stored.statusCode, 401, stored.body);
          assert.equal(stored.json().error.code, 'INVALID_API_KEY');
          const checked = await node.post('/api/v1/check', store(0), key);
          assert.equal(checked.statusCode, 401, checked.body);
          // Another account is served as usual.
          assert.equal((await node.post('/api/v1/store', store(2), other)).statusCode, 200);
        }
        // Its name is free at once.
        assert.ok(await b.runtime.ctx.store.createAccount('leaving', 'free'));

        await holder.query('COMMIT');
        held = false;
        const done = await deleting.exited;
        assert.equal(done.code, 0, done.stderr);
        for (const node of [a, b]) assert.equal((await node.post('/api/v1/store', store(3), key)).statusCode, 401);
        const left = await holder.query('SELECT count(*)::int AS n FROM entries WHERE account_id = $1', [account.id]);
        assert.equal(left.rows[0].n, 0);
        assert.equal((await b.post('/api/v1/check', store(2), other)).json().cache_hit, true);
      } finally {
        if (held) await holder.query('ROLLBACK');
        await holder.end();
        await watcher.end();
        await a.close();
        await b.close();
      }
    },
  );
});

describe('cluster: a deletion interrupted after the account was marked deleted', { skip }, () => {
  const schema = nodeSchema();

  test('a node removes what is left of it, and the account is gone meanwhile', { timeout: 60_000 }, async () => {
    const env = nodeEnv(schema);
    const config = loadConfig({ ...env, REPRISE_DATA_DIR: tempDir() });
    let a: TestApp | null = await startTestApp({ config });
    const db = new pg.Client({ connectionString: serviceUrl('DATABASE_URL') as string, options: `-c search_path=${schema}` });
    await db.connect();
    try {
      const key = await a.key('interrupted');
      for (let i = 0; i < 3; i++) {
        assert.equal((await a.post('/api/v1/store', { messages: [user(`Question ${i}`)], answer: `Answer ${i}` }, key)).statusCode, 200);
      }
      await a.close();
      a = null;
      // `reprise accounts delete` killed once the account is marked, before it removed any entry.
      const cli = await PostgresStore.open(env.DATABASE_URL, { schema });
      const account = await cli.getAccountByName('interrupted');
      assert.ok(account);
      assert.equal((await cli.deleteAccount(account.id))?.entries, 3);
      await cli.close();
      const left = async () =>
        (await db.query('SELECT count(*)::int AS n FROM entries WHERE account_id = $1', [account.id])).rows[0].n as number;
      assert.equal(await left(), 3);

      a = await startTestApp({ config });
      assert.equal((await a.post('/api/v1/check', { messages: [user('Question 0')] }, key)).statusCode, 401);
      assert.ok(await eventually(async () => (await left()) === 0), 'the node removes its entries');
      assert.ok(
        await eventually(
          async () => (await db.query('SELECT count(*)::int AS n FROM accounts WHERE id = $1', [account.id])).rows[0].n === 0,
        ),
      );
    } finally {
      await db.end();
      await a?.close();
    }
  });

  test('accounts delete that loses the database once the account is marked says the account is deleted, and why the rest is not', async () => {
    const env = nodeEnv(schema);
    const store = await PostgresStore.open(env.DATABASE_URL, { schema });
    const holder = new pg.Client({ connectionString: env.DATABASE_URL, options: `-c search_path=${schema}` });
    await holder.connect();
    try {
      const account = await store.createAccount('cut-off', 'free');
      await store.putEntry(entry(account.id));
      // The removal of its entries waits for the one held, and its connection is then ended.
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM entries WHERE account_id = $1 FOR UPDATE', [account.id]);
      const app = `reprise-cut-${uniquePrefix().split(':')[1]}`;
      const url = new URL(env.DATABASE_URL);
      url.searchParams.set('application_name', app);
      const cli = startCli(['accounts', 'delete', 'cut-off', '--yes'], { ...env, DATABASE_URL: url.href, REPRISE_DATA_DIR: tempDir() });
      const waiting = async () =>
        (
          await store.pool.query(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
            [app],
          )
        ).rows[0].n > 0;
      assert.ok(await eventually(waiting, 30_000), 'the removal waits');
      await store.pool.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [app]);
      const done = await cli.exited;
      assert.equal(done.code, 1);
      assert.match(done.stderr, /account cut-off is deleted: its keys are refused/);
      assert.match(done.stderr, /the server finishes it/);
      assert.doesNotMatch(done.stderr, /unavailable: database unavailable/);
      assert.equal(await store.getAccountByName('cut-off'), null);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
      await store.close();
    }
  });
});

/** A module that, loaded with --import before the server's, sets the process's clock `offsetMs` off; its path. */
function clockSkew(offsetMs: number): string {
  const file = path.join(tempDir(), 'skew.mjs');
  writeFileSync(
    file,
    `const Real = Date; const off = ${offsetMs};
     globalThis.Date = class extends Real { constructor(...a) { if (a.length === 0) super(Real.now() + off); else super(...a); } static now() { return Real.now() + off; } };`,
  );
  return file;
}

describe('cluster: a node whose clock is off', { skip }, () => {
  const schema = nodeSchema();

  test("an entry's lifetime ends at the same moment on every node, whatever a node's clock says", { timeout: 60_000 }, async () => {
    // Node A's clock is two hours behind (its Date, from a module loaded before the server's).
    const skew = clockSkew(-2 * 3600_000);
    const a = await startServerProcess({ ...nodeEnv(schema), REPRISE_DATA_DIR: tempDir(), NODE_OPTIONS: `--import ${skew}` });
    const b = await startTestApp({ config: loadConfig({ ...nodeEnv(schema), REPRISE_DATA_DIR: tempDir() }) });
    try {
      const key = await b.key('clocks');
      const messages = (q: string) => ({ messages: [user(q)] });
      // Stored on A for an hour: live on B too, though A's clock puts its end an hour before B's now.
      const onA = await api(a.url, 'POST', '/api/v1/store', key, {
        ...messages('Stored on the node behind'),
        answer: 'A',
        ttl_seconds: 3600,
      });
      assert.equal(onA.status, 200);
      assert.equal((await b.post('/api/v1/check', messages('Stored on the node behind'), key)).json().cache_hit, true);
      // Stored on B for a second: once B finds it expired, A does too, not two hours later.
      assert.equal(
        (await b.post('/api/v1/store', { ...messages('Stored for a second'), answer: 'B', ttl_seconds: 1 }, key)).statusCode,
        200,
      );
      assert.equal((await api(a.url, 'POST', '/api/v1/check', key, messages('Stored for a second'))).json.cache_hit, true);
      assert.ok(
        await eventually(async () => (await b.post('/api/v1/check', messages('Stored for a second'), key)).json().cache_hit === false),
      );
      assert.equal((await api(a.url, 'POST', '/api/v1/check', key, messages('Stored for a second'))).json.cache_hit, false);
    } finally {
      await a.stop();
      await b.close();
    }
  });
});

describe('cluster: a node whose clock is ahead, with semantic search', { skip }, () => {
  const schema = nodeSchema();

  test("another node's entry of an hour is a semantic hit on it, however far ahead its clock is", { timeout: 120_000 }, async () => {
    const skew = clockSkew(2 * 3600_000);
    const b = await startTestApp({
      config: loadConfig({ ...nodeEnv(schema), REPRISE_DATA_DIR: tempDir() }),
      embedder: await sharedEmbedder(),
    });
    const a = await startServerProcess({
      ...nodeEnv(schema),
      REPRISE_EMBEDDER: 'use-lite',
      REPRISE_DATA_DIR: tempDir(),
      NODE_OPTIONS: `--import ${skew}`,
    });
    try {
      const key = await b.key('clock-ahead');
      const stored = await b.post(
        '/api/v1/store',
        { messages: [user('How do I install Docker on Ubuntu?')], answer: 'sudo apt-get install docker.io', ttl_seconds: 3600 },
        key,
      );
      assert.equal(stored.statusCode, 200);
      const hit = async () =>
        (await api(a.url, 'POST', '/api/v1/check', key, { messages: [user('How can I install Docker on Ubuntu?')] })).json.cache_hit ===
        true;
      assert.ok(await eventually(hit, 20_000), 'a semantic hit on the node ahead');
    } finally {
      await a.stop();
      await b.close();
    }
  });
});

describe('cluster: a node that stops in the middle of stores', { skip }, () => {
  const schema = nodeSchema();

  test("the account's stores on the other nodes wait for one of its transactions, not for each in turn", { timeout: 120_000 }, async () => {
    // Node A, a process of its own, ends up frozen (SIGSTOP: a paused VM, a network cut) with
    // one store's transaction holding the account's storage counts and its other stores of
    // that account queued behind it. PostgreSQL ends the transaction left idle after A's
    // 1 s query timeout; the stores A had queued must not each take the lock and hold it 1 s more.
    const app = `reprise-frozen-${uniquePrefix().split(':')[1]}`;
    const url = new URL(serviceUrl('DATABASE_URL') as string);
    url.searchParams.set('application_name', app);
    const a = await startServerProcess({
      ...nodeEnv(schema),
      DATABASE_URL: url.href,
      REPRISE_DATA_DIR: tempDir(),
      REPRISE_PG_QUERY_TIMEOUT_MS: '1000',
    });
    // Node B waits up to 3 s for a query: more than A's one transaction, less than its queue.
    const b = await startTestApp({
      config: loadConfig({ ...nodeEnv(schema), REPRISE_DATA_DIR: tempDir(), REPRISE_PG_QUERY_TIMEOUT_MS: '3000' }),
    });
    // Node C waits as long as A: its store, made as A stops, may wait for the lock longer than that allows.
    const c = await startTestApp({
      config: loadConfig({ ...nodeEnv(schema), REPRISE_DATA_DIR: tempDir(), REPRISE_PG_QUERY_TIMEOUT_MS: '1000' }),
    });
    const watcher = new pg.Client({ connectionString: serviceUrl('DATABASE_URL') as string });
    await watcher.connect();
    let stopped = false;
    try {
      const key = await b.key('frozen-writer', 'unlimited');
      const onA = new Set<number>();
      const writers = Array.from({ length: 8 }, async (_, w) => {
        for (let i = 0; !stopped; i++) {
          const res = await api(a.url, 'POST', '/api/v1/store', key, { messages: [user(`stored on A ${w} ${i}`)], answer: 'A' });
          onA.add(res.status);
        }
      });
      // Frozen with one transaction idle and at least six stores waiting for its lock.
      const activity = async () => {
        const { rows } = await watcher.query(
          `SELECT count(*) FILTER (WHERE state LIKE 'idle in transaction%') AS idle, count(*) FILTER (WHERE wait_event_type = 'Lock') AS queued
             FROM pg_stat_activity WHERE application_name = $1`,
          [app],
        );
        return { idle: Number(rows[0].idle), queued: Number(rows[0].queued) };
      };
      let frozen = false;
      for (let i = 0; i < 20 && !frozen; i++) {
        a.child.kill('SIGCONT');
        assert.ok(await eventually(async () => (await activity()).queued >= 6), 'node A stores');
        a.child.kill('SIGSTOP');
        frozen = await eventually(async () => {
          const { idle, queued } = await activity();
          return idle >= 1 && queued >= 6;
        }, 300);
      }
      assert.ok(frozen, 'node A stopped with stores queued behind an open transaction');

      // The account's stores on B while A stays stopped: the first waits for A's one transaction.
      const onC = c.post('/api/v1/store', { messages: [user('stored on C meanwhile')], answer: 'C' }, key);
      const answered: number[] = [];
      for (let i = 0; i < 4; i++) {
        answered.push((await b.post('/api/v1/store', { messages: [user(`stored on B meanwhile ${i}`)], answer: 'B' }, key)).statusCode);
      }
      assert.deepEqual(answered, [200, 200, 200, 200]);
      // Given up waiting, or let in: a 503 to retry, not an error of the server.
      const fromC = await onC;
      assert.ok(fromC.statusCode === 200 || fromC.json().error.code === 'SERVICE_UNAVAILABLE', fromC.body);
      a.child.kill('SIGCONT');
      stopped = true;
      await Promise.all(writers);
      // A's stores that were let go, or whose transaction was ended, are 503 for its clients to
      // retry; none is an error of the server. (How many of them were let in first depends on
      // the machine's load.)
      assert.ok(onA.has(503), `node A's statuses: ${[...onA].join(', ')}`);
      assert.ok(
        [...onA].every((s) => s === 200 || s === 503),
        `node A's statuses: ${[...onA].join(', ')}`,
      );
      // Node A goes on serving once it runs again.
      const hit = await api(a.url, 'POST', '/api/v1/check', key, { messages: [user('stored on B meanwhile 3')] });
      assert.equal(hit.json.answer, 'B');
    } finally {
      stopped = true;
      a.child.kill('SIGCONT');
      await a.stop();
      await b.close();
      await c.close();
      await watcher.end();
    }
  });
});
