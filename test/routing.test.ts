import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { once } from 'node:events';
import { request } from 'node:http';
import { connect } from 'node:net';
import pino from 'pino';
import { buildApp } from '../src/app.ts';
import { createKey } from '../src/keys/keys.ts';
import { createRuntime } from '../src/runtime.ts';
import { startTestApp, testConfig, type TestApp } from './helpers.ts';

describe('routing, health and documents', () => {
  let t: TestApp;
  let key: string;
  before(async () => {
    t = await startTestApp();
    key = await t.key();
  });
  after(() => t.close());

  test('an unknown path is 404 NOT_FOUND in the error shape, with rate-limit headers', async () => {
    for (const url of ['/api/v1/nothing', '/nothing']) {
      const res = await t.get(url, key);
      assert.equal(res.statusCode, 404);
      const body = res.json();
      assert.equal(body.error.code, 'NOT_FOUND');
      assert.equal(body.status, 404);
      assert.ok(body.timestamp);
      assert.ok(res.headers['x-ratelimit-limit']);
      assert.ok(res.headers['x-ratelimit-reset']);
    }
  });

  test('a path that is not valid percent-encoding is 400 INVALID_INPUT in the error shape, with the headers', async () => {
    for (const url of ['/api/v1/%', '/api/v1/check%E0%A4%A', '/%zz']) {
      const res = await t.app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${key}` }, payload: '{}' });
      assert.equal(res.statusCode, 400, url);
      const body = res.json();
      assert.equal(body.error.code, 'INVALID_INPUT');
      assert.equal(body.error.details.field, 'url');
      assert.equal(body.error.details.received, `string "${url}"`);
      assert.equal(body.status, 400);
      assert.ok(body.timestamp);
      assert.ok(res.headers['x-request-id']);
      assert.ok(res.headers['x-ratelimit-limit']);
      assert.ok(res.headers['x-ratelimit-reset']);
    }
  });

  test('a query value that is not valid percent-encoding of UTF-8 is 400 INVALID_INPUT naming it, after the key check', async () => {
    for (const [query, field] of [
      ['q=caf%E9', 'q'],
      ['page=1&namespace=%FF', 'namespace'],
      ['q=%', 'q'],
      ['%E9=1', 'query'],
    ] as const) {
      const res = await t.get(`/api/v1/entries?${query}`, key);
      assert.equal(res.statusCode, 400, `${query}: ${res.body}`);
      assert.equal(res.json().error.code, 'INVALID_INPUT');
      assert.equal(res.json().error.details.field, field, query);
      assert.ok(res.headers['x-ratelimit-limit']);
    }
    assert.equal((await t.get('/api/v1/entries?q=caf%E9')).statusCode, 401);
    // Escaped as it should be, a % or an é is searched for like any text.
    for (const query of ['q=100%25', 'q=caf%C3%A9', 'q=a+b'])
      assert.equal((await t.get(`/api/v1/entries?${query}`, key)).statusCode, 200, query);
  });

  test('a path parameter over 100 characters is read by its route as a shorter one is, after the key check', async () => {
    const id = '7'.repeat(500);
    for (const method of ['GET', 'DELETE'] as const) {
      const res = await t.app.inject({ method, url: `/api/v1/entries/${id}`, headers: { authorization: `Bearer ${key}` } });
      assert.equal(res.statusCode, 400, `${method}: ${res.body}`);
      assert.equal(res.json().error.code, 'INVALID_INPUT');
      assert.equal(res.json().error.details.field, 'id');
      assert.ok(res.headers['x-ratelimit-limit']);
      const without = await t.app.inject({ method, url: `/api/v1/entries/${id}` });
      assert.equal(without.statusCode, 401);
      assert.equal(without.json().error.code, 'INVALID_API_KEY');
    }
    const revoke = await t.app.inject({ method: 'POST', url: `/dashboard/api/keys/key_${'k'.repeat(500)}/revoke` });
    assert.equal(revoke.statusCode, 401);
    assert.equal(revoke.json().error.code, 'UNAUTHORIZED');
  });

  test('a path spelling /api/v1 with percent-escapes is the same endpoint, with the same key check', async () => {
    const url = '/api/%761/health';
    const withKey = await t.get(url, key);
    assert.equal(withKey.statusCode, 200, withKey.body);
    assert.ok(withKey.headers['x-ratelimit-limit']);
    const without = await t.get(url);
    assert.equal(without.statusCode, 401);
    assert.equal(without.json().error.code, 'INVALID_API_KEY');
  });

  test('a request in absolute form (GET http://host/api/v1/…) gets the same key check', async () => {
    const server = await startTestApp();
    try {
      const secret = await server.key();
      const address = await server.app.listen({ host: '127.0.0.1', port: 0 });
      const { port } = new URL(address);
      const get = (headers: Record<string, string>) =>
        new Promise<{ status: number; body: string; limit: string | undefined }>((resolve, reject) => {
          // An absolute path is sent as given, as a client speaking to a proxy sends it.
          const req = request({ host: '127.0.0.1', port, path: `${address}/api/v1/usage`, headers }, (res) => {
            let body = '';
            res.setEncoding('utf8').on('data', (d: string) => (body += d));
            res.on('end', () =>
              resolve({ status: res.statusCode ?? 0, body, limit: res.headers['x-ratelimit-limit'] as string | undefined }),
            );
          });
          req.on('error', reject).end();
        });
      const withKey = await get({ authorization: `Bearer ${secret}` });
      assert.equal(withKey.status, 200, withKey.body);
      assert.equal(JSON.parse(withKey.body).total_requests, 0);
      const without = await get({});
      assert.equal(without.status, 401, without.body);
      assert.equal(JSON.parse(without.body).error.code, 'INVALID_API_KEY');
    } finally {
      await server.close();
    }
  });

  test('a request that reaches a closing server is 503 SERVICE_UNAVAILABLE in the error shape', async () => {
    const server = await startTestApp();
    try {
      const secret = await server.key();
      let arrived = (): void => undefined;
      const firstArrived = new Promise<void>((resolve) => (arrived = resolve));
      server.app.addHook('onRequest', (_request, _reply, done) => {
        arrived();
        done();
      });
      const { port } = new URL(await server.app.listen({ host: '127.0.0.1', port: 0 }));
      const socket = connect(Number(port), '127.0.0.1');
      let received = '';
      socket.setEncoding('utf8').on('data', (d: string) => (received += d));
      const ended = once(socket, 'close');
      const body = JSON.stringify({ messages: [{ role: 'user', content: 'held open across the close' }] });
      const head = `POST /api/v1/check HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${secret}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
      // The first request is in flight (its body held back) when the server starts closing; the
      // second is pipelined behind it and so reaches the server while it closes.
      socket.write(head + body.slice(0, 5));
      await firstArrived;
      const closed = server.app.close();
      socket.write(body.slice(5) + head + body);
      await ended;
      await closed;
      const [first, second] = received.split(/(?=HTTP\/1\.1 )/);
      assert.match(first ?? '', /^HTTP\/1\.1 200/);
      assert.match(second ?? '', /^HTTP\/1\.1 503/);
      assert.match(second ?? '', /x-request-id: /i);
      // The spec's rate-limit headers are on every response, this one too.
      for (const name of ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) {
        assert.match(second ?? '', new RegExp(`\\r\\n${name}: \\d+\\r\\n`, 'i'), name);
      }
      const error = JSON.parse((second ?? '').split('\r\n\r\n')[1] ?? '{}').error;
      assert.equal(error.code, 'SERVICE_UNAVAILABLE');
      assert.equal(typeof error.message, 'string');
    } finally {
      await server.close();
    }
  });

  test('a wrong method is 405 METHOD_NOT_ALLOWED with Allow', async () => {
    const res = await t.get('/api/v1/check', key);
    assert.equal(res.statusCode, 405);
    assert.equal(res.json().error.code, 'METHOD_NOT_ALLOWED');
    assert.equal(res.headers.allow, 'POST');
    const del = await t.app.inject({ method: 'DELETE', url: '/api/v1/usage', headers: { authorization: `Bearer ${key}` } });
    assert.equal(del.statusCode, 405);
    assert.match(String(del.headers.allow), /GET/);
    // A path of a route with a parameter too.
    const put = await t.app.inject({ method: 'PUT', url: '/api/v1/entries/123', headers: { authorization: `Bearer ${key}` } });
    assert.equal(put.statusCode, 405);
    assert.equal(put.json().error.code, 'METHOD_NOT_ALLOWED');
    assert.deepEqual(String(put.headers.allow).split(', ').sort(), ['DELETE', 'GET', 'HEAD']);
    assert.equal(
      (await t.app.inject({ method: 'PUT', url: '/api/v1/entries/123/more', headers: { authorization: `Bearer ${key}` } })).statusCode,
      404,
    );
  });

  test('GET /api/v1/health answers in the envelope for a valid key', async () => {
    const res = await t.get('/api/v1/health', key);
    assert.equal(res.statusCode, 200);
    const body = res.json();
    assert.equal(body.status, 'success');
    assert.equal(body.data.healthy, true);
    assert.equal(typeof body.message, 'string');
    assert.ok(!Number.isNaN(Date.parse(body.timestamp)));
    assert.equal(body.data.checks.store, 'ok');
  });

  test('GET /healthz needs no key', async () => {
    const res = await t.get('/healthz');
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().status, 'ok');
    assert.ok(res.headers['x-ratelimit-limit']);
  });

  test('every response carries a request id', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'abc-123' } });
    assert.equal(res.headers['x-request-id'], 'abc-123');
    const generated = await t.get('/api/v1/usage', key);
    assert.match(String(generated.headers['x-request-id']), /^[0-9a-f-]{36}$/);
  });

  test('/openapi.json documents the endpoints from the route schemas', async () => {
    const res = await t.get('/openapi.json');
    assert.equal(res.statusCode, 200);
    const doc = res.json();
    assert.equal(doc.openapi, '3.0.3');
    for (const p of ['/api/v1/check', '/api/v1/store', '/api/v1/usage', '/api/v1/health']) assert.ok(doc.paths[p], p);
    const check = doc.paths['/api/v1/check'].post;
    const schema = check.requestBody.content['application/json'].schema;
    assert.deepEqual(schema.required, ['messages']);
    assert.equal(schema.properties.similarity_threshold.maximum, 1);
    // The extensions' answers are documented too.
    const ok = (path: string, method: string) => doc.paths[path][method].responses['200'].content['application/json'].schema;
    assert.ok(ok('/api/v1/entries', 'get').properties.pagination);
    assert.ok(ok('/api/v1/entries/{id}', 'get').properties.prompt_hash);
    assert.ok(ok('/api/v1/entries/{id}', 'delete').properties.deleted);
    assert.ok(ok('/api/v1/health', 'get').properties.data);
    assert.ok(ok('/api/v1/usage', 'get').properties.series);
  });

  test('an internal failure is a 500 INTERNAL_ERROR without internals', async () => {
    const broken = await startTestApp();
    const secret = await broken.key();
    await broken.runtime.ctx.store.close();
    const res = await broken.post('/api/v1/store', { messages: [{ role: 'user', content: 'x' }], answer: 'y' }, secret).catch(() => null);
    // The key lookup itself fails once the database is closed.
    assert.ok(res);
    assert.equal(res.statusCode, 500);
    const body = res.json();
    assert.equal(body.error.code, 'INTERNAL_ERROR');
    assert.equal(body.status, 500);
    assert.doesNotMatch(JSON.stringify(body), /sqlite|database|at .*\.ts/i);
    await broken.app.close();
  });
});

describe('metrics', () => {
  test('GET /metrics exposes request and check counters', async () => {
    const t = await startTestApp();
    try {
      const key = await t.key();
      await t.post('/api/v1/check', { messages: [{ role: 'user', content: 'm' }] }, key);
      const res = await t.get('/metrics');
      assert.equal(res.statusCode, 200);
      assert.match(res.body, /reprise_checks_total\{outcome="miss"\} 1/);
      assert.match(res.body, /reprise_http_request_duration_seconds_count\{method="POST",route="\/api\/v1\/check",status="200"\} 1/);
    } finally {
      await t.close();
    }
  });

  test('GET /metrics counts each request once, under its route, its method and its status', async () => {
    const t = await startTestApp();
    try {
      const key = await t.key();
      const messages = [{ role: 'user', content: 'counted' }];
      await t.post('/api/v1/check', { messages }, key);
      await t.post('/api/v1/store', { messages, answer: 'a', model: 'gpt-4o', tokens_used: 3 }, key);
      await t.post('/api/v1/check', { messages }, key);
      await t.post('/api/v1/check', { messages }, key);
      await t.post('/api/v1/check', { messages }, 'rp_live_' + 'x'.repeat(40));
      await t.post('/api/v1/check', { messages: [] }, key);
      await t.get('/api/v1/health', key);
      await t.app.inject({ method: 'HEAD', url: '/api/v1/health', headers: { authorization: `Bearer ${key}` } });
      await t.get('/api/v1/nothing', key);
      await t.app.inject({ method: 'DELETE', url: '/api/v1/check', headers: { authorization: `Bearer ${key}` } });
      await t.app.inject({ method: 'GET', url: '/api/v1/%zz' });
      const body = (await t.get('/metrics')).body;
      const counts = body
        .split('\n')
        .filter((l) => l.startsWith('reprise_http_request_duration_seconds_count') || l.startsWith('reprise_checks_total{'))
        .sort();
      assert.deepEqual(counts, [
        'reprise_checks_total{outcome="exact_hit"} 2',
        'reprise_checks_total{outcome="miss"} 1',
        'reprise_http_request_duration_seconds_count{method="DELETE",route="unknown",status="405"} 1',
        'reprise_http_request_duration_seconds_count{method="GET",route="/api/v1/health",status="200"} 1',
        'reprise_http_request_duration_seconds_count{method="GET",route="unknown",status="404"} 1',
        'reprise_http_request_duration_seconds_count{method="HEAD",route="/api/v1/health",status="200"} 1',
        'reprise_http_request_duration_seconds_count{method="POST",route="/api/v1/check",status="200"} 3',
        'reprise_http_request_duration_seconds_count{method="POST",route="/api/v1/check",status="400"} 1',
        'reprise_http_request_duration_seconds_count{method="POST",route="/api/v1/check",status="401"} 1',
        'reprise_http_request_duration_seconds_count{method="POST",route="/api/v1/store",status="200"} 1',
      ]);
    } finally {
      await t.close();
    }
  });

  test('with REPRISE_METRICS_TOKEN, GET /metrics needs that token, not an API key', async () => {
    const token = 'scrape-token-0123456789';
    const t = await startTestApp({ env: { REPRISE_METRICS_TOKEN: token } });
    try {
      for (const authorization of [undefined, `Bearer ${await t.key()}`, `Bearer ${token}x`]) {
        const refused = await t.app.inject({ method: 'GET', url: '/metrics', headers: authorization ? { authorization } : {} });
        assert.equal(refused.statusCode, 401);
        assert.equal(refused.json().error.code, 'INVALID_API_KEY');
        assert.doesNotMatch(refused.body, /reprise_/);
      }
      // The scheme is read as for API keys: in any case, with spaces or a tab after it.
      for (const authorization of [`Bearer ${token}`, `bearer ${token}`, `BEARER  ${token}`, `Bearer\t${token}`]) {
        const res = await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization } });
        assert.equal(res.statusCode, 200, authorization);
        assert.match(res.body, /reprise_checks_total/);
      }
    } finally {
      await t.close();
    }
  });
});

describe('request logs', () => {
  test('a request logs one line with its id, after the process fields; a failure logged while answering carries the id too', async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    const runtime = await createRuntime(testConfig(), { embedder: null });
    const app = await buildApp(runtime.ctx, { loggerInstance: logger });
    try {
      const account = await runtime.ctx.store.createAccount('logged', 'free');
      const { secret } = await createKey(runtime.ctx.store, account);
      const headers = (id: string) => ({ authorization: `Bearer ${secret}`, 'content-type': 'application/json', 'x-request-id': id });
      const payload = JSON.stringify({ messages: [{ role: 'user', content: 'logged' }] });
      const ok = await app.inject({ method: 'POST', url: '/api/v1/check', headers: headers('logged-1'), payload });
      assert.equal(ok.statusCode, 200);
      await runtime.ctx.store.close();
      const failed = await app.inject({ method: 'POST', url: '/api/v1/check', headers: headers('logged-2'), payload });
      assert.equal(failed.statusCode, 500);
      const completed = lines.filter((l) => l.msg === 'request completed');
      assert.deepEqual(
        completed.map((l) => Object.keys(l)),
        [1, 2].map(() => ['level', 'time', 'pid', 'hostname', 'reqId', 'method', 'url', 'status', 'ms', 'msg']),
      );
      assert.deepEqual(
        completed.map((l) => [l.level, l.reqId, l.method, l.url, l.status]),
        [
          [30, 'logged-1', 'POST', '/api/v1/check', 200],
          [30, 'logged-2', 'POST', '/api/v1/check', 500],
        ],
      );
      const failure = lines.find((l) => l.msg === 'request failed');
      assert.equal(failure?.reqId, 'logged-2');
      assert.equal(failure?.request_id, 'logged-2');
      assert.equal(failure?.level, 50);
    } finally {
      await app.close();
      await runtime.close().catch(() => undefined);
    }
  });
});
