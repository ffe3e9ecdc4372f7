import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { closeSharedEmbedder, sharedEmbedder } from '../../test/helpers.ts';
import { freePort, PrivatePostgres } from '../../test/private-servers.ts';
import { eventually, freshSchema, serviceUrl, skipReason } from '../../test/services.ts';
import type { Embedder } from '../embedding/interface.ts';
import type { Account, Entry } from '../store/interface.ts';
import { CHANGES_CHANNEL, PostgresStore } from '../store/postgres.ts';
import { BruteForceIndex } from '../vector/brute.ts';
import { partitionOf } from './context.ts';
import { IndexSync } from './sync.ts';
import { vectorId } from './text-form.ts';

describe('index sync from PostgreSQL', { skip: skipReason('DATABASE_URL') }, () => {
  const { schema, drop } = freshSchema();
  const url = serviceUrl('DATABASE_URL') as string;
  let store: PostgresStore;
  let embedder: Embedder;
  let account: Account;
  /**
   * The account of the stores that commit while another waits: the stores of one account commit
   * in the order they are numbered, as each holds the lock of the account's storage counts until
   * it commits.
   */
  let neighbour: Account;
  const index = new BruteForceIndex(512);
  let sync: IndexSync;
  before(async () => {
    store = await PostgresStore.open(url, { schema });
    embedder = await sharedEmbedder();
    account = await store.createAccount('synced', 'free');
    neighbour = await store.createAccount('synced-neighbour', 'free');
    sync = new IndexSync(store, index, embedder, url, { pollMs: 50 });
    await sync.mark();
    await sync.start();
  });
  after(async () => {
    await sync.stop();
    await store.close();
    await drop();
    await closeSharedEmbedder();
  });

  const has = (id: number, vector: Float32Array, of = account) => index.search(partitionOf(of.id, 'ctx'), vector, 1)[0]?.id === id;

  async function vectorOf(text: string): Promise<Float32Array> {
    return (await embedder.embed([text]))[0] as Float32Array;
  }

  function newEntry(text: string, vector: Float32Array, of = account) {
    const now = new Date().toISOString();
    return {
      accountId: of.id,
      exactHash: `hash-${text}`,
      contextHash: 'ctx',
      namespace: null,
      prefixHash: '',
      messages: [{ role: 'user' as const, content: text }],
      queryText: text,
      prefixText: '',
      answer: 'a',
      model: 'm',
      tokens: 1,
      embedderId: embedder.id,
      vector,
      prefixVector: null,
      createdAt: now,
      expiresAt: null,
    };
  }

  test('vectors made again on one node replace the old ones in the index of another', async () => {
    const typed = await vectorOf('Do you know the boiling point of water?');
    const put = await store.putEntry({ ...newEntry('Do you know the boiling point of water?', typed), exactHash: 'hash-remade' });
    assert.ok(await eventually(async () => has(put.id, typed)));
    const remade = await vectorOf('What is the boiling point of water?');
    const update = { id: put.id, from: embedder.id, embedderId: vectorId(embedder), vector: remade, prefixVector: null };
    assert.deepEqual(await store.replaceVectors([update]), [put.id]);
    const nearest = () => index.search(partitionOf(account.id, 'ctx'), remade, 1)[0];
    assert.ok(await eventually(async () => nearest()?.id === put.id && (nearest()?.cosine ?? 0) > 0.9999));
  });

  /**
   * Stores `text` in a transaction held open after its change is numbered, as a store on another
   * node can be: a trigger waits, once the change of the entry with this exact hash is inserted,
   * for an advisory lock that a session of the test's holds until `commit()`.
   */
  async function heldStore(text: string, vector: Float32Array, lock: number) {
    const other = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` });
    await other.connect();
    const name = `hold_${lock}`;
    await other.query(`CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF EXISTS (SELECT 1 FROM entries WHERE id = NEW.entry_id AND exact_hash = 'hash-held-${lock}') THEN
          PERFORM pg_advisory_xact_lock(${lock});
        END IF;
        RETURN NULL;
      END $$`);
    await other.query(`CREATE TRIGGER ${name} AFTER INSERT ON entry_changes FOR EACH ROW EXECUTE FUNCTION ${name}()`);
    await other.query('SELECT pg_advisory_lock($1)', [lock]);
    const stored = store.putEntry({ ...newEntry(text, vector), exactHash: `hash-held-${lock}` });
    const held = await eventually(async () => {
      const { rows } = await other.query("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted");
      return rows[0].n > 0;
    });
    let committed: Promise<Entry> | null = null;
    return {
      held,
      /** Lets the store commit (once, however often it is called); resolves with its entry. */
      commit(): Promise<Entry> {
        committed ??= (async () => {
          await other.query('SELECT pg_advisory_unlock($1)', [lock]);
          const entry = await stored;
          await other.query(`DROP TRIGGER ${name} ON entry_changes`);
          await other.end();
          return entry;
        })();
        return committed;
      },
    };
  }

  test('a change committed after a later one is still applied', async () => {
    // A store whose transaction takes its change number first and commits last, as two nodes
    // storing at the same moment can.
    const slowVector = await vectorOf('Which planet is the largest?');
    const slow = await heldStore('Which planet is the largest?', slowVector, 4242);
    try {
      assert.ok(slow.held, 'the slow store is numbered and waiting');
      const fastVector = await vectorOf('How do volcanoes form?');
      const fast = await store.putEntry(newEntry('How do volcanoes form?', fastVector, neighbour));
      assert.ok(await eventually(async () => has(fast.id, fastVector, neighbour)), 'the later change is applied');
      const slowEntry = await slow.commit();
      assert.ok(await eventually(async () => has(slowEntry.id, slowVector)), 'the earlier change, committed last, is applied too');
    } finally {
      await slow.commit();
    }
  });

  test('a change committed after its number was given up on is applied when it lands', async () => {
    // A node that gives up on a missing number after 200 ms instead of 10 s, and a store that
    // commits well after that (a stalled disk, a writer paused between its insert and its commit).
    const lateIndex = new BruteForceIndex(512);
    const late: number[] = [];
    const impatient = new IndexSync(store, lateIndex, embedder, url, { pollMs: 50, gapWaitMs: 200, onLate: (seq) => late.push(seq) });
    await impatient.mark();
    await impatient.start();
    const lateVector = await vectorOf('How deep is the Mariana Trench?');
    const pending = await heldStore('How deep is the Mariana Trench?', lateVector, 4343);
    try {
      assert.ok(pending.held, 'the late store is numbered and waiting');
      await store.putEntry(newEntry('Why is the sky blue?', await vectorOf('Why is the sky blue?'), neighbour));
      const last = await store.lastChange();
      // The node moves past the missing number only once it has given up on it.
      assert.ok(await eventually(async () => impatient.appliedThrough >= last), 'the node moved past the missing number');

      const lateEntry = await pending.commit();
      const found = await eventually(async () => lateIndex.search(partitionOf(account.id, 'ctx'), lateVector, 1)[0]?.id === lateEntry.id);
      assert.ok(found, 'the store that committed late is in the index');
      assert.equal(late.length, 1);
    } finally {
      await pending.commit();
      await impatient.stop();
    }
  });
});

describe('index sync: a change log pruned a week after its changes', { skip: skipReason('DATABASE_URL') }, () => {
  const { schema, drop } = freshSchema();
  const url = serviceUrl('DATABASE_URL') as string;
  let store: PostgresStore;
  before(async () => {
    store = await PostgresStore.open(url, { schema });
  });
  after(async () => {
    await store.close();
    await drop();
  });

  test('a node starting after the prune waits for no pruned number, and the latest change is kept', async () => {
    const account = await store.createAccount('pruned', 'free');
    const now = new Date().toISOString();
    for (const text of ['first', 'second', 'third']) {
      await store.putEntry({
        accountId: account.id,
        exactHash: `hash-${text}`,
        contextHash: 'ctx',
        namespace: null,
        prefixHash: '',
        messages: [{ role: 'user', content: text }],
        queryText: text,
        prefixText: '',
        answer: 'a',
        model: 'm',
        tokens: 1,
        embedderId: null,
        vector: null,
        prefixVector: null,
        createdAt: now,
        expiresAt: null,
      });
    }
    const { last } = await store.changeBounds();
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      await admin.query(`UPDATE "${schema}".entry_changes SET at = now() - interval '8 days'`);
    } finally {
      await admin.end();
    }
    assert.equal(await store.pruneChanges(1000), 2);
    assert.deepEqual(await store.changeBounds(), { first: last, last });
    // A node that would wait an hour for a missing number: the pruned ones are not missing.
    const sync = new IndexSync(store, new BruteForceIndex(512), await sharedEmbedder(), url, { pollMs: 50, gapWaitMs: 3_600_000 });
    await sync.mark();
    await sync.start();
    try {
      assert.ok(await eventually(async () => sync.appliedThrough === last), `applied through ${sync.appliedThrough}, not ${last}`);
    } finally {
      await sync.stop();
      await closeSharedEmbedder();
    }
  });
});

// A server of the test's own, so that its connections are the only ones counted.
describe('index sync: the connection that hears changes', { skip: skipReason('DATABASE_URL') }, () => {
  let server: PrivatePostgres;
  let store: PostgresStore;
  let admin: pg.Client;
  before(async () => {
    server = new PrivatePostgres(await freePort());
    await server.init();
    await server.start();
    store = await PostgresStore.open(server.url);
    admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
  });
  after(async () => {
    await admin?.end();
    await store?.close();
    await server?.destroy();
    await closeSharedEmbedder();
  });

  const listening = `SELECT pid FROM pg_stat_activity WHERE query = 'LISTEN ${CHANGES_CHANNEL}'`;
  const listeners = async () => (await admin.query(listening)).rowCount ?? 0;

  test('a lost connection is replaced by one, however often the node polls meanwhile; stopping ends it', async () => {
    // Polls every 5 ms: many catch-ups find the connection missing while a new one is being opened.
    const sync = new IndexSync(store, new BruteForceIndex(512), await sharedEmbedder(), server.url, { pollMs: 5 });
    await sync.mark();
    await sync.start();
    try {
      assert.ok(await eventually(async () => (await listeners()) === 1), 'the node listens');
      for (let i = 0; i < 3; i++) {
        await admin.query(`SELECT pg_terminate_backend(pid) FROM (${listening}) l`);
        assert.ok(await eventually(async () => (await listeners()) >= 1), 'the node listens again');
      }
    } finally {
      await sync.stop();
    }
    // Every connection it opened is closed with it: none was left listening behind another.
    assert.ok(await eventually(async () => (await listeners()) === 0), `${await listeners()} connections still listening`);
  });
});
