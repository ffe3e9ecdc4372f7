import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { eventually, freshSchema, serviceUrl, skipReason } from '../../test/services.ts';
import { bytesOf, entry, storeConformance } from './conformance.ts';
import { AccountGoneError, type Account, type Entry } from './interface.ts';
import { CHANGES_KEPT_DAYS, PostgresStore } from './postgres.ts';
import { emptyDelta, UsageRecorder } from '../cache/usage.ts';

/**
 * A store in a schema of its own and a second connection to that schema (another node, or an
 * operator in psql), opened before the suite's tests and closed after them.
 */
function storeBeside(options: { queryTimeoutMs?: number } = {}): { schema: string; store: PostgresStore; client: pg.Client } {
  const { schema, drop } = freshSchema();
  const db = { schema } as { schema: string; store: PostgresStore; client: pg.Client };
  before(async () => {
    db.store = await PostgresStore.open(serviceUrl('DATABASE_URL') as string, { schema, ...options });
    db.client = new pg.Client({ connectionString: serviceUrl('DATABASE_URL') as string, options: `-c search_path=${schema}` });
    await db.client.connect();
  });
  after(async () => {
    await db.client.end();
    await db.store.close();
    await drop();
  });
  return db;
}

storeConformance(
  'PostgreSQL',
  async () => {
    const { schema, drop } = freshSchema();
    const store = await PostgresStore.open(serviceUrl('DATABASE_URL') as string, { schema });
    return { store, cleanup: drop };
  },
  skipReason('DATABASE_URL'),
);

describe('PostgreSQL store beside other writers: key lookups and the change log', { skip: skipReason('DATABASE_URL') }, () => {
  // Another node or an operator in psql: writes the store does not make itself.
  const db = storeBeside();

  /** A key whose lookup this store remembers: one read after another leaves the database alone. */
  async function rememberedKey(name: string): Promise<{ hash: string; id: string }> {
    const account = await db.store.createAccount(name, 'free');
    const hash = `hash-${name}`;
    const key = await db.store.createKey({ accountId: account.id, name: null, prefix: 'rp_x', secretHash: hash });
    // The last-use time is not part of what a lookup must see at once: once a lookup is
    // remembered, a time written since does not show until the next change.
    const remembered = await eventually(async () => {
      await db.store.findKeyByHash(hash);
      const stamp = new Date().toISOString();
      await db.client.query('UPDATE api_keys SET last_used_at = $1 WHERE id = $2', [stamp, key.id]);
      return (await db.store.findKeyByHash(hash))?.key.lastUsedAt !== stamp;
    });
    assert.ok(remembered, 'the lookup is served from memory');
    return { hash, id: key.id };
  }

  test('work run alone runs on one node at a time; another node gets null at once, and runs it once it is let go', async () => {
    const second = await PostgresStore.open(serviceUrl('DATABASE_URL') as string, { schema: db.schema });
    try {
      let letGo = () => {};
      const held = new Promise<void>((resolve) => (letGo = resolve));
      let started = () => {};
      const running = new Promise<void>((resolve) => (started = resolve));
      const first = db.store.alone('job', async () => {
        started();
        await held;
        return 'first';
      });
      await running;
      assert.equal(await second.alone('job', async () => 'second'), null);
      // Another name is another lock.
      assert.equal(await second.alone('other job', async () => 'other'), 'other');
      letGo();
      assert.equal(await first, 'first');
      assert.equal(await second.alone('job', async () => 'second'), 'second');
    } finally {
      await second.close();
    }
  });

  test('a connection the server ends between two queries of a transaction fails that call, not the process', async () => {
    // What a PostgreSQL restart or pg_terminate_backend does to a store or a migration caught
    // between two statements. Without a listener the client's 'error' event ends the process.
    type WithClient = <T>(fn: (client: pg.PoolClient) => Promise<T>) => Promise<T>;
    const withClient = (db.store as unknown as { withClient: WithClient }).withClient.bind(db.store);
    const ended = withClient(async (client) => {
      await client.query('BEGIN');
      const { rows } = await client.query('SELECT pg_backend_pid() AS pid');
      const closed = new Promise((resolve) => client.once('end', resolve));
      await db.client.query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
      await closed;
      await client.query('COMMIT');
    });
    await assert.rejects(ended, { name: 'StoreUnavailableError' });
    // The pool let the dead client go: the store goes on with a new connection.
    const account = await db.store.createAccount('after-the-end', 'free');
    assert.equal((await db.store.getAccount(account.id))?.name, 'after-the-end');
  });

  test('a key revoked elsewhere is refused once the change is announced', async () => {
    const { hash, id } = await rememberedKey('revoked-elsewhere');
    await db.client.query('UPDATE api_keys SET revoked_at = $1 WHERE id = $2', [new Date().toISOString(), id]);
    assert.ok(await eventually(async () => (await db.store.findKeyByHash(hash))?.key.revokedAt != null));
  });

  test("an account's plan changed elsewhere shows once the change is announced", async () => {
    const { hash } = await rememberedKey('replanned');
    await db.client.query("UPDATE accounts SET plan = 'pro' WHERE name = 'replanned'");
    assert.ok(await eventually(async () => (await db.store.findKeyByHash(hash))?.account.plan === 'pro'));
  });

  test('a key revoked through this store is refused at once', async () => {
    const { hash, id } = await rememberedKey('revoked-here');
    await db.store.revokeKey(id);
    assert.ok((await db.store.findKeyByHash(hash))?.key.revokedAt);
  });

  test(`the change log's pruning removes changes older than ${CHANGES_KEPT_DAYS} days, a batch at a time, and keeps the rest`, async () => {
    await db.client.query(
      `INSERT INTO entry_changes (entry_id, op, account_id, context_hash, at) VALUES
         (1, 'put', 'acc', 'ctx', now() - make_interval(days => $1 + 1)),
         (2, 'put', 'acc', 'ctx', now() - make_interval(days => $1 + 1)),
         (3, 'put', 'acc', 'ctx', now() - make_interval(days => $1 - 1)),
         (4, 'put', 'acc', 'ctx', now())`,
      [CHANGES_KEPT_DAYS],
    );
    assert.equal(await db.store.pruneChanges(1), 1);
    assert.equal(await db.store.pruneChanges(1), 1);
    assert.equal(await db.store.pruneChanges(1), 0);
    const { rows } = await db.client.query('SELECT entry_id FROM entry_changes ORDER BY seq');
    assert.deepEqual(
      rows.map((r) => Number(r.entry_id)),
      [3, 4],
    );
  });
});

describe('PostgreSQL store: an account deleted by another node', { skip: skipReason('DATABASE_URL') }, () => {
  const { schema, drop } = freshSchema();
  let store: PostgresStore;
  before(async () => {
    store = await PostgresStore.open(serviceUrl('DATABASE_URL') as string, { schema });
  });
  after(async () => {
    await store.close();
    await drop();
  });

  test("an account deleted by another node: its key is refused once announced, and its entries' deletion is in the change log", async () => {
    const account = await store.createAccount('deleted-elsewhere', 'free');
    const hash = 'hash-deleted-elsewhere';
    await store.createKey({ accountId: account.id, name: null, prefix: 'rp_x', secretHash: hash });
    assert.equal((await store.findKeyByHash(hash))?.account.id, account.id);
    const puts = [
      await store.putEntry(entry(account.id, { contextHash: 'c1' })),
      await store.putEntry(entry(account.id, { contextHash: 'c2' })),
    ];
    const before = await store.lastChange();
    const second = await PostgresStore.open(serviceUrl('DATABASE_URL') as string, { schema });
    try {
      assert.equal((await second.deleteAccount(account.id))?.entries, 2);
      assert.deepEqual(await second.purgeDeletedAccounts(), { accounts: 1, entries: 2, usageBuckets: 0 });
    } finally {
      await second.close();
    }
    assert.ok(await eventually(async () => (await store.findKeyByHash(hash)) === null));
    assert.deepEqual(
      (await store.changesSince(before)).map((c) => [c.op, c.entryId, c.accountId, c.contextHash, c.vector]),
      puts.map((p) => ['delete', p.id, account.id, p.contextHash, null]),
    );
  });
});

describe('PostgreSQL store written by two nodes at once', { skip: skipReason('DATABASE_URL') }, () => {
  const { schema, drop } = freshSchema();
  let store: PostgresStore;
  let second: PostgresStore;
  before(async () => {
    store = await PostgresStore.open(serviceUrl('DATABASE_URL') as string, { schema });
    second = await PostgresStore.open(serviceUrl('DATABASE_URL') as string, { schema });
  });
  after(async () => {
    await second.close();
    await store.close();
    await drop();
  });

  test('counts written by two nodes at the same moment, each in its own order, do not deadlock', async () => {
    const accounts = await Promise.all(Array.from({ length: 12 }, (_, i) => store.createAccount(`counted-${i}`, 'free')));
    const entries = await Promise.all(accounts.map((a) => store.putEntry(entry(a.id))));
    const bucket = '2026-11-27T11:00:00.000Z';
    const usage = accounts.map((a) => ({ ...emptyDelta(), accountId: a.id, bucket, requests: 1 }));
    const hits = entries.map((e) => [e.id, { count: 1, at: bucket, lookupMs: 1, createdAt: e.createdAt }] as const);
    // Each node lists its counts in the order it first saw them, which differs between nodes.
    const failures = new Set<string>();
    for (let round = 0; round < 100; round++) {
      const results = await Promise.allSettled([
        store.addUsage(usage),
        second.addUsage([...usage].reverse()),
        store.recordHits(new Map(hits)),
        second.recordHits(new Map([...hits].reverse())),
      ]);
      for (const r of results) if (r.status === 'rejected') failures.add(String((r.reason as { code?: string }).code ?? r.reason));
    }
    assert.deepEqual([...failures], []);
    const [counted] = await store.getUsage(accounts[0]?.id ?? '', {});
    assert.equal(counted?.requests, 200);
  });
});

describe('PostgreSQL storage limits with two nodes storing at once', { skip: skipReason('DATABASE_URL') }, () => {
  const { schema, drop } = freshSchema();
  let a: PostgresStore;
  let b: PostgresStore;
  before(async () => {
    a = await PostgresStore.open(serviceUrl('DATABASE_URL') as string, { schema });
    b = await PostgresStore.open(serviceUrl('DATABASE_URL') as string, { schema });
  });
  after(async () => {
    await b.close();
    await a.close();
    await drop();
  });

  test('two stores racing for the last entry, one on each node: one is written, the other refused', async () => {
    const limits = { maxEntries: 3, maxStoredBytes: null };
    // Rounds of the race, each in an account of its own with one entry left to store.
    for (let round = 0; round < 20; round++) {
      const account = await a.createAccount(`last-slot-${round}`, 'free');
      await a.putEntry(entry(account.id), limits);
      await b.putEntry(entry(account.id), limits);
      const results = await Promise.allSettled([a.putEntry(entry(account.id), limits), b.putEntry(entry(account.id), limits)]);
      const refused = results.filter((r) => r.status === 'rejected');
      assert.equal(refused.length, 1, `round ${round}: ${results.map((r) => r.status).join(', ')}`);
      assert.equal((refused[0] as PromiseRejectedResult).reason.name, 'StorageQuotaError');
      assert.deepEqual(await a.getStorage(account.id), { entries: 3, bytes: 3 * bytesOf(entry(account.id)) });
      assert.equal((await b.listEntries(account.id, { page: 1, perPage: 10 })).total, 3);
    }
  });

  test('the bytes limit holds too, with stores of both nodes at once', async () => {
    const account = await a.createAccount('bytes-race', 'free');
    const one = entry(account.id, { answer: 'x'.repeat(500) });
    const limits = { maxEntries: null, maxStoredBytes: 4 * bytesOf(one) + 10 };
    const results = await Promise.allSettled(
      Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? a : b).putEntry(entry(account.id, { answer: 'x'.repeat(500) }), limits)),
    );
    assert.equal(results.filter((r) => r.status === 'fulfilled').length, 4);
    assert.deepEqual(await b.getStorage(account.id), { entries: 4, bytes: 4 * bytesOf(one) });
  });

  test('the same conversation stored by both nodes at once for the last entry: both are taken, as one entry', async () => {
    for (let round = 0; round < 10; round++) {
      const account = await a.createAccount(`same-last-${round}`, 'free');
      const limits = { maxEntries: 2, maxStoredBytes: null };
      await a.putEntry(entry(account.id), limits);
      const same = entry(account.id, { exactHash: 'same' });
      const [x, y] = await Promise.all([a.putEntry(same, limits), b.putEntry({ ...same, answer: 'other' }, limits)]);
      assert.equal(x.id, y.id);
      assert.equal((await a.getStorage(account.id)).entries, 2);
    }
  });

  test("a node cut off in the middle of a store holds the account's other stores only until PostgreSQL ends its transaction", async () => {
    const account = await a.createAccount('cut-off', 'free');
    const limits = { maxEntries: 10, maxStoredBytes: null };
    await a.putEntry(entry(account.id), limits);
    // A node whose transactions PostgreSQL ends after a second idle, as it does after its query timeout.
    const cutOff = await PostgresStore.open(serviceUrl('DATABASE_URL') as string, { schema, queryTimeoutMs: 1000 });
    type WithClient = <T>(fn: (client: pg.PoolClient) => Promise<T>) => Promise<T>;
    const withClient = (cutOff as unknown as { withClient: WithClient }).withClient.bind(cutOff);
    let resume = () => {};
    const resumed = new Promise<void>((resolve) => (resume = resolve));
    let written = () => {};
    const holding = new Promise<void>((resolve) => (written = resolve));
    // Its store writes the entry, which takes the lock of the account's counts, and then hears
    // nothing more from the node.
    const abandoned = withClient(async (client) => {
      await client.query('BEGIN');
      await client.query(
        `INSERT INTO entries (account_id, exact_hash, context_hash, prefix_hash, messages, query_text, prefix_text, answer, model, tokens, created_at)
         VALUES ($1, 'abandoned', 'ctx', 'p', '[]', '', '', 'never committed', 'm', 1, $2)`,
        [account.id, new Date().toISOString()],
      );
      written();
      await resumed;
      await client.query('COMMIT');
    });
    try {
      await holding;
      // Another node's store of the account waits for it, within its own query timeout (5 s).
      await b.putEntry(entry(account.id), limits);
      assert.equal(await a.getEntryByHash(account.id, 'abandoned'), null);
      assert.deepEqual(await a.getStorage(account.id), { entries: 2, bytes: 2 * bytesOf(entry(account.id)) });
    } finally {
      resume();
      await assert.rejects(abandoned, { name: 'StoreUnavailableError' });
      await cutOff.close();
    }
  });

  test('deletes and sweeps on both nodes at once keep the counts exact, and free the room', async () => {
    const limits = { maxEntries: 40, maxStoredBytes: null };
    const accounts = await Promise.all([0, 1, 2].map((i) => a.createAccount(`swept-${i}`, 'free')));
    const past = '2000-01-01T00:00:00.000Z';
    const kept: Entry[] = [];
    for (let i = 0; i < 40; i++) {
      const account = accounts[i % 3] as Account;
      const stored = await a.putEntry(entry(account.id, { expiresAt: i % 2 === 0 ? past : null }), limits);
      if (i % 2 === 1) kept.push(stored);
    }
    // Two nodes sweep in batches while entries are deleted one by one.
    const now = new Date().toISOString();
    await Promise.all([
      (async () => {
        while ((await a.deleteExpired(now, 3)).length > 0);
      })(),
      (async () => {
        while ((await b.deleteExpired(now, 3)).length > 0);
      })(),
      ...kept.slice(0, 6).map((e) => b.deleteEntry(e.accountId, e.publicId)),
    ]);
    for (const account of accounts) {
      const total = (await a.listEntries(account.id, { page: 1, perPage: 100 })).total;
      assert.deepEqual(await a.getStorage(account.id), { entries: total, bytes: total * bytesOf(entry(account.id)) }, account.name);
    }
  });
});

describe('PostgreSQL storage counts of a database made by the version before storage limits', { skip: skipReason('DATABASE_URL') }, () => {
  const { schema, drop } = freshSchema();
  after(drop);

  test('are counted from its entries by the migration, and kept from there', async () => {
    const url = serviceUrl('DATABASE_URL') as string;
    let store = await PostgresStore.open(url, { schema });
    const client = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` });
    await client.connect();
    try {
      const a = await store.createAccount('counted-a', 'free');
      const b = await store.createAccount('counted-b', 'free');
      for (let i = 0; i < 5; i++)
        await store.putEntry(entry(a.id, { answer: `réponse ${i}`, messages: [{ role: 'user', content: `質問 ${i}` }] }));
      await store.putEntry(entry(b.id, { answer: 'x'.repeat(1000) }));
      await store.close();
      // Back to the version before: the migration that counts storage (and the two after it, of
      // index snapshot records and of accounts marked deleted) undone, and an entry written as that version did, with nothing
      // counting it.
      await client.query(`DROP TRIGGER entries_storage ON entries; DROP FUNCTION entries_storage(); DROP TABLE account_storage;
                          DROP TABLE index_snapshots; DROP INDEX accounts_live_name;
                          DROP TRIGGER accounts_auth_changed ON accounts; ALTER TABLE accounts DROP COLUMN deleted_at;
                          CREATE TRIGGER accounts_auth_changed AFTER UPDATE OF name, plan, created_at, default_threshold, entry_ttl_seconds
                            OR DELETE ON accounts FOR EACH STATEMENT EXECUTE FUNCTION auth_changed();
                          ALTER TABLE accounts ADD UNIQUE (name);
                          DELETE FROM schema_migrations WHERE version >= (SELECT max(version) - 2 FROM schema_migrations)`);
      await client.query(
        `INSERT INTO entries (account_id, exact_hash, context_hash, prefix_hash, messages, query_text, prefix_text, answer, model, tokens, created_at)
         VALUES ($1, 'old', 'ctx', 'p', '[{"role":"user","content":"ancien"}]', 'ancien', '', 'déjà', 'm', 1, $2)`,
        [a.id, new Date().toISOString()],
      );
      const measured = async (accountId: string) => {
        const { rows } = await client.query('SELECT messages, answer FROM entries WHERE account_id = $1', [accountId]);
        return { entries: rows.length, bytes: rows.reduce((n, r) => n + Buffer.byteLength(r.messages) + Buffer.byteLength(r.answer), 0) };
      };

      store = await PostgresStore.open(url, { schema });
      assert.deepEqual(await store.getStorage(a.id), await measured(a.id));
      assert.equal((await store.getStorage(a.id)).entries, 6);
      assert.deepEqual(await store.getStorage(b.id), await measured(b.id));
      await store.putEntry(entry(a.id));
      // Written by hand in psql, too.
      await client.query("DELETE FROM entries WHERE exact_hash = 'old'");
      assert.deepEqual(await store.getStorage(a.id), await measured(a.id));
      assert.equal((await store.getStorage(a.id)).entries, 6);
    } finally {
      await client.end();
      await store.close();
    }
  });
});

describe('PostgreSQL store beside a node of the version before public entry ids', { skip: skipReason('DATABASE_URL') }, () => {
  const db = storeBeside();

  test('an entry inserted by a node of the version before public ids gets one, which storing it again keeps', async () => {
    const a = await db.store.createAccount('older-node', 'free');
    await db.client.query(
      `INSERT INTO entries (account_id, exact_hash, context_hash, prefix_hash, messages, query_text, prefix_text,
         answer, model, tokens, embedder_id, vector, prefix_vector, created_at, expires_at)
       VALUES ($1, 'old-hash', 'ctx', 'p', '[{"role":"user","content":"q"}]', 'q', '', 'old answer', 'm', 1, NULL, NULL, NULL, $2, NULL)`,
      [a.id, new Date().toISOString()],
    );
    const [listed] = (await db.store.listEntries(a.id, { page: 1, perPage: 10 })).entries;
    assert.ok(listed && Number.isSafeInteger(listed.publicId) && listed.publicId > 0, String(listed?.publicId));
    assert.equal((await db.store.getEntry(a.id, listed.publicId))?.answer, 'old answer');
    const again = await db.store.putEntry(entry(a.id, { exactHash: 'old-hash', answer: 'new answer' }));
    assert.equal(again.publicId, listed.publicId);
  });
});

describe('PostgreSQL store in a schema named with a reserved word', { skip: skipReason('DATABASE_URL') }, () => {
  // REPRISE_PG_SCHEMA takes any lower-case identifier, "user" and "order" among them.
  const schema = 'user';
  const dropSchema = async () => {
    const client = new pg.Client({ connectionString: serviceUrl('DATABASE_URL') as string });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await client.end();
  };
  before(dropSchema);
  after(dropSchema);

  test('is made, written and read like any other', async () => {
    const store = await PostgresStore.open(serviceUrl('DATABASE_URL') as string, { schema });
    try {
      const a = await store.createAccount('reserved-word-schema', 'free');
      const stored = await store.putEntry(entry(a.id, { answer: 'kept' }));
      assert.equal((await store.getEntry(a.id, stored.publicId))?.answer, 'kept');
      assert.equal(await PostgresStore.initialised(serviceUrl('DATABASE_URL') as string, schema), true);
    } finally {
      await store.close();
    }
  });
});

describe('PostgreSQL deletion of an account beside other accounts', { skip: skipReason('DATABASE_URL') }, () => {
  const db = storeBeside({ queryTimeoutMs: 2000 });

  /**
   * Whether a deletion waits for the entry the second connection holds. Read in that connection's
   * open transaction, pg_stat_activity would answer as at its first read in it, every time.
   */
  const deletionWaits = async (): Promise<boolean> => {
    await db.client.query('SELECT pg_stat_clear_snapshot()');
    const { rows } = await db.client.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%DELETE FROM entries%'`,
    );
    return (rows[0] as { n: number }).n > 0;
  };

  /** `reprise accounts delete`: the account is marked deleted, then its entries removed. */
  const deleteWhole = async (id: string) => {
    const deleted = await db.store.deleteAccount(id);
    await db.store.purgeDeletedAccounts();
    return deleted;
  };

  test("while its entries are being deleted, another account's stores, key revocations and settings go through", async () => {
    const gone = await db.store.createAccount('pg-deleted', 'pro');
    const kept = await db.store.createAccount('pg-kept', 'pro');
    await db.store.putEntry(entry(gone.id, { exactHash: 'held' }));
    const key = await db.store.createKey({ accountId: kept.id, name: null, prefix: 'rp_x', secretHash: 'hash-pg-kept' });
    await db.store.createKey({ accountId: gone.id, name: null, prefix: 'rp_x', secretHash: 'hash-pg-deleted' });
    // A deletion that takes long: one of its entries is locked by another transaction, which the
    // deletion waits for, midway, as it would for the time it takes to delete many.
    await db.client.query('BEGIN');
    await db.client.query('SELECT 1 FROM entries WHERE account_id = $1 FOR UPDATE', [gone.id]);
    const deleting = deleteWhole(gone.id);
    try {
      assert.ok(await eventually(deletionWaits), 'the deletion waits for the entry');
      assert.ok(await db.store.putEntry(entry(kept.id, { exactHash: 'meanwhile' })));
      assert.equal((await db.store.updateAccount(kept.id, { defaultThreshold: 0.9 }))?.defaultThreshold, 0.9);
      assert.ok((await db.store.revokeKey(key.id))?.revokedAt);
      // The account itself is gone already, for stores of every kind (limited or not) too.
      assert.equal(await db.store.findKeyByHash('hash-pg-deleted'), null);
      assert.equal(await db.store.getAccount(gone.id), null);
      assert.equal(await db.store.updateAccount(gone.id, { defaultThreshold: 0.9 }), null);
      await assert.rejects(db.store.putEntry(entry(gone.id, { exactHash: 'after' })), AccountGoneError);
      await assert.rejects(
        db.store.putEntry(entry(gone.id, { exactHash: 'after' }), { maxEntries: 10, maxStoredBytes: null }),
        AccountGoneError,
      );
      assert.ok(await db.store.createAccount('pg-deleted', 'free'), 'its name is free');
    } finally {
      await db.client.query('COMMIT');
    }
    assert.equal((await deleting)?.entries, 1);
    assert.equal(await db.store.getEntryByHash(gone.id, 'after'), null);
    assert.equal(await db.store.getAccount(gone.id), null);
    assert.equal((await db.store.getEntryByHash(kept.id, 'meanwhile'))?.accountId, kept.id);
  });

  test("while it is being deleted, another account's counts are written and read back at once, and the deleted one's are dropped", async () => {
    const gone = await db.store.createAccount('pg-counted-gone', 'pro');
    const kept = await db.store.createAccount('pg-counted-kept', 'pro');
    const goneEntry = await db.store.putEntry(entry(gone.id, { exactHash: 'held' }));
    const keptEntry = await db.store.putEntry(entry(kept.id, { exactHash: 'hit' }));
    const goneKey = await db.store.createKey({ accountId: gone.id, name: null, prefix: 'rp_x', secretHash: 'hash-pg-counted-gone' });
    const keptKey = await db.store.createKey({ accountId: kept.id, name: null, prefix: 'rp_x', secretHash: 'hash-pg-counted-kept' });
    // One node's batch of counts holds those of both accounts: requests served in the same second.
    const recorder = new UsageRecorder(db.store, 60_000);
    for (const [account, e, key] of [
      [gone, goneEntry, goneKey],
      [kept, keptEntry, keptKey],
    ] as const) {
      recorder.count(account.id, { requests: 2, exactHits: 1, stores: 1 });
      recorder.hit(e.id, e.createdAt, 3);
      recorder.keyUsed(key.id);
    }
    // A deletion that takes long, holding the account from its start (see the test before).
    await db.client.query('BEGIN');
    await db.client.query('SELECT 1 FROM entries WHERE account_id = $1 FOR UPDATE', [gone.id]);
    const deleting = deleteWhole(gone.id);
    try {
      assert.ok(await eventually(deletionWaits), 'the deletion waits for the entry');
      await recorder.flush();
      const [usage] = await recorder.read(kept.id);
      assert.deepEqual([usage?.requests, usage?.exactHits, usage?.stores], [2, 1, 1]);
      assert.equal((await db.store.getEntry(kept.id, keptEntry.publicId))?.usageCount, 1);
      assert.ok((await db.store.listKeys(kept.id))[0]?.lastUsedAt);
    } finally {
      await db.client.query('COMMIT');
    }
    assert.equal((await deleting)?.entries, 1);
    // Nothing of the deleted account's counts is left to write, nor written.
    await recorder.flush();
    assert.deepEqual(await db.store.getUsage(gone.id, {}), []);
    const again = await db.store.createAccount('pg-counted-gone', 'pro');
    assert.deepEqual(await recorder.read(again.id), []);
    assert.equal((await recorder.read(kept.id))[0]?.requests, 2);
  });

  test("while it is being deleted, the expiry sweep removes other accounts' expired entries and leaves its own to the deletion", async () => {
    const gone = await db.store.createAccount('pg-swept-gone', 'pro');
    const kept = await db.store.createAccount('pg-swept-kept', 'pro');
    const past = '2020-01-01T00:00:00.000Z';
    // The entry the deletion waits for first, then one it has not come to yet.
    const held = await db.store.putEntry(entry(gone.id, { exactHash: 'held', expiresAt: past }));
    await db.store.putEntry(entry(gone.id, { exactHash: 'later', expiresAt: past }));
    const expired = await db.store.putEntry(entry(kept.id, { exactHash: 'expired', expiresAt: past }));
    await db.client.query('BEGIN');
    await db.client.query('SELECT 1 FROM entries WHERE id = $1 FOR UPDATE', [held.id]);
    const deleting = deleteWhole(gone.id);
    try {
      assert.ok(await eventually(deletionWaits), 'the deletion waits for the entry');
      const swept = await db.store.deleteExpired(new Date().toISOString(), 100);
      assert.deepEqual(
        swept.map((g) => [g.id, g.accountId]),
        [[expired.id, kept.id]],
      );
    } finally {
      await db.client.query('COMMIT');
    }
    assert.equal((await deleting)?.entries, 2);
    assert.deepEqual(await db.store.deleteExpired(new Date().toISOString(), 100), []);
  });
});
