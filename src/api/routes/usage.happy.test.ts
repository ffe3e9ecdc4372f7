import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startTestApp, tempDir, testConfig, user, type TestApp } from '../../../test/helpers.ts';

describe('GET /api/v1/usage', () => {
  let t: TestApp;
  before(async () => {
    const dir = tempDir();
    const file = path.join(dir, 'reprise.json');
    writeFileSync(file, JSON.stringify({ prices: { 'house-model': 20 }, default_price_per_million: 1 }));
    t = await startTestApp({ config: testConfig({ REPRISE_CONFIG: file }) });
  });
  after(() => t.close());

  test('a new account has zero usage', async () => {
    const key = await t.key();
    const res = await t.get('/api/v1/usage', key);
    assert.equal(res.statusCode, 200);
    const u = res.json();
    assert.equal(u.total_requests, 0);
    assert.equal(u.cache_hits, 0);
    assert.equal(u.cache_misses, 0);
    assert.equal(u.hit_rate_percentage, 0);
    assert.equal(u.exact_hits, 0);
    assert.equal(u.semantic_hits, 0);
    assert.equal(u.average_lookup_time_ms, 0);
    assert.deepEqual(u.performance, { fast_responses: 0, smart_responses: 0, estimated_cost_savings: '$0.00' });
  });

  test('a model named like a property every object has is priced at the default, and counts are written', async () => {
    const key = await t.key('priced-constructor');
    const other = await t.key('priced-other');
    const messages = [user('Which model is this?')];
    await t.post('/api/v1/store', { messages, answer: 'a', model: 'constructor', tokens_used: 1_000_000 }, key);
    assert.equal((await t.post('/api/v1/check', { messages }, key)).json().cache_type, 'exact');
    await t.post('/api/v1/check', { messages: [user('another account asks')] }, other);
    // The default price here is $1 a million tokens.
    assert.equal((await t.get('/api/v1/usage', key)).json().performance.estimated_cost_savings, '$1.00');
    // The batch is written, for this account and the others.
    await t.runtime.ctx.cache.flush();
    const store = t.runtime.ctx.store;
    for (const [name, requests] of [
      ['priced-constructor', 1],
      ['priced-other', 1],
    ] as const) {
      const account = await store.getAccountByName(name);
      const rows = await store.getUsage(account?.id ?? '', {});
      assert.equal(
        rows.reduce((n, r) => n + r.requests, 0),
        requests,
        name,
      );
    }
  });

  test('counts add up and savings follow the price table', async () => {
    const key = await t.key();
    const a = [user('question a')];
    const b = [user('question b')];
    await t.post('/api/v1/check', { messages: a }, key); // miss
    await t.post('/api/v1/store', { messages: a, answer: 'A', model: 'house-model', tokens_used: 50_000 }, key);
    await t.post('/api/v1/store', { messages: b, answer: 'B', model: 'mystery-model', tokens_used: 1_000_000 }, key);
    await t.post('/api/v1/check', { messages: a }, key); // hit: 50k tokens at $20/M = $1
    await t.post('/api/v1/check', { messages: a }, key); // hit: $1
    await t.post('/api/v1/check', { messages: b }, key); // hit: 1M tokens at the $1 default
    await t.post('/api/v1/check', { messages: [user('never stored')] }, key); // miss
    const u = (await t.get('/api/v1/usage', key)).json();
    assert.equal(u.total_requests, 5);
    assert.equal(u.cache_hits, 3);
    assert.equal(u.cache_misses, 2);
    assert.equal(u.total_requests, u.cache_hits + u.cache_misses);
    assert.equal(u.exact_hits, 3);
    assert.equal(u.semantic_hits, 0);
    assert.equal(u.cache_hits, u.exact_hits + u.semantic_hits);
    assert.equal(u.hit_rate_percentage, 60);
    assert.ok(u.average_lookup_time_ms > 0);
    assert.deepEqual(u.performance, { fast_responses: 3, smart_responses: 0, estimated_cost_savings: '$3.00' });
  });

  test("storage is what the account keeps now, whatever the period, with its plan's limits", async () => {
    const key = await t.key(undefined, 'pro');
    const messages = [user('Où est la gare ?')];
    await t.post('/api/v1/store', { messages, answer: 'À gauche.' }, key);
    const bytes = Buffer.byteLength(JSON.stringify(messages)) + Buffer.byteLength('À gauche.');
    const expected = { entries: 1, stored_bytes: bytes, max_entries: 100_000, max_stored_bytes: 1024 * 1024 * 1024 };
    assert.deepEqual((await t.get('/api/v1/usage', key)).json().storage, expected);
    assert.deepEqual((await t.get('/api/v1/usage?to=2000-01-01', key)).json().storage, expected);
  });

  test('store and usage requests are not check requests', async () => {
    const key = await t.key();
    await t.post('/api/v1/store', { messages: [user('x')], answer: 'y' }, key);
    await t.get('/api/v1/usage', key);
    const u = (await t.get('/api/v1/usage', key)).json();
    assert.equal(u.total_requests, 0);
  });

  test('from and to bound the period; bad values are a 400', async () => {
    const key = await t.key();
    await t.post('/api/v1/check', { messages: [user('x')] }, key);
    const future = (await t.get('/api/v1/usage?from=2999-01-01T00:00:00Z', key)).json();
    assert.equal(future.total_requests, 0);
    const past = (await t.get('/api/v1/usage?to=2000-01-01', key)).json();
    assert.equal(past.total_requests, 0);
    const all = (await t.get('/api/v1/usage?from=2000-01-01&to=2999-01-01', key)).json();
    assert.equal(all.total_requests, 1);
    const bad = await t.get('/api/v1/usage?from=yesterday', key);
    assert.equal(bad.statusCode, 400);
    assert.equal(bad.json().error.code, 'INVALID_INPUT');
    assert.equal(bad.json().error.details.field, 'from');
    const noSuchDay = await t.get('/api/v1/usage?from=2026-02-30', key);
    assert.equal(noSuchDay.statusCode, 400);
    // Text that Date.parse would read as another date is not ISO 8601.
    for (const from of [
      '2026-11-27junk',
      '2026-01-31 March',
      '2026-11-27 (whatever) 10:00',
      '2026-11-27T25:00Z',
      '2026-11-27T10:00+24:00',
    ]) {
      const res = await t.get(`/api/v1/usage?from=${encodeURIComponent(from)}`, key);
      assert.equal(res.statusCode, 400, from);
      assert.equal(res.json().error.details.field, 'from');
    }
  });

  test('from and to are ISO 8601 in UTC unless they give an offset, in any year from 0000', async () => {
    const key = await t.key();
    const period = async (from: string) => (await t.get(`/api/v1/usage?from=${encodeURIComponent(from)}`, key)).json().period.from;
    assert.equal(await period('2026-11-27T10:00:00'), '2026-11-27T10:00:00.000Z');
    assert.equal(await period('2026-11-27T10:30'), '2026-11-27T10:00:00.000Z');
    assert.equal(await period('2026-11-27T10:00:00.250+05:30'), '2026-11-27T04:00:00.000Z');
    assert.equal(await period('2026-11-27t10:00:00-0100'), '2026-11-27T11:00:00.000Z');
    assert.equal(await period('2026-11-27'), '2026-11-27T00:00:00.000Z');
    assert.equal(await period('0050-06-01'), '0050-06-01T00:00:00.000Z');
  });

  test('counts are kept per hour: the period widens to whole hours and says so', async () => {
    const key = await t.key();
    const hourOf = (ms: number) => Math.floor(ms / 3_600_000) * 3_600_000;
    const first = hourOf(Date.now());
    await t.post('/api/v1/check', { messages: [user('counted this hour')] }, key);
    const last = hourOf(Date.now());
    // A window inside the hour counts the whole hour, and the period shows the hour.
    const from = new Date(first + 1000).toISOString();
    const to = new Date(last + 2000).toISOString();
    const u = (await t.get(`/api/v1/usage?from=${from}&to=${to}`, key)).json();
    assert.equal(u.total_requests, 1);
    assert.deepEqual(u.period, { from: new Date(first).toISOString(), to: new Date(last + 3_600_000).toISOString() });
  });

  test('a to in the last hour of year 9999 still counts everything before it', async () => {
    const key = await t.key();
    await t.post('/api/v1/check', { messages: [user('counted before the end of time')] }, key);
    const u = (await t.get('/api/v1/usage?to=9999-12-31T23:30:00Z', key)).json();
    assert.equal(u.total_requests, 1);
    assert.equal(u.period.to, '9999-12-31T23:59:59.999Z');
  });

  test('a from after the end of year 9999 (by its offset) counts nothing', async () => {
    const key = await t.key();
    await t.post('/api/v1/check', { messages: [user('counted long before the year 10000')] }, key);
    const u = (await t.get(`/api/v1/usage?from=${encodeURIComponent('9999-12-31T23:30:00-01:00')}`, key)).json();
    assert.equal(u.total_requests, 0);
    assert.equal(u.period.from, '9999-12-31T23:59:59.999Z');
  });
});
