import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { hashPassword } from '../src/dashboard/passwords.ts';
import { startTestApp, user, type TestApp } from './helpers.ts';

describe('dashboard API', () => {
  let t: TestApp;
  let key: string;
  let other: string;
  before(async () => {
    t = await startTestApp();
    key = await t.key('dash', 'pro');
    other = await t.key('dash-other', 'pro');
    const store = t.runtime.ctx.store;
    for (const name of ['dash', 'dash-other']) {
      const a = await store.getAccountByName(name);
      await store.setPassword(a?.id ?? '', await hashPassword(`${name}-password`));
    }
  });
  after(() => t.close());

  async function signIn(account = 'dash', ip = '198.51.100.1') {
    const res = await t.app.inject({
      method: 'POST',
      url: '/dashboard/api/login',
      payload: { account, password: `${account}-password` },
      remoteAddress: ip,
    });
    assert.equal(res.statusCode, 200, res.body);
    const cookie = String(res.headers['set-cookie']).split(';')[0] as string;
    return { cookie, csrf: res.json().csrf_token as string, res };
  }

  const call = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, s: { cookie: string; csrf?: string }, payload?: unknown) =>
    t.app.inject({ method, url, payload: payload as object, headers: { cookie: s.cookie, ...(s.csrf ? { 'x-csrf-token': s.csrf } : {}) } });

  test('the pages are served with their assets, no CDN', async () => {
    const page = await t.get('/dashboard');
    assert.equal(page.statusCode, 200);
    assert.match(String(page.headers['content-type']), /text\/html/);
    assert.doesNotMatch(page.body, /https?:\/\//);
    const slash = await t.get('/dashboard/');
    assert.equal(slash.statusCode, 301);
    assert.equal(slash.headers.location, '/dashboard');
    for (const asset of ['/dashboard/app.js', '/dashboard/app.css', '/dashboard/uplot.js', '/dashboard/uplot.css']) {
      assert.equal((await t.get(asset)).statusCode, 200, asset);
    }
  });

  test('sign-in sets a secure session cookie; wrong passwords are refused and rate limited', async () => {
    const { res } = await signIn();
    const cookie = String(res.headers['set-cookie']);
    assert.match(cookie, /HttpOnly/);
    assert.match(cookie, /SameSite=Strict/);
    assert.match(cookie, /Path=\/dashboard/);
    const https = await t.app.inject({
      method: 'POST',
      url: '/dashboard/api/login',
      payload: { account: 'dash', password: 'dash-password' },
      headers: { 'x-forwarded-proto': 'https' },
    });
    assert.equal(https.statusCode, 200);

    const codes: number[] = [];
    const remaining: string[] = [];
    for (let i = 0; i < 12; i++) {
      const r = await t.app.inject({
        method: 'POST',
        url: '/dashboard/api/login',
        payload: { account: 'dash', password: 'wrong' },
        remoteAddress: '203.0.113.9',
      });
      codes.push(r.statusCode);
      if (r.statusCode === 401) assert.equal(r.json().error.code, 'INVALID_CREDENTIALS');
      // The rate-limit headers of a failed sign-in are those of the sign-in limit (10 a minute),
      // as a failed key's are the failed-authentication limit's: a 429 does not say 999 are left.
      assert.equal(r.headers['x-ratelimit-limit'], '10');
      remaining.push(String(r.headers['x-ratelimit-remaining']));
    }
    assert.deepEqual(codes.slice(0, 10), Array(10).fill(401));
    assert.deepEqual(codes.slice(10), [429, 429]);
    assert.ok(
      remaining.every((r, i) => /^\d$/.test(r) && (i === 0 || Number(r) <= Number(remaining[i - 1]))),
      remaining.join(),
    );
    assert.deepEqual(remaining.slice(10), ['0', '0']);
    // Attempts made at the same moment are counted as they come, not after their passwords.
    const together = await Promise.all(
      Array.from({ length: 20 }, () =>
        t.app.inject({
          method: 'POST',
          url: '/dashboard/api/login',
          payload: { account: 'dash', password: 'wrong' },
          remoteAddress: '203.0.113.11',
        }),
      ),
    );
    const counts = together.reduce<Record<number, number>>((c, r) => ({ ...c, [r.statusCode]: (c[r.statusCode] ?? 0) + 1 }), {});
    assert.deepEqual(counts, { 401: 10, 429: 10 });
    // Successful sign-ins do not use up the attempts.
    for (let i = 0; i < 12; i++) await signIn('dash', '203.0.113.12');
    const unknown = await t.app.inject({
      method: 'POST',
      url: '/dashboard/api/login',
      payload: { account: 'nobody', password: 'x' },
      remoteAddress: '203.0.113.10',
    });
    assert.equal(unknown.statusCode, 401);
  });

  test('guesses spread over many addresses are limited per account name, existing or not', async () => {
    await t.key('dash-guessed', 'pro');
    const store = t.runtime.ctx.store;
    const guessed = await store.getAccountByName('dash-guessed');
    await store.setPassword(guessed?.id ?? '', await hashPassword('dash-guessed-password'));
    const attempt = (account: string, password: string, n: number) =>
      t.app.inject({ method: 'POST', url: '/dashboard/api/login', payload: { account, password }, remoteAddress: `192.0.2.${n}` });
    for (const name of ['dash-guessed', 'no-such-account']) {
      const codes: number[] = [];
      for (let i = 0; i < 50; i++) codes.push((await attempt(name, `guess-${i}`, i + 1)).statusCode);
      assert.deepEqual(codes, Array(50).fill(401), name);
      const refused = await attempt(name, 'guess-50', 200);
      assert.equal(refused.statusCode, 429, name);
      assert.equal(refused.json().error.code, 'RATE_LIMIT_EXCEEDED');
      assert.match(refused.json().error.message, /this account/);
      assert.ok(Number(refused.headers['retry-after']) >= 1);
      assert.equal(refused.headers['x-ratelimit-limit'], '50', name);
      assert.equal(refused.headers['x-ratelimit-remaining'], '0', name);
    }
    // While the name is limited, its password is not checked, the right one included.
    assert.equal((await attempt('dash-guessed', 'dash-guessed-password', 201)).statusCode, 429);
    // Other accounts are not affected, from the same addresses.
    for (let i = 1; i <= 3; i++) await signIn('dash-other', `192.0.2.${i}`);
  });

  test('without a session the API is 401; changes need the CSRF token', async () => {
    assert.equal((await t.get('/dashboard/api/keys')).statusCode, 401);
    const s = await signIn();
    const noCsrf = await call('POST', '/dashboard/api/keys', { cookie: s.cookie }, { name: 'x' });
    assert.equal(noCsrf.statusCode, 403);
    assert.equal(noCsrf.json().error.code, 'FORBIDDEN');
    const wrong = await call('POST', '/dashboard/api/keys', { cookie: s.cookie, csrf: 'nope' }, { name: 'x' });
    assert.equal(wrong.statusCode, 403);
  });

  test('HEAD of a read is answered as its GET is, without the CSRF token a change needs', async () => {
    const s = await signIn();
    for (const url of ['/dashboard/api/me', '/dashboard/api/keys', '/dashboard/api/usage', '/dashboard/api/entries']) {
      const get = await call('GET', url, s);
      const head = await t.app.inject({ method: 'HEAD', url, headers: { cookie: s.cookie } });
      assert.equal(get.statusCode, 200, url);
      assert.equal(head.statusCode, 200, `HEAD ${url}`);
      assert.equal(head.body, '');
    }
    assert.equal((await t.app.inject({ method: 'HEAD', url: '/dashboard/api/me' })).statusCode, 401);
  });

  test('odd headers and names are 4xx: a null Origin, a cookie that is not percent-encoding, a NUL in the name', async () => {
    const s = await signIn();
    // Sandboxed pages send `Origin: null`: not this host, so refused like any other origin.
    const nullOrigin = await t.app.inject({
      method: 'PUT',
      url: '/dashboard/api/settings',
      payload: { default_threshold: 0.9 },
      headers: { cookie: s.cookie, 'x-csrf-token': s.csrf, origin: 'null' },
    });
    assert.equal(nullOrigin.statusCode, 403, nullOrigin.body);
    assert.equal(nullOrigin.json().error.code, 'FORBIDDEN');
    const badCookie = await t.app.inject({ method: 'GET', url: '/dashboard/api/me', headers: { cookie: 'reprise_session=%E0%A4%A' } });
    assert.equal(badCookie.statusCode, 401, badCookie.body);
    const nul = await t.app.inject({
      method: 'POST',
      url: '/dashboard/api/login',
      payload: { account: 'da\u0000sh', password: 'x' },
      remoteAddress: '198.51.100.9',
    });
    assert.equal(nul.statusCode, 400, nul.body);
    assert.equal(nul.json().error.details.field, 'account');
  });

  test('query strings are checked as the API checks them: each odd one is a 400 naming its field', async () => {
    const s = await signIn();
    const cases: [string, string][] = [
      ['/dashboard/api/entries?q=a&q=b', 'q'],
      ['/dashboard/api/entries?order=constructor', 'order'],
      ['/dashboard/api/entries?order=foo', 'order'],
      ['/dashboard/api/entries?q=%00', 'q'],
      [`/dashboard/api/entries?q=${'x'.repeat(201)}`, 'q'],
      ['/dashboard/api/usage?granularity=week', 'granularity'],
    ];
    for (const [url, field] of cases) {
      const res = await call('GET', url, s);
      assert.equal(res.statusCode, 400, `${url}: ${res.body}`);
      assert.equal(res.json().error.code, 'INVALID_INPUT', url);
      assert.equal(res.json().error.details.field, field, url);
    }
    const revokeNul = await call('POST', '/dashboard/api/keys/%00/revoke', s);
    assert.equal(revokeNul.statusCode, 404, revokeNul.body);
  });

  test('keys: generate (secret once), list, revoke; the API refuses a revoked key at once', async () => {
    const s = await signIn();
    const created = await call('POST', '/dashboard/api/keys', s, { name: 'from the dashboard' });
    assert.equal(created.statusCode, 200);
    const secret = created.json().key as string;
    assert.match(secret, /^rp_live_[0-9A-Za-z]{40}$/);
    assert.equal((await t.get('/api/v1/usage', secret)).statusCode, 200);
    const list = (await call('GET', '/dashboard/api/keys', s)).json().data as {
      id: string;
      name: string;
      status: string;
      prefix: string;
    }[];
    const listed = list.find((k) => k.name === 'from the dashboard');
    assert.equal(listed?.status, 'active');
    assert.ok(!JSON.stringify(list).includes(secret));
    const revoked = await call('POST', `/dashboard/api/keys/${listed?.id}/revoke`, s);
    assert.equal(revoked.json().status, 'revoked');
    assert.equal((await t.get('/api/v1/usage', secret)).statusCode, 401);
  });

  test("one account never sees or changes another's keys or entries", async () => {
    const s = await signIn('dash-other', '198.51.100.2');
    const mine = await signIn();
    const keys = (await call('GET', '/dashboard/api/keys', mine)).json().data as { id: string }[];
    const theirs = await call('POST', `/dashboard/api/keys/${keys[0]?.id}/revoke`, s);
    assert.equal(theirs.statusCode, 404);
    const stored = (await t.post('/api/v1/store', { messages: [user('private to dash')], answer: 'secret answer' }, key)).json();
    assert.equal((await call('GET', `/dashboard/api/entries/${stored.entry_id}`, s)).statusCode, 404);
    assert.equal((await call('DELETE', `/dashboard/api/entries/${stored.entry_id}`, s)).statusCode, 404);
    assert.equal((await t.get(`/api/v1/entries/${stored.entry_id}`, other)).statusCode, 404);
    const list = (await call('GET', '/dashboard/api/entries', s)).json();
    assert.equal(list.pagination.total, 0);
  });

  test('entries: paginated list, search, one entry, delete (stops matching)', async () => {
    const s = await signIn();
    const k = await t.key('entries-owner', 'pro');
    const a = await t.runtime.ctx.store.getAccountByName('entries-owner');
    await t.runtime.ctx.store.setPassword(a?.id ?? '', await hashPassword('entries-owner-password'));
    for (let i = 0; i < 25; i++)
      await t.post(
        '/api/v1/store',
        { messages: [user(`question ${i}`)], answer: `answer ${i}`, model: i === 7 ? 'special-model' : 'gpt-4o' },
        k,
      );
    const page1 = (await t.get('/api/v1/entries', k)).json();
    assert.deepEqual(page1.pagination, { page: 1, per_page: 20, total: 25, total_pages: 2 });
    assert.equal(page1.data.length, 20);
    const page2 = (await t.get('/api/v1/entries?page=2&per_page=20', k)).json();
    assert.equal(page2.data.length, 5);
    const found = (await t.get('/api/v1/entries?q=special', k)).json();
    assert.deepEqual(
      found.data.map((e: { question: string }) => e.question),
      ['question 7'],
    );
    for (const bad of ['per_page=101', 'per_page=0', 'page=0', 'page=x']) {
      const r = await t.get(`/api/v1/entries?${bad}`, k);
      assert.equal(r.statusCode, 400, bad);
      assert.equal(r.json().error.code, 'INVALID_INPUT');
    }
    const one = (await t.get(`/api/v1/entries/${found.data[0].id}`, k)).json();
    assert.deepEqual(one.messages, [{ role: 'user', content: 'question 7' }]);
    assert.equal(one.answer, 'answer 7');
    const del = await t.app.inject({ method: 'DELETE', url: `/api/v1/entries/${one.id}`, headers: { authorization: `Bearer ${k}` } });
    assert.equal(del.statusCode, 200);
    const miss = (await t.post('/api/v1/check', { messages: [user('question 7')] }, k)).json();
    assert.equal(miss.cache_hit, false);
    assert.equal((await t.get(`/api/v1/entries/${one.id}`, k)).statusCode, 404);
    // Ids are positive integers: anything else is a bad request, not an entry that is missing.
    for (const bad of ['abc', '0', '000', '-1', '1.5']) {
      const r = await t.get(`/api/v1/entries/${bad}`, k);
      assert.equal(r.statusCode, 400, bad);
      assert.equal(r.json().error.details.field, 'id', bad);
    }
    void s;
  });

  test("every answer to a signed-in call names the session's account, so that a page showing another can tell", async () => {
    const mine = await signIn();
    const theirs = await signIn('dash-other', '198.51.100.2');
    const mineId = (await call('GET', '/dashboard/api/me', mine)).json().account.id as string;
    const theirsId = (await call('GET', '/dashboard/api/me', theirs)).json().account.id as string;
    assert.notEqual(mineId, theirsId);
    for (const url of [
      '/dashboard/api/me',
      '/dashboard/api/keys',
      '/dashboard/api/usage',
      '/dashboard/api/entries',
      '/dashboard/api/entries/1',
    ]) {
      assert.equal((await call('GET', url, mine)).headers['x-reprise-account'], mineId, url);
      assert.equal((await call('GET', url, theirs)).headers['x-reprise-account'], theirsId, url);
    }
    // A change refused for its CSRF token says whose session it was too.
    const refused = await call('POST', '/dashboard/api/keys', { cookie: mine.cookie, csrf: 'wrong' }, { name: 'x' });
    assert.equal(refused.statusCode, 403);
    assert.equal(refused.headers['x-reprise-account'], mineId);
    // No session, no account.
    assert.equal((await t.get('/dashboard/api/keys')).headers['x-reprise-account'], undefined);
  });

  test('the dashboard lists entries with a preview of their question and answer, and their lengths; one entry comes whole', async () => {
    const k = await t.key('dash-long', 'pro');
    const a = await t.runtime.ctx.store.getAccountByName('dash-long');
    await t.runtime.ctx.store.setPassword(a?.id ?? '', await hashPassword('dash-long-password'));
    const s = await signIn('dash-long', '198.51.100.3');
    const question = `Long question ${'q'.repeat(99_980)}`;
    // An emoji across the preview's end is not cut in half.
    const answer = `${'a'.repeat(199)}\u{1F600}${'b'.repeat(99_799)}`;
    for (let i = 0; i < 3; i++) {
      const stored = await t.post('/api/v1/store', { messages: [user(`${i} ${question}`)], answer }, k);
      assert.equal(stored.statusCode, 200, stored.body);
    }
    await t.post('/api/v1/store', { messages: [user('Short one')], answer: 'Short.' }, k);
    const list = await call('GET', '/dashboard/api/entries?per_page=100', s);
    assert.equal(list.statusCode, 200);
    assert.ok(list.body.length < 10_000, `the list of 4 entries is ${list.body.length} bytes`);
    const rows = list.json().data as Record<string, unknown>[];
    assert.equal(rows.length, 4);
    const long = rows.find((e) => String(e.question_preview).startsWith('0 Long question')) as Record<string, unknown>;
    // Lengths as the API counts them in its limits (UTF-16 code units).
    assert.equal(long.question_length, 99_996);
    assert.equal(long.answer_length, 100_000);
    assert.equal((long.question_preview as string).length, 200);
    assert.equal(long.answer_preview, 'a'.repeat(199));
    assert.equal(long.question, undefined);
    assert.equal(long.answer, undefined);
    const short = rows.find((e) => e.question_preview === 'Short one') as Record<string, unknown>;
    assert.deepEqual([short.answer_preview, short.question_length, short.answer_length], ['Short.', 9, 6]);
    // Opened, the entry is whole.
    const one = (await call('GET', `/dashboard/api/entries/${long.id}`, s)).json();
    assert.equal(one.answer, answer);
    assert.equal(one.messages[0].content, `0 ${question}`);
    // The API's list is the spec's, whole texts and all.
    const apiList = (await t.get('/api/v1/entries?q=Short', k)).json();
    assert.equal(apiList.data[0].question, 'Short one');
    assert.equal(apiList.data[0].answer, 'Short.');
    assert.equal(apiList.data[0].question_preview, undefined);
  });

  test('usage over time by hour and day, the same through the API and the dashboard', async () => {
    const s = await signIn();
    await t.post('/api/v1/check', { messages: [user('series question')] }, key);
    const api = (await t.get('/api/v1/usage?granularity=hour', key)).json();
    assert.equal(api.granularity, 'hour');
    assert.ok(api.series.length >= 1);
    const last = api.series[api.series.length - 1];
    assert.match(last.start, /T\d\d:00:00\.000Z$/);
    assert.equal(last.total_requests, last.cache_hits + last.cache_misses);
    const day = (await call('GET', '/dashboard/api/usage?granularity=day', s)).json();
    assert.match(day.series[0].start, /T00:00:00\.000Z$/);
    assert.equal(day.total_requests, api.total_requests);
    // What the account keeps, and its plan's limits, as the API says.
    assert.deepEqual(day.storage, api.storage);
    assert.equal(typeof day.storage.entries, 'number');
    assert.equal((await t.get('/api/v1/usage?granularity=week', key)).statusCode, 400);
  });

  test('settings: default threshold and entry lifetime are saved and validated', async () => {
    const s = await signIn();
    const ok = await call('PUT', '/dashboard/api/settings', s, { default_threshold: 0.9, entry_ttl_seconds: 3600 });
    assert.equal(ok.statusCode, 200);
    assert.equal(ok.json().account.default_threshold, 0.9);
    assert.equal(ok.json().account.entry_ttl_seconds, 3600);
    const stored = (await t.post('/api/v1/store', { messages: [user('with a lifetime')], answer: 'x' }, key)).json();
    const entry = (await t.get(`/api/v1/entries/${stored.entry_id}`, key)).json();
    assert.ok(entry.expires_at && Date.parse(entry.expires_at) > Date.now() + 3500_000);
    const bad = await call('PUT', '/dashboard/api/settings', s, { default_threshold: 2 });
    assert.equal(bad.statusCode, 400);
    assert.equal(bad.json().error.details.field, 'default_threshold');
    const misspelt = await call('PUT', '/dashboard/api/settings', s, { default_treshold: 0.9 });
    assert.equal(misspelt.statusCode, 400);
    assert.equal(misspelt.json().error.details.field, 'default_treshold');
    assert.equal(
      misspelt.json().error.message,
      'default_treshold is not a setting; the settings are default_threshold and entry_ttl_seconds',
    );
    assert.equal(misspelt.json().error.details.expected, 'default_threshold or entry_ttl_seconds');
    for (const body of [[], null, 'x']) {
      const notObject = await t.app.inject({
        method: 'PUT',
        url: '/dashboard/api/settings',
        payload: JSON.stringify(body),
        headers: { cookie: s.cookie, 'x-csrf-token': s.csrf ?? '', 'content-type': 'application/json' },
      });
      assert.equal(notObject.statusCode, 400, JSON.stringify(body));
      assert.equal(notObject.json().error.details.field, 'body');
    }
    await call('PUT', '/dashboard/api/settings', s, { default_threshold: 0.85, entry_ttl_seconds: 0 });
  });

  test('sign-out ends the session', async () => {
    const s = await signIn();
    assert.equal((await call('POST', '/dashboard/api/logout', s)).statusCode, 200);
    assert.equal((await call('GET', '/dashboard/api/me', s)).statusCode, 401);
  });
});

describe('dashboard behind a proxy that passes the public host in X-Forwarded-Host', () => {
  let proxied: TestApp;
  let direct: TestApp;
  before(async () => {
    proxied = await startTestApp({ env: { REPRISE_TRUST_PROXY: 'true' } });
    direct = await startTestApp();
    for (const t of [proxied, direct]) {
      await t.key('behind', 'pro');
      const a = await t.runtime.ctx.store.getAccountByName('behind');
      await t.runtime.ctx.store.setPassword(a?.id ?? '', await hashPassword('behind-password'));
    }
  });
  after(async () => {
    await proxied.close();
    await direct.close();
  });

  const viaProxy = (t: TestApp, method: 'POST', url: string, headers: Record<string, string>, payload?: object) =>
    t.app.inject({
      method,
      url,
      payload,
      headers: { host: 'backend:8080', 'x-forwarded-host': 'public.example', 'x-forwarded-proto': 'https', ...headers },
    });

  async function signIn(t: TestApp) {
    const res = await viaProxy(
      t,
      'POST',
      '/dashboard/api/login',
      { origin: 'https://public.example' },
      {
        account: 'behind',
        password: 'behind-password',
      },
    );
    assert.equal(res.statusCode, 200, res.body);
    return { cookie: String(res.headers['set-cookie']).split(';')[0] as string, csrf: res.json().csrf_token as string };
  }

  /** The status of a key made through the proxy from `origin`. */
  const makeKey = async (t: TestApp, s: { cookie: string; csrf: string }, origin: string) =>
    (await viaProxy(t, 'POST', '/dashboard/api/keys', { cookie: s.cookie, 'x-csrf-token': s.csrf, origin }, { name: 'through the proxy' }))
      .statusCode;

  test('a change from the public origin is accepted where the proxy is trusted, and only there', async () => {
    const s = await signIn(proxied);
    assert.equal(await makeKey(proxied, s, 'https://public.example'), 200);
    assert.equal(await makeKey(proxied, s, 'https://evil.example'), 403);
    // Where no proxy is trusted, X-Forwarded-Host is anyone's to send: the Origin must be the Host.
    assert.equal(await makeKey(direct, await signIn(direct), 'https://public.example'), 403);
  });
});
