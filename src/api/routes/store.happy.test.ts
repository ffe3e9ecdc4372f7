import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { closeSharedEmbedder, sharedEmbedder, startTestApp, user, type TestApp } from '../../../test/helpers.ts';

describe('POST /api/v1/store', () => {
  let t: TestApp;
  let key: string;
  before(async () => {
    t = await startTestApp();
    key = await t.key();
  });
  after(() => t.close());

  test('stores with only messages and answer: model "unknown", tokens estimated from the answer', async () => {
    const messages = [user('Say hello')];
    const res = await t.post('/api/v1/store', { messages, answer: 'Hello there, friend!' }, key);
    assert.equal(res.statusCode, 200);
    const body = res.json();
    assert.equal(body.stored, true);
    assert.deepEqual(body.cache_types_stored, ['exact']);
    assert.equal(typeof body.storage_time_ms, 'number');
    const hit = (await t.post('/api/v1/check', { messages }, key)).json();
    assert.equal(hit.metadata.model, 'unknown');
    assert.equal(hit.metadata.original_tokens, 5);
    assert.equal(hit.tokens_saved, 5);
  });

  test('storing the same conversation again replaces the answer', async () => {
    const messages = [user('Pick a number')];
    await t.post('/api/v1/store', { messages, answer: 'seven', model: 'gpt-4o', tokens_used: 1 }, key);
    await t.post('/api/v1/check', { messages }, key);
    await t.post('/api/v1/store', { messages, answer: 'nine', model: 'gpt-4o', tokens_used: 2 }, key);
    const hit = (await t.post('/api/v1/check', { messages }, key)).json();
    assert.equal(hit.answer, 'nine');
    assert.equal(hit.metadata.original_tokens, 2);
    assert.equal(hit.metadata.usage_count, 1);
  });

  test('storing the same answer again keeps created_at and usage_count', async () => {
    const messages = [user('What is 2+2?')];
    const body = { messages, answer: '4', model: 'gpt-4o', tokens_used: 3 };
    await t.post('/api/v1/store', body, key);
    const first = (await t.post('/api/v1/check', { messages }, key)).json();
    await t.post('/api/v1/store', body, key);
    const again = (await t.post('/api/v1/check', { messages }, key)).json();
    assert.equal(again.created_at, first.created_at);
    assert.equal(again.metadata.usage_count, 2);
  });

  test('an entry with ttl_seconds stops hitting once expired', async () => {
    const messages = [user('What time is it?')];
    await t.post('/api/v1/store', { messages, answer: 'noon', ttl_seconds: 1 }, key);
    const deadline = Date.now() + 5000;
    let body = (await t.post('/api/v1/check', { messages }, key)).json();
    assert.equal(body.cache_hit, true);
    // The entry expires with the clock: poll every 20 ms until it does (back-to-back checks for a
    // second would run past the plan's burst of 10,000 requests).
    while (body.cache_hit && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
      body = (await t.post('/api/v1/check', { messages }, key)).json();
    }
    assert.equal(body.cache_hit, false, JSON.stringify(body));
  });
});

describe('expired entries', () => {
  let t: TestApp;
  let key: string;
  before(async () => {
    t = await startTestApp({ embedder: await sharedEmbedder() });
    key = await t.key();
  });
  after(async () => {
    await t.close();
    await closeSharedEmbedder();
  });

  test('are gone from the entries API at once, and one sweep deletes more than a batch of them', async () => {
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await t.post('/api/v1/store', { messages: [user(`Short-lived question ${i}`)], answer: `${i}`, ttl_seconds: 1 }, key);
      ids.push(res.json().entry_id);
    }
    assert.equal((await t.get('/api/v1/entries', key)).json().pagination.total, 5);
    assert.equal(t.runtime.index.size, 5);
    // Wait for the clock, not for the server: poll until the last one stops hitting.
    const deadline = Date.now() + 5000;
    while ((await t.post('/api/v1/check', { messages: [user('Short-lived question 4')] }, key)).json().cache_hit) {
      assert.ok(Date.now() < deadline, 'the entry did not expire');
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal((await t.get('/api/v1/entries', key)).json().pagination.total, 0);
    assert.equal((await t.get(`/api/v1/entries/${ids[0]}`, key)).statusCode, 404);
    assert.equal(await t.runtime.ctx.cache.sweepExpired(2), 5);
    assert.equal(t.runtime.index.size, 0);
  });
});

describe('POST /api/v1/store: invalid input', () => {
  let t: TestApp;
  let key: string;
  before(async () => {
    t = await startTestApp({ env: { REPRISE_MAX_ANSWER_CHARS: '20' } });
    key = await t.key();
  });
  after(() => t.close());

  const cases: [string, unknown, string][] = [
    ['messages missing', { answer: 'a' }, 'messages'],
    ['messages empty', { messages: [], answer: 'a' }, 'messages'],
    ['answer missing', { messages: [user('q')] }, 'answer'],
    ['answer empty', { messages: [user('q')], answer: '' }, 'answer'],
    ['answer not a string', { messages: [user('q')], answer: { text: 'a' } }, 'answer'],
    ['answer too long', { messages: [user('q')], answer: 'x'.repeat(21) }, 'answer'],
    ['model not a string', { messages: [user('q')], answer: 'a', model: 4 }, 'model'],
    ['tokens_used negative', { messages: [user('q')], answer: 'a', tokens_used: -1 }, 'tokens_used'],
    ['tokens_used fractional', { messages: [user('q')], answer: 'a', tokens_used: 1.5 }, 'tokens_used'],
    ['tokens_used a string', { messages: [user('q')], answer: 'a', tokens_used: '12' }, 'tokens_used'],
    ['a bad role', { messages: [{ role: 'tool', content: 'q' }], answer: 'a' }, 'messages[0].role'],
  ];
  for (const [name, body, field] of cases) {
    test(`400 INVALID_INPUT when ${name}`, async () => {
      const res = await t.post('/api/v1/store', body, key);
      assert.equal(res.statusCode, 400);
      const b = res.json();
      assert.equal(b.error.code, 'INVALID_INPUT');
      assert.equal(b.error.details.field, field);
      assert.equal(b.status, 400);
    });
  }

  test('nothing is stored by a rejected request', async () => {
    await t.post('/api/v1/store', { messages: [user('q')], answer: 'x'.repeat(21) }, key);
    const res = (await t.post('/api/v1/check', { messages: [user('q')] }, key)).json();
    assert.equal(res.cache_hit, false);
  });
});
