import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { closeSharedEmbedder, sharedEmbedder } from '../../test/helpers.ts';
import { eventually, freshSchema, serviceUrl, skipReason } from '../../test/services.ts';
import type { Embedder } from '../embedding/interface.ts';
import { vectorToBuffer } from '../store/ids.ts';
import type { Account } from '../store/interface.ts';
import { CHANGES_CHANNEL, PostgresStore } from '../store/postgres.ts';
import { BruteForceIndex } from '../vector/brute.ts';
import { partitionOf } from './context.ts';
import { IndexSync } from './sync.ts';

describe('index sync from PostgreSQL', { skip: skipReason('DATABASE_URL') }, () => {
  const { schema, drop } = freshSchema();
  const url = serviceUrl('DATABASE_URL') as string;
  let store: PostgresStore;
  let embedder: Embedder;
  let account: Account;
  const index = new BruteForceIndex(512);
  let sync: IndexSync;
  before(async () => {
    store = await PostgresStore.open(url, { schema });
    embedder = await sharedEmbedder();
    account = await store.createAccount('synced', 'free');
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

  const has = (id: number, vector: Float32Array) => index.search(partitionOf(account.id, 'ctx'), vector, 1)[0]?.id === id;

  async function vectorOf(text: string): Promise<Float32Array> {
    return (await embedder.embed([text]))[0] as Float32Array;
  }

  function newEntry(text: string, vector: Float32Array) {
    const now = new Date().toISOString();
    return {
      accountId: account.id,
      exactHash: `hash-${text}`,
      contextHash: 'ctx',
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

  test('a change committed after a later one is still applied', async () => {
    // A store whose transaction took its change number first and commits last, as two nodes
    // storing at the same moment can.
    const slowVector = await vectorOf('Which planet is the largest?');
    const slow = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` });
    await slow.connect();
    try {
      await slow.query('BEGIN');
      const e = newEntry('Which planet is the largest?', slowVector);
      const { rows } = await slow.query(
        `INSERT INTO entries (account_id, exact_hash, context_hash, prefix_hash, messages, query_text, prefix_text, answer, model,
                              tokens, embedder_id, vector, prefix_vector, created_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, NULL, $13, NULL) RETURNING id`,
        [
          e.accountId,
          e.exactHash,
          e.contextHash,
          e.prefixHash,
          JSON.stringify(e.messages),
          e.queryText,
          e.prefixText,
          e.answer,
          e.model,
          e.tokens,
          e.embedderId,
          vectorToBuffer(slowVector),
          e.createdAt,
        ],
      );
      const slowId = Number(rows[0].id);
      const change = await slow.query(
        "INSERT INTO entry_changes (entry_id, op, account_id, context_hash) VALUES ($1, 'put', $2, 'ctx') RETURNING seq",
        [slowId, account.id],
      );

      const fastVector = await vectorOf('How do volcanoes form?');
      const fast = await store.putEntry(newEntry('How do volcanoes form?', fastVector));
      assert.ok(await eventually(async () => has(fast.id, fastVector)), 'the later change is applied');

      await slow.query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, String(change.rows[0].seq)]);
      await slow.query('COMMIT');
      assert.ok(await eventually(async () => has(slowId, slowVector)), 'the earlier change, committed last, is applied too');
    } finally {
      await slow.end();
    }
  });
});
