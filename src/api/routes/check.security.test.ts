import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { closeSharedEmbedder, sharedEmbedder, startTestApp, user, type TestApp } from '../../../test/helpers.ts';

describe('authentication', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { REPRISE_AUTH_FAILURES_PER_MINUTE: '5' } });
  });
  after(() => t.close());

  const endpoints = [
    ['POST', '/api/v1/check'],
    ['POST', '/api/v1/store'],
    ['GET', '/api/v1/usage'],
    ['GET', '/api/v1/health'],
  ] as const;

  for (const [method, url] of endpoints) {
    for (const [name, header] of [
      ['no Authorization header', undefined],
      ['a malformed header', 'Token abc'],
      ['an empty bearer', 'Bearer '],
      ['an unknown key', `Bearer rp_live_${'A'.repeat(40)}`],
      ['a key of the wrong shape', 'Bearer sk-123'],
    ] as const) {
      test(`${method} ${url} with ${name} is 401 INVALID_API_KEY`, async () => {
        const res = await t.app.inject({
          method,
          url,
          remoteAddress: `10.0.${endpoints.findIndex(([, u]) => u === url)}.${name.length}`,
          headers: { 'content-type': 'application/json', ...(header ? { authorization: header } : {}) },
          payload: method === 'POST' ? JSON.stringify({ messages: [user('x')], answer: 'y' }) : undefined,
        });
        assert.equal(res.statusCode, 401);
        const body = res.json();
        assert.equal(body.error.code, 'INVALID_API_KEY');
        assert.equal(body.status, 401);
        // A header that is no bearer key is malformed; a key that is not one of ours is invalid.
        assert.match(body.error.message, header?.startsWith('Bearer rp_live_') || header === 'Bearer sk-123' ? /invalid/ : /malformed/);
        assert.ok(res.headers['x-ratelimit-limit']);
        assert.ok(res.headers['x-ratelimit-remaining'] !== undefined);
        assert.ok(res.headers['x-ratelimit-reset']);
      });
    }
  }

  test('a revoked key is rejected at once', async () => {
    const secret = await t.key('revokes');
    assert.equal((await t.get('/api/v1/usage', secret)).statusCode, 200);
    const account = await t.runtime.ctx.store.getAccountByName('revokes');
    const [k] = await t.runtime.ctx.store.listKeys(account?.id ?? '');
    await t.runtime.ctx.store.revokeKey(k?.id ?? '');
    const res = await t.get('/api/v1/usage', secret);
    assert.equal(res.statusCode, 401);
    assert.equal(res.json().error.code, 'INVALID_API_KEY');
  });

  test('repeated failures from one address are rate limited; a valid key still works there', async () => {
    const bad = { authorization: `Bearer rp_live_${'B'.repeat(40)}` };
    const codes: number[] = [];
    for (let i = 0; i < 8; i++) {
      const res = await t.app.inject({ method: 'GET', url: '/api/v1/usage', headers: bad, remoteAddress: '192.0.2.7' });
      codes.push(res.statusCode);
      if (res.statusCode === 429) {
        assert.equal(res.json().error.code, 'RATE_LIMIT_EXCEEDED');
        assert.ok(res.json().error.retry_after >= 1);
        assert.equal(res.headers['retry-after'], String(res.json().error.retry_after));
      }
    }
    assert.deepEqual(codes, [401, 401, 401, 401, 401, 429, 429, 429]);
    const good = await t.key();
    const ok = await t.app.inject({
      method: 'GET',
      url: '/api/v1/usage',
      headers: { authorization: `Bearer ${good}` },
      remoteAddress: '192.0.2.7',
    });
    assert.equal(ok.statusCode, 200);
  });
});

describe('isolation between accounts', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ embedder: await sharedEmbedder() });
  });
  after(async () => {
    await t.close();
    await closeSharedEmbedder();
  });

  test("one account never receives another's answer, exactly or semantically, nor counts against its usage", async () => {
    const alice = await t.key('alice');
    const bob = await t.key('bob');
    const messages = [user('What is the secret launch date of Project Falcon?')];
    await t.post('/api/v1/store', { messages, answer: 'Alice-only: 3 March', model: 'gpt-4o', tokens_used: 10 }, alice);

    const exact = (await t.post('/api/v1/check', { messages }, bob)).json();
    assert.equal(exact.cache_hit, false);
    const semantic = (
      await t.post('/api/v1/check', { messages: [user('When is the secret launch date of Project Falcon?')], similarity_threshold: 0 }, bob)
    ).json();
    assert.equal(semantic.cache_hit, false);
    assert.equal(semantic.search_results.closest_match_score, 0);

    const own = (await t.post('/api/v1/check', { messages }, alice)).json();
    assert.equal(own.answer, 'Alice-only: 3 March');

    const bobUsage = (await t.get('/api/v1/usage', bob)).json();
    assert.equal(bobUsage.total_requests, 2);
    assert.equal(bobUsage.cache_hits, 0);
    const aliceUsage = (await t.get('/api/v1/usage', alice)).json();
    assert.equal(aliceUsage.total_requests, 1);
    assert.equal(aliceUsage.cache_hits, 1);
  });

  test("one account's flood of long checks does not hold up another account's check", async () => {
    const flooder = await t.key('flooder');
    const other = await t.key('other');
    // Long texts, each its own (none is remembered), sent at once within the plan's burst.
    const words = ['river', 'stone', 'cloud', 'amber', 'falcon', 'copper', 'meadow', 'harbor'];
    const long = (i: number) => Array.from({ length: 12_000 }, (_, j) => words[(i * 7 + j * (i + 3)) % words.length]).join(' ') + ` #${i}`;
    let floodDone = 0;
    const flood = Array.from({ length: 24 }, (_, i) =>
      t.post('/api/v1/check', { messages: [user(long(i))] }, flooder).then((res) => {
        floodDone++;
        return res;
      }),
    );
    const res = await t.post('/api/v1/check', { messages: [user('What is the boiling point of water at sea level?')] }, other);
    const doneBefore = floodDone;
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().search_results.semantic_checked, true);
    for (const r of await Promise.all(flood)) assert.equal(r.statusCode, 200);
    // Answered after a few of the flood's checks, not after all of them.
    assert.ok(doneBefore <= 4, `the other account's check was answered after ${doneBefore} of the flood's 24`);
  });

  test('namespaces partition an account further', async () => {
    const key = await t.key();
    const messages = [user('Summarise the quarterly report')];
    await t.post('/api/v1/store', { messages, answer: 'team-a summary', namespace: 'team-a' }, key);
    const other = (await t.post('/api/v1/check', { messages, namespace: 'team-b' }, key)).json();
    assert.equal(other.cache_hit, false);
    const none = (await t.post('/api/v1/check', { messages }, key)).json();
    assert.equal(none.cache_hit, false);
    const same = (await t.post('/api/v1/check', { messages, namespace: 'team-a' }, key)).json();
    assert.equal(same.answer, 'team-a summary');
    // After a hit in team-a, the other scopes still miss, and team-a still hits.
    assert.equal((await t.post('/api/v1/check', { messages, namespace: 'team-b' }, key)).json().cache_hit, false);
    assert.equal((await t.post('/api/v1/check', { messages }, key)).json().cache_hit, false);
    assert.equal((await t.post('/api/v1/check', { messages, namespace: 'team-a' }, key)).json().answer, 'team-a summary');
  });

  test('each namespace keeps its own entry of the same conversation', async () => {
    const key = await t.key();
    const messages = [user('Draft the release notes')];
    const a = (await t.post('/api/v1/store', { messages, answer: 'notes for team-a', namespace: 'team-a' }, key)).json();
    const b = (await t.post('/api/v1/store', { messages, answer: 'notes for team-b', namespace: 'team-b' }, key)).json();
    const shared = (await t.post('/api/v1/store', { messages, answer: 'shared notes' }, key)).json();
    assert.equal(new Set([a.entry_id, b.entry_id, shared.entry_id]).size, 3);
    // The prompt hash is the conversation's, whatever the namespace.
    assert.equal(a.prompt_hash, b.prompt_hash);
    assert.equal(a.prompt_hash, shared.prompt_hash);
    for (const [namespace, answer] of [
      ['team-a', 'notes for team-a'],
      ['team-b', 'notes for team-b'],
      [undefined, 'shared notes'],
    ] as const) {
      const hit = (await t.post('/api/v1/check', { messages, namespace }, key)).json();
      assert.equal(hit.cache_type, 'exact', `namespace ${namespace}`);
      assert.equal(hit.answer, answer);
    }
    const detail = (await t.get(`/api/v1/entries/${b.entry_id}`, key)).json();
    assert.equal(detail.prompt_hash, a.prompt_hash);
    assert.equal(detail.namespace, 'team-b');
    // The list says each entry's namespace, and keeps one namespace's when asked.
    const all = (await t.get('/api/v1/entries', key)).json();
    assert.deepEqual(all.data.map((e: { namespace: string | null }) => e.namespace).sort(), [null, 'team-a', 'team-b'].sort());
    const teamA = (await t.get('/api/v1/entries?namespace=team-a', key)).json();
    assert.deepEqual(
      teamA.data.map((e: { id: number }) => e.id),
      [a.entry_id],
    );
    assert.equal(teamA.pagination.total, 1);
  });
});

describe('searches of a large account', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test("a search through many long entries lets another account's requests through", async () => {
    const big = await t.key('big-account');
    const other = await t.key('other-account');
    const answer = 'lorem ipsum dolor sit amet '.repeat(800);
    for (let i = 0; i < 200; i++) {
      const tail = i % 50 === 0 ? ' Needle' : '';
      const res = await t.post('/api/v1/store', { messages: [user(`question ${i}`)], answer: `${answer}${i}${tail}` }, big);
      assert.equal(res.statusCode, 200);
    }
    const messages = [user('What is the tallest mountain?')];
    await t.post('/api/v1/store', { messages, answer: 'Everest' }, other);

    const answered: string[] = [];
    const search = t.get('/api/v1/entries?q=needle&per_page=2', big).then((res) => {
      answered.push('search');
      return res;
    });
    const check = t.post('/api/v1/check', { messages }, other).then((res) => {
      answered.push('check');
      return res;
    });
    const [found, hit] = await Promise.all([search, check]);
    assert.equal(hit.json().answer, 'Everest');
    assert.deepEqual(answered, ['check', 'search']);
    // The search finds what it did: the newest first, and the total over all pages.
    assert.equal(found.statusCode, 200);
    const body = found.json();
    assert.deepEqual(body.pagination, { page: 1, per_page: 2, total: 4, total_pages: 2 });
    assert.deepEqual(
      body.data.map((e: { question: string }) => e.question),
      ['question 150', 'question 100'],
    );
    const second = (await t.get('/api/v1/entries?q=needle&per_page=2&page=2&order=recent', big)).json();
    assert.deepEqual(
      second.data.map((e: { question: string }) => e.question),
      ['question 50', 'question 0'],
    );
  });
});
