import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestApp, user, type TestApp } from '../../../test/helpers.ts';

function assertError(res: { statusCode: number; json(): unknown }, status: number, code: string, field?: string) {
  assert.equal(res.statusCode, status);
  const body = res.json() as {
    error: { code: string; message: string; details?: { field: string; expected: string; received: string } };
    status: number;
    timestamp: string;
  };
  assert.equal(body.error.code, code);
  assert.equal(body.status, status);
  assert.ok(body.error.message.length > 0);
  assert.ok(!Number.isNaN(Date.parse(body.timestamp)));
  if (field !== undefined) {
    assert.equal(body.error.details?.field, field);
    assert.equal(typeof body.error.details?.expected, 'string');
    assert.equal(typeof body.error.details?.received, 'string');
  }
  return body;
}

describe('POST /api/v1/check: invalid input', () => {
  let t: TestApp;
  let key: string;
  before(async () => {
    t = await startTestApp({ env: { REPRISE_MAX_MESSAGES: '3', REPRISE_MAX_MESSAGE_CHARS: '50', REPRISE_MAX_BODY_BYTES: '2048' } });
    key = await t.key();
  });
  after(() => t.close());

  for (const [name, body] of [
    ['messages missing', {}],
    ['messages empty', { messages: [] }],
    ['messages not an array', { messages: 'hello' }],
    ['messages null', { messages: null }],
  ] as const) {
    test(`INVALID_MESSAGES when ${name}`, async () => {
      const res = await t.post('/api/v1/check', body, key);
      assertError(res, 400, 'INVALID_MESSAGES', 'messages');
    });
  }

  test('INVALID_MESSAGES when there is no body at all', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/api/v1/check', headers: { authorization: `Bearer ${key}` } });
    assertError(res, 400, 'INVALID_MESSAGES', 'messages');
    const empty = await t.app.inject({
      method: 'POST',
      url: '/api/v1/check',
      payload: '',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    });
    assertError(empty, 400, 'INVALID_MESSAGES', 'messages');
  });

  test('a body with __proto__ keys is refused, not merged', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/check',
      payload: '{"__proto__":{"polluted":true},"messages":[{"role":"user","content":"a"}]}',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    });
    assertError(res, 400, 'INVALID_INPUT', 'body');
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  });

  const cases: [string, unknown, string][] = [
    ['an unknown role', { messages: [{ role: 'bot', content: 'x' }] }, 'messages[0].role'],
    ['a missing role', { messages: [{ content: 'x' }] }, 'messages[0].role'],
    ['non-string content', { messages: [user('a'), { role: 'user', content: 42 }] }, 'messages[1].content'],
    ['a message that is not an object', { messages: ['hi'] }, 'messages[0]'],
    ['a threshold above 1', { messages: [user('a')], similarity_threshold: 1.5 }, 'similarity_threshold'],
    ['a negative threshold', { messages: [user('a')], similarity_threshold: -0.1 }, 'similarity_threshold'],
    ['a threshold given as a string', { messages: [user('a')], similarity_threshold: '0.9' }, 'similarity_threshold'],
    ['an unknown cache type', { messages: [user('a')], cache_types: ['fuzzy'] }, 'cache_types[0]'],
    ['cache_types not an array', { messages: [user('a')], cache_types: 'exact' }, 'cache_types'],
    ['empty cache_types', { messages: [user('a')], cache_types: [] }, 'cache_types'],
    ['too many messages', { messages: [user('a'), user('b'), user('c'), user('d')] }, 'messages'],
    ['a message over the length limit', { messages: [user('x'.repeat(51))] }, 'messages[0].content'],
  ];
  for (const [name, body, field] of cases) {
    test(`INVALID_INPUT with details for ${name}`, async () => {
      const res = await t.post('/api/v1/check', body, key);
      assertError(res, 400, 'INVALID_INPUT', field);
    });
  }

  test('details say what was expected and what was received', async () => {
    const res = await t.post('/api/v1/check', { messages: [user('a')], similarity_threshold: 1.5 }, key);
    const body = assertError(res, 400, 'INVALID_INPUT', 'similarity_threshold');
    assert.equal(body.error.details?.expected, 'a number <= 1');
    assert.equal(body.error.details?.received, 'number 1.5');
  });

  test('too many messages are refused in the same words by check and store', async () => {
    const messages = [user('a'), user('b'), user('c'), user('d')];
    for (const [url, body] of [
      ['/api/v1/check', { messages }],
      ['/api/v1/store', { messages, answer: 'x' }],
    ] as const) {
      const res = assertError(await t.post(url, body, key), 400, 'INVALID_INPUT', 'messages');
      assert.equal(res.error.message, 'messages must have at most 3 items', url);
    }
  });

  test('a repeated cache type is a 400 whose message reads as a sentence', async () => {
    const res = await t.post('/api/v1/check', { messages: [user('a')], cache_types: ['exact', 'exact'] }, key);
    const body = assertError(res, 400, 'INVALID_INPUT', 'cache_types');
    assert.equal(body.error.message, 'cache_types must be an array without repeated items');
    assert.equal(body.error.details?.expected, 'an array without repeated items');
  });

  test('a body that is not JSON is a 400', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/check',
      payload: '{"messages": [',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    });
    assertError(res, 400, 'INVALID_INPUT', 'body');
  });

  test('a body with a __proto__ or constructor.prototype key is a 400 that says so', async () => {
    for (const payload of [
      '{"messages":[{"role":"user","content":"a"}],"__proto__":{"x":1}}',
      '{"messages":[],"constructor":{"prototype":{}}}',
    ]) {
      const res = await t.app.inject({
        method: 'POST',
        url: '/api/v1/check',
        payload,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      });
      const body = assertError(res, 400, 'INVALID_INPUT', 'body');
      assert.match(body.error.message, /__proto__/);
    }
  });

  test('half a surrogate pair is a 400; a whole one (an emoji) is stored and given back as sent', async () => {
    // JSON.stringify writes a lone surrogate as the escape `\ud83d`, as a client's JSON would.
    const lone = await t.post('/api/v1/store', { messages: [user('smile')], answer: 'smile \ud83d' }, key);
    assertError(lone, 400, 'INVALID_INPUT', 'answer');
    const check = await t.post('/api/v1/check', { messages: [user('\udc00 smile')] }, key);
    assertError(check, 400, 'INVALID_INPUT', 'messages[0].content');
    const messages = [user('smile 😀')];
    assert.equal((await t.post('/api/v1/store', { messages, answer: 'smile 😀' }, key)).statusCode, 200);
    assert.equal((await t.post('/api/v1/check', { messages }, key)).json().answer, 'smile 😀');
  });

  test('text with a NUL character is a 400 on check, store and the entry search', async () => {
    const check = await t.post('/api/v1/check', { messages: [user('a\u0000b')] }, key);
    const body = assertError(check, 400, 'INVALID_INPUT', 'messages[0].content');
    assert.equal(body.error.details?.expected, 'text without NUL (U+0000) characters or unpaired surrogates');
    const store = await t.post('/api/v1/store', { messages: [user('a')], answer: 'x\u0000y' }, key);
    assertError(store, 400, 'INVALID_INPUT', 'answer');
    const search = await t.app.inject({ method: 'GET', url: '/api/v1/entries?q=%00', headers: { authorization: `Bearer ${key}` } });
    assertError(search, 400, 'INVALID_INPUT', 'q');
  });

  test('a JSON body that is not an object is a 400', async () => {
    const res = await t.post('/api/v1/check', [user('a')], key);
    assertError(res, 400, 'INVALID_INPUT', 'body');
  });

  test('a body over the size limit is a 413', async () => {
    const res = await t.post('/api/v1/check', { messages: [user('x'.repeat(4000))] }, key);
    assertError(res, 413, 'PAYLOAD_TOO_LARGE', 'body');
  });

  test('a body that is not JSON by Content-Type is a 415', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/check',
      payload: 'messages=hello',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/x-www-form-urlencoded' },
    });
    assertError(res, 415, 'UNSUPPORTED_MEDIA_TYPE', 'Content-Type');
    const plain = await t.app.inject({
      method: 'POST',
      url: '/api/v1/check',
      payload: 'hello',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'text/plain' },
    });
    assertError(plain, 415, 'UNSUPPORTED_MEDIA_TYPE');
  });

  test('errors carry the rate-limit headers', async () => {
    const res = await t.post('/api/v1/check', {}, key);
    assert.ok(res.headers['x-ratelimit-limit']);
    assert.ok(res.headers['x-ratelimit-remaining']);
    assert.ok(res.headers['x-ratelimit-reset']);
  });
});
