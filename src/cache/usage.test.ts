import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { eventually, freshSchema, serviceUrl, skipReason } from '../../test/services.ts';
import { entry as newEntry } from '../store/conformance.ts';
import { PostgresStore } from '../store/postgres.ts';
import { UsageRecorder } from './usage.ts';

describe('usage counts on PostgreSQL', { skip: skipReason('DATABASE_URL') }, () => {
  const { schema, drop } = freshSchema();
  let store: PostgresStore;
  before(async () => {
    store = await PostgresStore.open(serviceUrl('DATABASE_URL') as string, { schema });
  });
  after(async () => {
    await store.close();
    await drop();
  });

  test('a read while a batch is being written counts it once', async () => {
    const account = await store.createAccount('counted', 'free');
    const usage = new UsageRecorder(store);
    for (let round = 1; round <= 5; round++) {
      usage.count(account.id, { requests: 10 });
      // The batch leaves memory for the database while the read is under way.
      const read = usage.read(account.id);
      const written = usage.flush();
      const total = (await read).reduce((n, b) => n + b.requests, 0);
      await written;
      assert.equal(total, round * 10, `round ${round}`);
    }
    await usage.close();
  });

  test('hits already written are not counted again when the write after them fails', async () => {
    const account = await store.createAccount('hits-once', 'free');
    const key = await store.createKey({ accountId: account.id, name: null, prefix: 'rp_live_once', secretHash: `once-${Math.random()}` });
    const entry = await store.putEntry(newEntry(account.id, { exactHash: 'once' }));
    const usage = new UsageRecorder(store);
    for (let i = 0; i < 3; i++) usage.hit(entry.id, entry.createdAt, 0.1);
    usage.keyUsed(key.id);
    const url = serviceUrl('DATABASE_URL') as string;
    const locker = new pg.Client({ connectionString: url });
    const watcher = new pg.Client({ connectionString: url });
    await locker.connect();
    await watcher.connect();
    try {
      // The keys' table is held, so the batch's last write (the keys' last-used times) waits after
      // the hits are committed; then its connection is lost, as in a failover.
      await locker.query('BEGIN');
      await locker.query(`LOCK TABLE ${schema}.api_keys IN ACCESS EXCLUSIVE MODE`);
      const flushed = usage.flush().then(
        () => null,
        (err: unknown) => err,
      );
      const waiting = `SELECT pid FROM pg_stat_activity WHERE query LIKE 'UPDATE api_keys%' AND wait_event_type = 'Lock'`;
      assert.ok(await eventually(async () => (await watcher.query(waiting)).rows.length > 0));
      await watcher.query(`SELECT pg_terminate_backend(pid) FROM (${waiting}) w`);
      assert.ok((await flushed) instanceof Error);
      await locker.query('ROLLBACK');
      await usage.flush();
      assert.equal((await store.getEntry(account.id, entry.publicId))?.usageCount, 3);
      assert.ok((await store.listKeys(account.id)).find((k) => k.id === key.id)?.lastUsedAt);
    } finally {
      await locker.end();
      await watcher.end();
      await usage.close();
    }
  });
});
