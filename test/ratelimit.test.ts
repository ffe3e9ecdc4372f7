import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestApp, user, type TestApp } from './helpers.ts';

describe('rate limits by plan', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('free: a burst of 100, then 429 RATE_LIMIT_EXCEEDED with retry_after and Retry-After', async () => {
    const key = await t.key(undefined, 'free');
    const started = Math.floor(Date.now() / 1000);
    let first: Record<string, unknown> | null = null;
    for (let i = 0; i < 100; i++) {
      const res = await t.get('/api/v1/usage', key);
      assert.equal(res.statusCode, 200, `request ${i + 1}`);
      assert.equal(res.headers['x-ratelimit-limit'], '60');
      first ??= res.headers;
    }
    assert.equal(first?.['x-ratelimit-remaining'], '99');
    const refused = await t.post('/api/v1/check', { messages: [user('one too many')] }, key);
    assert.equal(refused.statusCode, 429);
    const body = refused.json();
    assert.equal(body.error.code, 'RATE_LIMIT_EXCEEDED');
    assert.equal(body.status, 429);
    assert.equal(body.error.retry_after, 1);
    assert.equal(refused.headers['retry-after'], '1');
    assert.equal(refused.headers['x-ratelimit-remaining'], '0');
    const reset = Number(refused.headers['x-ratelimit-reset']);
    assert.ok(Number.isInteger(reset));
    // An empty bucket of 100 refills at 1/s: full again about 100 s from now.
    assert.ok(reset >= started + 95 && reset <= started + 105, `reset ${reset} vs now ${started}`);
  });

  test('pro and enterprise advertise their per-minute limits and bursts', async () => {
    for (const [plan, limit, burst] of [
      ['pro', '600', 1000],
      ['enterprise', '6000', 10000],
    ] as const) {
      const key = await t.key(undefined, plan);
      const res = await t.get('/api/v1/usage', key);
      assert.equal(res.headers['x-ratelimit-limit'], limit);
      assert.equal(res.headers['x-ratelimit-remaining'], String(burst - 1));
    }
  });

  test('the unlimited plan counts but never refuses', async () => {
    const key = await t.key(undefined, 'unlimited');
    t.config.plans.unlimited = { requestsPerMinute: 1, burst: 2, unlimited: true, maxEntries: null, maxStoredBytes: null };
    const codes = [];
    for (let i = 0; i < 5; i++) codes.push((await t.get('/api/v1/usage', key)).statusCode);
    assert.deepEqual(codes, [200, 200, 200, 200, 200]);
    const res = await t.get('/api/v1/usage', key);
    assert.equal(res.headers['x-ratelimit-remaining'], '0');
  });

  test('limits are per account', async () => {
    t.config.plans.tiny = { requestsPerMinute: 1, burst: 1, unlimited: false, maxEntries: null, maxStoredBytes: null };
    const a = await t.key(undefined, 'tiny');
    const b = await t.key(undefined, 'tiny');
    assert.equal((await t.get('/api/v1/usage', a)).statusCode, 200);
    assert.equal((await t.get('/api/v1/usage', a)).statusCode, 429);
    assert.equal((await t.get('/api/v1/usage', b)).statusCode, 200);
  });
});

describe('behind a proxy (REPRISE_TRUST_PROXY)', () => {
  test('the address the proxy saw counts, not what the client wrote before it', async () => {
    const t = await startTestApp({ env: { REPRISE_TRUST_PROXY: 'true', REPRISE_AUTH_FAILURES_PER_MINUTE: '3' } });
    try {
      const codes: number[] = [];
      for (let i = 0; i < 6; i++) {
        // The client writes a new first entry each time; the proxy appends the address it saw.
        const res = await t.app.inject({
          method: 'POST',
          url: '/api/v1/check',
          payload: { messages: [user('hi')] },
          headers: { authorization: 'Bearer rk_wrong', 'x-forwarded-for': `10.0.0.${i}, 203.0.113.9` },
        });
        codes.push(res.statusCode);
      }
      assert.deepEqual(codes, [401, 401, 401, 429, 429, 429]);
    } finally {
      await t.close();
    }
  });
});

describe('per-address limits and IPv6', () => {
  test('the addresses of one IPv6 /64 count as one for failed authentications and sign-ins', async () => {
    const t = await startTestApp({ env: { REPRISE_AUTH_FAILURES_PER_MINUTE: '3' } });
    try {
      const keyCodes: number[] = [];
      const signInCodes: number[] = [];
      for (let i = 1; i <= 12; i++) {
        // A host picks another address of its /64 for each attempt.
        const remoteAddress = `2001:db8:5:6::${i.toString(16)}`;
        const wrongKey = await t.app.inject({
          method: 'GET',
          url: '/api/v1/usage',
          headers: { authorization: `Bearer rp_live_${'C'.repeat(40)}` },
          remoteAddress,
        });
        keyCodes.push(wrongKey.statusCode);
        const signIn = await t.app.inject({
          method: 'POST',
          url: '/dashboard/api/login',
          payload: { account: 'someone', password: `guess ${i}` },
          remoteAddress,
        });
        signInCodes.push(signIn.statusCode);
      }
      assert.deepEqual(keyCodes, [...Array<number>(3).fill(401), ...Array<number>(9).fill(429)]);
      assert.deepEqual(signInCodes, [...Array<number>(10).fill(401), 429, 429]);
      // Another /64 has its own limits.
      const elsewhere = await t.app.inject({
        method: 'GET',
        url: '/api/v1/usage',
        headers: { authorization: `Bearer rp_live_${'C'.repeat(40)}` },
        remoteAddress: '2001:db8:5:7::1',
      });
      assert.equal(elsewhere.statusCode, 401);
    } finally {
      await t.close();
    }
  });
});
