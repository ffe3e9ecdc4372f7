import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { freshSchema, serviceUrl, skipReason } from '../../test/services.ts';
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
});
