import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import Database from 'better-sqlite3';
import pg from 'pg';
import { loadConfig } from '../src/config.ts';
import type { Account } from '../src/store/interface.ts';
import { sqlitePath } from '../src/runtime.ts';
import { closeSharedEmbedder, sharedEmbedder, startTestApp, tempDir, testConfig, user, type TestApp } from './helpers.ts';
import { freePort, PrivatePostgres, PrivateRedis } from './private-servers.ts';
import { eventually, freshSchema, serviceUrl, skipReason, uniquePrefix } from './services.ts';

// These tests start, stop and restart servers of their own on other ports; they need the
// PostgreSQL binaries and redis-server installed (as on the CI machine), not the shared servers.
const skip = process.env.CI === 'true' || process.env.DATABASE_URL ? false : 'set DATABASE_URL (or CI=true) to run the fault tests';

describe('faults: PostgreSQL restarts and Redis goes away during traffic', { skip }, () => {
  let pgServer: PrivatePostgres;
  let redis: PrivateRedis;
  let node: TestApp;
  let key: string;

  before(async () => {
    pgServer = new PrivatePostgres(await freePort());
    await pgServer.init();
    await pgServer.start();
    redis = new PrivateRedis(await freePort());
    await redis.start();
    node = await startTestApp({
      config: loadConfig({
        REPRISE_DATA_DIR: tempDir(),
        REPRISE_EMBEDDER: 'none',
        DATABASE_URL: pgServer.url,
        REDIS_URL: redis.url,
        REPRISE_PG_QUERY_TIMEOUT_MS: '1000',
      }),
    });
    key = await node.key('faulty', 'pro');
  });
  after(async () => {
    await node?.close().catch(() => undefined);
    await redis?.stop();
    await pgServer?.destroy();
  });

  test('Redis stopped: requests are still answered (limits fail open); restarted: shared limits resume', async () => {
    await redis.stop();
    for (let i = 0; i < 5; i++) {
      const res = await node.post('/api/v1/check', { messages: [user(`redis down ${i}`)] }, key);
      assert.equal(res.statusCode, 200);
      assert.ok(res.headers['x-ratelimit-remaining']);
    }
    // Ready all the same, and saying the limits are per node for now.
    const health = await node.get('/healthz');
    assert.equal(health.statusCode, 200);
    assert.equal(health.json().checks.limiter, 'degraded');
    await redis.start();
    const back = await eventually(async () => {
      const res = await node.get('/api/v1/usage', key);
      // A fresh shared bucket: the pro burst minus this request.
      return res.statusCode === 200 && res.headers['x-ratelimit-remaining'] === '999';
    });
    assert.ok(back, 'the node uses the restarted Redis again');
    assert.equal((await node.get('/healthz')).json().checks.limiter, 'ok');
  });

  test('PostgreSQL restarted: 503 while it is down, no crash, nothing acknowledged lost, recovery by itself', async () => {
    const acked: number[] = [];
    await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const res = await node.post('/api/v1/store', { messages: [user(`kept ${i}`)], answer: `answer ${i}` }, key);
        if (res.statusCode === 200 && res.json().stored === true) acked.push(i);
      }),
    );
    assert.equal(acked.length, 20);

    await pgServer.stop();
    try {
      const down = await node.post('/api/v1/store', { messages: [user('during the outage')], answer: 'x' }, key);
      assert.equal(down.statusCode, 503);
      assert.equal(down.json().error.code, 'SERVICE_UNAVAILABLE');
      const check = await node.post('/api/v1/check', { messages: [user('kept 1')] }, key);
      assert.equal(check.statusCode, 503);
      // A key the node has not seen is looked up in the database, which is down: a 503 too, with
      // the rate-limit headers the spec puts on every response (the caller's address's).
      const unseen = await node.get('/api/v1/usage', `rp_live_${'x'.repeat(40)}`);
      assert.equal(unseen.statusCode, 503, unseen.body);
      for (const name of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) {
        assert.match(String(unseen.headers[name]), /^\d+$/, name);
      }
      const health = await node.get('/healthz');
      assert.equal(health.statusCode, 503);
      // Which part is down, but not the database's address or its error.
      assert.equal(health.json().error.message, 'Reprise is not ready (store: unavailable)');
    } finally {
      // Started again whatever failed above, so the node can close (its last counters go to it).
      await pgServer.start();
    }
    const recovered = await eventually(async () => (await node.get('/healthz')).statusCode === 200, 20_000);
    assert.ok(recovered, 'the node recovers without a restart');
    for (const i of acked) {
      const hit = (await node.post('/api/v1/check', { messages: [user(`kept ${i}`)] }, key)).json();
      assert.equal(hit.answer, `answer ${i}`);
    }
  });
  test('PostgreSQL that takes no writes (a standby after a failover): stores 503, checks answered, stores again once it takes them', async () => {
    const messages = [user('stored before the database turned read-only')];
    assert.equal((await node.post('/api/v1/store', { messages, answer: 'kept' }, key)).statusCode, 200);
    // Every session, the node's open ones too, reads the setting again at its next command.
    const readOnly = async (on: boolean) => {
      const admin = new pg.Client({ connectionString: pgServer.url, options: '-c default_transaction_read_only=off' });
      await admin.connect();
      try {
        await admin.query(on ? 'ALTER SYSTEM SET default_transaction_read_only = on' : 'ALTER SYSTEM RESET default_transaction_read_only');
        await admin.query('SELECT pg_reload_conf()');
      } finally {
        await admin.end();
      }
    };
    await readOnly(true);
    try {
      let store: Awaited<ReturnType<TestApp['post']>> | undefined;
      assert.ok(
        await eventually(async () => {
          store = await node.post('/api/v1/store', { messages: [user('written while read-only')], answer: 'x' }, key);
          return store.statusCode !== 200;
        }),
        'a store is refused once the database takes no writes',
      );
      assert.equal(store?.statusCode, 503, store?.body);
      assert.equal(store?.json().error.code, 'SERVICE_UNAVAILABLE');
      const hit = await node.post('/api/v1/check', { messages }, key);
      assert.equal(hit.statusCode, 200);
      assert.equal(hit.json().answer, 'kept');
    } finally {
      await readOnly(false);
    }
    const back = await eventually(
      async () => (await node.post('/api/v1/store', { messages: [user('written after')], answer: 'y' }, key)).statusCode === 200,
    );
    assert.ok(back, 'stores are taken again once the database takes writes');
  });

  test('Redis that accepts connections and never answers: requests do not wait for it', { timeout: 60_000 }, async () => {
    const pausedMs = 8000;
    const until = Date.now() + pausedMs;
    redis.pause(pausedMs);
    // Each would wait out the client's 1 s command timeout if the limiter kept asking Redis.
    for (let i = 0; i < 20; i++) {
      const res = await node.post('/api/v1/check', { messages: [user(`redis paused ${i}`)] }, key);
      assert.equal(res.statusCode, 200);
      assert.ok(res.headers['x-ratelimit-remaining']);
    }
    assert.ok(Date.now() < until, 'the 20 requests were answered while Redis was still paused');
    assert.equal((await node.get('/healthz')).json().checks.limiter, 'degraded');
    const back = await eventually(async () => (await node.get('/healthz')).json().checks.limiter === 'ok', 20_000);
    assert.ok(back, 'the shared limits are used again once Redis answers');
  });

  test(
    'PostgreSQL that stops answering on open connections: 503, not a hang; answers again when it does',
    { timeout: 60_000 },
    async () => {
      assert.equal((await node.post('/api/v1/store', { messages: [user('before the freeze')], answer: 'a' }, key)).statusCode, 200);
      pgServer.freeze();
      // Let it go on in any case, so that a node that waits for it fails this test instead of hanging it.
      const thaw = setTimeout(() => pgServer.thaw(), 20_000);
      try {
        const store = await node.post('/api/v1/store', { messages: [user('during the freeze')], answer: 'x' }, key);
        assert.equal(store.statusCode, 503);
        assert.equal(store.json().error.code, 'SERVICE_UNAVAILABLE');
        const check = await node.post('/api/v1/check', { messages: [user('asked during the freeze')] }, key);
        assert.equal(check.statusCode, 503);
        assert.equal((await node.get('/healthz')).statusCode, 503);
      } finally {
        clearTimeout(thaw);
        pgServer.thaw();
      }
      const recovered = await eventually(async () => (await node.get('/healthz')).statusCode === 200, 20_000);
      assert.ok(recovered, 'the node recovers without a restart');
      assert.equal((await node.post('/api/v1/check', { messages: [user('before the freeze')] }, key)).json().cache_hit, true);
    },
  );
});

describe('faults: a node started while Redis is down', { skip: skipReason('DATABASE_URL') }, () => {
  const { schema, drop } = freshSchema();
  let redis: PrivateRedis;
  let node: TestApp;
  after(async () => {
    await node?.close().catch(() => undefined);
    await redis?.stop();
    await drop();
  });

  test('is degraded from the start, in its health body and its log, and shares the limits once Redis is up', async () => {
    redis = new PrivateRedis(await freePort());
    const warnings: string[] = [];
    const log = { info: () => undefined, warn: (_obj: object, msg: string) => warnings.push(msg) };
    node = await startTestApp({
      config: loadConfig({
        REPRISE_DATA_DIR: tempDir(),
        REPRISE_EMBEDDER: 'none',
        DATABASE_URL: serviceUrl('DATABASE_URL') as string,
        REPRISE_PG_SCHEMA: schema,
        REDIS_URL: redis.url,
        REPRISE_REDIS_PREFIX: uniquePrefix(),
      }),
      runtime: { log },
    });
    // Before any request has asked Redis: a load balancer or an operator reading the health body
    // learns that the limits are per node.
    const health = await node.get('/healthz');
    assert.equal(health.statusCode, 200);
    assert.equal(health.json().checks.limiter, 'degraded');
    assert.equal(warnings.filter((m) => /REDIS_URL/.test(m)).length, 1, 'the outage is logged once, at start');
    await redis.start();
    // With no request coming, the node finds Redis again by itself.
    assert.ok(await eventually(async () => (await node.get('/healthz')).json().checks.limiter === 'ok'));
    const key = await node.key('after-redis-came', 'pro');
    const res = await node.get('/api/v1/usage', key);
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['x-ratelimit-remaining'], '999');
  });
});

describe('faults: PostgreSQL stops answering during a semantic check', { skip }, () => {
  let pgServer: PrivatePostgres;
  let node: TestApp;
  let key: string;
  let account: Account | null;
  before(async () => {
    pgServer = new PrivatePostgres(await freePort());
    await pgServer.init();
    await pgServer.start();
    node = await startTestApp({
      config: loadConfig({ REPRISE_DATA_DIR: tempDir(), DATABASE_URL: pgServer.url, REPRISE_PG_QUERY_TIMEOUT_MS: '1000' }),
      embedder: await sharedEmbedder(),
    });
    key = await node.key('semantic-outage', 'pro');
    account = await node.runtime.ctx.store.getAccountByName('semantic-outage');
  });
  after(async () => {
    await node?.close().catch(() => undefined);
    await pgServer?.destroy();
    await closeSharedEmbedder();
  });

  test('the store down while candidates are read is its error (503), not taken for the embedder', { timeout: 60_000 }, async () => {
    const messages = [user('Which planet is known as the Red Planet?')];
    assert.equal((await node.post('/api/v1/store', { messages, answer: 'Mars.' }, key)).statusCode, 200);
    pgServer.freeze();
    const thaw = setTimeout(() => pgServer.thaw(), 20_000);
    try {
      // The check itself, past the key (which a request would read from the database first): its
      // first read of the database is the candidate's, after the embedding.
      assert.ok(account);
      await assert.rejects(Promise.resolve(node.runtime.ctx.cache.check(account, { messages, cacheTypes: ['semantic'] })), (err: Error) => {
        assert.equal(err.name, 'StoreUnavailableError');
        return true;
      });
      const health = await node.get('/healthz');
      assert.equal(health.statusCode, 503);
      assert.equal(health.json().error.message, 'Reprise is not ready (store: unavailable)');
    } finally {
      clearTimeout(thaw);
      pgServer.thaw();
    }
  });
});

describe('faults: the embedded database cannot be written for a while', () => {
  test('another process holding the write lock: stores are 503 and retried, exact checks still answered, nothing half-written', async () => {
    const node = await startTestApp();
    const other = new Database(sqlitePath(node.config));
    try {
      const key = await node.key('locked-out', 'pro');
      const kept = [user('stored before the lock')];
      assert.equal((await node.post('/api/v1/store', { messages: kept, answer: 'kept' }, key)).json().stored, true);
      // What an operator's `sqlite3 reprise.db` with a transaction left open does.
      other.exec('BEGIN IMMEDIATE');
      const refused = await node.post('/api/v1/store', { messages: [user('stored during the lock')], answer: 'later' }, key);
      assert.equal(refused.statusCode, 503, refused.body);
      assert.equal(refused.json().error.code, 'SERVICE_UNAVAILABLE');
      assert.equal(refused.json().status, 503);
      const hit = await node.post('/api/v1/check', { messages: kept }, key);
      assert.equal(hit.statusCode, 200);
      assert.equal(hit.json().answer, 'kept');
      // Ready still (reads are answered), and saying that writes fail.
      const health = await node.get('/healthz');
      assert.equal(health.statusCode, 200);
      assert.equal(health.json().checks.store, 'read-only');
      other.exec('ROLLBACK');
      const retried = await node.post('/api/v1/store', { messages: [user('stored during the lock')], answer: 'later' }, key);
      assert.equal(retried.json().stored, true);
      assert.equal((await node.get('/healthz')).json().checks.store, 'ok');
      assert.equal((await node.post('/api/v1/check', { messages: [user('stored during the lock')] }, key)).json().answer, 'later');
    } finally {
      other.close();
      await node.close();
    }
  });

  test('the database file removed while the server runs: the health says so at once, and stores are 503, not acknowledged into a file no start reads', async () => {
    const node = await startTestApp();
    const key = await node.key('removed', 'pro');
    const kept = [user('stored before the removal')];
    assert.equal((await node.post('/api/v1/store', { messages: kept, answer: 'kept' }, key)).json().stored, true);
    // What `rm -rf data/*` (or a clean-up of the temporary directory) does beside a running server.
    rmSync(sqlitePath(node.config));
    rmSync(`${sqlitePath(node.config)}-wal`, { force: true });
    try {
      const health = await node.get('/healthz');
      assert.equal(health.statusCode, 200);
      assert.equal(health.json().checks.store, 'read-only');
      const refused = await node.post('/api/v1/store', { messages: [user('stored after the removal')], answer: 'lost' }, key);
      assert.equal(refused.statusCode, 503, refused.body);
      assert.equal(refused.json().error.code, 'SERVICE_UNAVAILABLE');
      // What the open file holds is still served.
      assert.equal((await node.post('/api/v1/check', { messages: kept }, key)).json().answer, 'kept');
      assert.equal((await node.get('/api/v1/health', key)).json().data.checks.store, 'read-only');
    } finally {
      // Its last counters cannot be written either (the close fails, as the shutdown says).
      await node.close().catch(() => undefined);
    }
  });

  test('another process holding the write lock: a store waits for it while other requests are answered, and is kept once it is released', async () => {
    const config = testConfig();
    const node = await startTestApp({ config, keepData: true });
    const other = new Database(sqlitePath(config));
    let key = '';
    const kept = [user('stored before the lock')];
    const waited = [user('stored while the lock was held')];
    try {
      key = await node.key('waiting', 'pro');
      assert.equal((await node.post('/api/v1/store', { messages: kept, answer: 'kept' }, key)).json().stored, true);
      other.exec('BEGIN IMMEDIATE');
      let settled = false;
      const store = node.post('/api/v1/store', { messages: waited, answer: 'waited' }, key);
      void store.finally(() => (settled = true)).catch(() => undefined);
      // Each request goes through while the store waits for the lock: none waits with it.
      for (let i = 0; i < 5; i++) {
        const hit = await node.post('/api/v1/check', { messages: kept }, key);
        assert.equal(hit.statusCode, 200, hit.body);
        assert.equal(hit.json().answer, 'kept');
        assert.equal((await node.post('/api/v1/check', { messages: waited }, key)).json().cache_hit, false);
        assert.equal((await node.get('/healthz')).statusCode, 200);
        assert.equal(settled, false, `the store was answered while the lock was still held (after ${i} rounds of requests)`);
        // Lets the waiting store try again in between.
        await nextTurn();
      }
      other.exec('ROLLBACK');
      const stored = await store;
      assert.equal(stored.statusCode, 200, stored.body);
      assert.equal(stored.json().stored, true);
    } finally {
      other.close();
      await node.close();
    }
    const again = await startTestApp({ config });
    try {
      const hit = await again.post('/api/v1/check', { messages: waited }, key);
      assert.equal(hit.json().answer, 'waited', hit.body);
    } finally {
      await again.close();
    }
  });
});
