import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { once } from 'node:events';
import { connect } from 'node:net';
import { startTestApp, user, type TestApp } from './helpers.ts';

interface RawResponse {
  status: number;
  headers: Map<string, string>;
  body: { error: { code: string; message: string; details?: { field: string } }; status: number; timestamp: string };
}

/** Writes `raw` on a new connection to `port` and reads one response, up to the server's close. */
async function rawExchange(port: number, raw: string, encoding: BufferEncoding = 'utf8'): Promise<RawResponse> {
  const socket = connect(port, '127.0.0.1');
  let received = '';
  socket.setEncoding('utf8').on('data', (d: string) => (received += d));
  socket.on('error', () => undefined);
  // A server that never answers fails the test instead of holding it.
  socket.setTimeout(10_000, () => socket.destroy());
  const closed = once(socket, 'close');
  socket.write(raw, encoding);
  await closed;
  const [head = '', body = ''] = received.split('\r\n\r\n');
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers = new Map(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  return { status: Number(statusLine.split(' ')[1]), headers, body: JSON.parse(body) };
}

function assertSpecError(res: RawResponse, status: number, code: string): void {
  assert.equal(res.status, status);
  assert.equal(res.body.status, status);
  assert.equal(res.body.error.code, code);
  assert.ok(res.body.error.message.length > 0);
  assert.ok(!Number.isNaN(Date.parse(res.body.timestamp)));
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
  assert.match(res.headers.get('x-ratelimit-limit') ?? '', /^\d+$/);
  assert.match(res.headers.get('x-ratelimit-remaining') ?? '', /^\d+$/);
  assert.match(res.headers.get('x-ratelimit-reset') ?? '', /^\d+$/);
  // A request id on every answer, as the OpenAPI document declares for each status, also on those
  // the HTTP parser refused before any route: the id a client quotes when it reports a failure.
  assert.match(res.headers.get('x-request-id') ?? '', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  assert.ok(!Number.isNaN(Date.parse(res.headers.get('date') ?? '')), 'a Date header');
}

describe('requests the HTTP parser refuses are answered in the error shape', () => {
  let t: TestApp;
  let port: number;
  let key: string;
  before(async () => {
    t = await startTestApp({ env: { REPRISE_REQUEST_TIMEOUT_MS: '1000' } });
    key = await t.key();
    port = Number(new URL(await t.app.listen({ host: '127.0.0.1', port: 0 })).port);
  });
  after(() => t.close());

  test('a malformed request line is 400 INVALID_INPUT', async () => {
    const res = await rawExchange(port, 'HELLO THERE\r\n\r\n');
    assertSpecError(res, 400, 'INVALID_INPUT');
    assert.equal(res.body.error.details?.field, 'request');
  });

  test('Content-Length beside Transfer-Encoding is 400 INVALID_INPUT', async () => {
    const res = await rawExchange(
      port,
      'POST /api/v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    );
    assertSpecError(res, 400, 'INVALID_INPUT');
  });

  test('headers over 16 KB are 431 HEADERS_TOO_LARGE', async () => {
    const res = await rawExchange(port, `GET /api/v1/usage HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${'k'.repeat(70_000)}\r\n\r\n`);
    assertSpecError(res, 431, 'HEADERS_TOO_LARGE');
  });

  test('a body that does not arrive in time is 408 REQUEST_TIMEOUT', async () => {
    const res = await rawExchange(
      port,
      `POST /api/v1/check HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"messa`,
    );
    assertSpecError(res, 408, 'REQUEST_TIMEOUT');
  });

  test('a wrong key sent before the whole body is answered 401 once: no 408 follows for the body that does not come, and a body sent whole after it leaves the connection usable', async () => {
    const opened = () => {
      const socket = connect(port, '127.0.0.1');
      let received = '';
      socket.setEncoding('utf8').on('data', (d: string) => (received += d));
      socket.on('error', () => undefined);
      // A server that never closes fails the test instead of holding it.
      let timedOut = false;
      socket.setTimeout(10_000, () => {
        timedOut = true;
        socket.destroy();
      });
      return { socket, received: () => received, timedOut: () => timedOut };
    };
    const head = `POST /api/v1/check HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer rp_live_wrong\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n`;
    // Each answer's status line, also one written straight after the body of another.
    const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));

    // The rest of the body never comes: the 401, then the connection closed once the request's
    // time is up (1 s here), without a second answer.
    const stalled = opened();
    stalled.socket.write(`${head}{"messa`);
    await once(stalled.socket, 'close');
    assert.equal(stalled.timedOut(), false, 'the server closed the connection');
    assert.deepEqual(statuses(stalled.received()), [401], stalled.received());
    assert.equal(JSON.parse(stalled.received().split('\r\n\r\n')[1] as string).error.code, 'INVALID_API_KEY');

    // The rest comes after the 401: the connection takes the next request.
    const finished = opened();
    finished.socket.write(`${head}{"messa`);
    await new Promise<void>((resolve) => {
      const look = () => (finished.received().includes('INVALID_API_KEY') ? resolve() : finished.socket.once('data', look));
      look();
    });
    finished.socket.write(
      `${'x'.repeat(93)}GET /api/v1/usage HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`,
    );
    await once(finished.socket, 'close');
    assert.deepEqual(statuses(finished.received()), [401, 200], finished.received());
  });

  test('a chunked body that is not UTF-8 is 400 INVALID_INPUT, and nothing is stored', async () => {
    const body = Buffer.concat([
      Buffer.from('{"messages":[{"role":"user","content":"chunked caf'),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('"}],"answer":"x"}'),
    ]);
    const head = `POST /api/v1/store HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`;
    const res = await rawExchange(port, `${head}${body.length.toString(16)}\r\n${body.toString('latin1')}\r\n0\r\n\r\n`, 'latin1');
    assertSpecError(res, 400, 'INVALID_INPUT');
    assert.equal(res.body.error.details?.field, 'body');
    assert.equal((await t.get('/api/v1/entries?q=chunked', key)).json().pagination.total, 0);
  });

  test('an Expect other than 100-continue is 417 EXPECTATION_FAILED in the error shape, after the key check', async () => {
    const body = JSON.stringify({ messages: [user('expecting')] });
    const send = (expect: string, secret: string) =>
      rawExchange(
        port,
        `POST /api/v1/check HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${secret}\r\nContent-Type: application/json\r\nExpect: ${expect}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      );
    const res = await send('fancy-feature', key);
    assertSpecError(res, 417, 'EXPECTATION_FAILED');
    assert.equal(res.body.error.details?.field, 'Expect');
    assert.match(res.headers.get('x-request-id') ?? '', /^[\w-]+$/);
    assertSpecError(await send('fancy-feature', 'rp_live_wrong'), 401, 'INVALID_API_KEY');
  });

  test('Expect: 100-continue: a wrong or missing key, or a Content-Length over the limit, gets its final status at once, without 100 Continue; a good one gets 100 Continue and its answer', async () => {
    const body = JSON.stringify({ messages: [user('expecting to continue')], answer: 'continued' });
    /** Sends the head alone, as a client that waits for 100 Continue does; what comes first, up to the first blank line. */
    const head = async (auth: string, length: number) => {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => undefined);
      socket.setTimeout(10_000, () => socket.destroy());
      let received = '';
      socket.setEncoding('utf8');
      const first = new Promise<string>((resolve) => {
        socket.on('data', (d: string) => {
          received += d;
          if (received.includes('\r\n\r\n')) resolve(received);
        });
        socket.on('close', () => resolve(received));
      });
      socket.write(
        `POST /api/v1/store HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: ${length}\r\n\r\n`,
      );
      return { socket, first: await first, rest: () => once(socket, 'close').then(() => received) };
    };
    for (const auth of ['Authorization: Bearer rp_live_wrong\r\n', '']) {
      const { socket, first, rest } = await head(auth, body.length);
      assert.match(first, /^HTTP\/1\.1 401 /, first);
      assert.match(first, /\r\nconnection: close\r\n/i);
      const all = socket.closed ? first : await rest();
      assert.equal(JSON.parse(all.split('\r\n\r\n')[1] as string).error.code, 'INVALID_API_KEY');
    }
    const tooLarge = await head(`Authorization: Bearer ${key}\r\n`, t.config.limits.bodyBytes + 1);
    assert.match(tooLarge.first, /^HTTP\/1\.1 413 /, tooLarge.first);
    const all = tooLarge.socket.closed ? tooLarge.first : await tooLarge.rest();
    assert.equal(JSON.parse(all.split('\r\n\r\n')[1] as string).error.code, 'PAYLOAD_TOO_LARGE');

    const good = await head(`Authorization: Bearer ${key}\r\nConnection: close\r\n`, body.length);
    assert.match(good.first, /^HTTP\/1\.1 100 Continue\r\n\r\n$/, good.first);
    good.socket.write(body);
    const answer = await good.rest();
    const final = answer.slice(good.first.length);
    assert.match(final, /^HTTP\/1\.1 200 /, final);
    assert.equal(JSON.parse(final.split('\r\n\r\n')[1] as string).stored, true);
    assert.equal((await t.post('/api/v1/check', { messages: [user('expecting to continue')] }, key)).json().cache_hit, true);
  });

  test('two Authorization headers with different keys are 401 INVALID_API_KEY, whichever comes first; the same one twice is taken', async () => {
    const other = await t.key();
    const usage = (...values: string[]) =>
      rawExchange(
        port,
        `GET /api/v1/usage HTTP/1.1\r\nHost: x\r\n${values.map((v) => `Authorization: ${v}\r\n`).join('')}Connection: close\r\n\r\n`,
      );
    for (const values of [
      [`Bearer ${key}`, `Bearer ${other}`],
      [`Bearer ${other}`, `Bearer ${key}`],
      [`Bearer ${key}`, 'Bearer rp_live_wrong'],
      [`Bearer ${key}`, ''],
      ['Bearer rp_live_wrong', `Bearer ${key}`],
    ]) {
      const res = await usage(...values);
      assertSpecError(res, 401, 'INVALID_API_KEY');
      assert.match(res.body.error.message, /more than one Authorization header/i);
    }
    const same = await usage(`Bearer ${key}`, `Bearer  ${key} `);
    assert.equal(same.status, 200);
  });

  test('a request target in absolute form that is no URL is 400 INVALID_INPUT saying so, not blamed on percent-encoding', async () => {
    for (const target of ['http://x:99999/api/v1/usage', 'http://x/healthz#fragment']) {
      const res = await rawExchange(port, `GET ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`);
      assertSpecError(res, 400, 'INVALID_INPUT');
      assert.equal(res.body.error.details?.field, 'url', target);
      assert.doesNotMatch(res.body.error.message, /percent-encoding/, target);
      assert.match(res.body.error.message, /absolute URL/, target);
    }
    const path = await rawExchange(port, `GET /api/v1/% HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`);
    assertSpecError(path, 400, 'INVALID_INPUT');
    assert.match(path.body.error.message, /percent-encoding/);
  });

  test('a QUERY without Content-Type (no route takes QUERY) is 405 with Allow on a known path, 404 elsewhere', async () => {
    const query = (path: string) =>
      rawExchange(port, `QUERY ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`);
    const known = await query('/api/v1/check');
    assertSpecError(known, 405, 'METHOD_NOT_ALLOWED');
    assert.equal(known.headers.get('allow'), 'POST');
    const entry = await query('/api/v1/entries/12345');
    assertSpecError(entry, 405, 'METHOD_NOT_ALLOWED');
    assert.equal(entry.headers.get('allow'), 'GET, HEAD, DELETE');
    assertSpecError(await query('/api/v1/nope'), 404, 'NOT_FOUND');
    assertSpecError(await query('/healthz'), 405, 'METHOD_NOT_ALLOWED');
  });

  test('a CONNECT (Reprise is no proxy) is 405 METHOD_NOT_ALLOWED, not a connection closed unanswered', async () => {
    for (const target of ['example.com:443', '/api/v1/check']) {
      const res = await rawExchange(port, `CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
      assertSpecError(res, 405, 'METHOD_NOT_ALLOWED');
    }
  });
});

describe('bodies: what is read, what is refused', () => {
  let t: TestApp;
  let key: string;
  before(async () => {
    t = await startTestApp();
    key = await t.key();
  });
  after(() => t.close());

  const auth = () => ({ authorization: `Bearer ${key}` });

  test('a DELETE that names the JSON type and sends no body deletes the entry', async () => {
    const stored = await t.post('/api/v1/store', { messages: [user('delete me with a header')], answer: 'a' }, key);
    assert.equal(stored.statusCode, 200);
    const id = stored.json().entry_id as number;
    const res = await t.app.inject({
      method: 'DELETE',
      url: `/api/v1/entries/${id}`,
      headers: { ...auth(), 'content-type': 'application/json' },
    });
    assert.equal(res.statusCode, 200);
    assert.equal(res.json().deleted, true);
    assert.equal((await t.get(`/api/v1/entries/${id}`, key)).statusCode, 404);
  });

  test('a path that does not exist is 404, and a wrong method 405, whatever the body', async () => {
    for (const [payload, type] of [
      ['{', 'application/json'],
      ['', 'application/json'],
      ['hello', 'text/plain'],
    ] as const) {
      const missing = await t.app.inject({ method: 'POST', url: '/api/v1/nope', payload, headers: { ...auth(), 'content-type': type } });
      assert.equal(missing.statusCode, 404, `${type} ${payload}`);
      assert.equal(missing.json().error.code, 'NOT_FOUND');
      const wrong = await t.app.inject({ method: 'PUT', url: '/api/v1/store', payload, headers: { ...auth(), 'content-type': type } });
      assert.equal(wrong.statusCode, 405, `${type} ${payload}`);
      assert.equal(wrong.json().error.code, 'METHOD_NOT_ALLOWED');
      assert.equal(wrong.headers.allow, 'POST');
    }
    const del = await t.app.inject({
      method: 'DELETE',
      url: '/api/v1/check',
      payload: '',
      headers: { ...auth(), 'content-type': 'application/json' },
    });
    assert.equal(del.statusCode, 405);
  });

  test('a body that is not UTF-8 is 400 INVALID_INPUT, and nothing is stored', async () => {
    const bytes = Buffer.concat([
      Buffer.from('{"messages":[{"role":"user","content":"caf'),
      Buffer.from([0xff, 0xfe]),
      Buffer.from('"}],"answer":"x"}'),
    ]);
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/store',
      payload: bytes,
      headers: { ...auth(), 'content-type': 'application/json' },
    });
    assert.equal(res.statusCode, 400);
    assert.equal(res.json().error.code, 'INVALID_INPUT');
    assert.equal(res.json().error.details.field, 'body');
    const list = await t.get('/api/v1/entries', key);
    assert.ok(!JSON.stringify(list.json()).includes('\ufffd'));
    // Nor is a sequence cut off where its replacement character takes as many bytes (F0 9F 98, the
    // first three of an emoji's four, for U+FFFD's three).
    const cut = Buffer.concat([
      Buffer.from('{"messages":[{"role":"user","content":"cut '),
      Buffer.from([0xf0, 0x9f, 0x98]),
      Buffer.from('"}],"answer":"x"}'),
    ]);
    const cutRes = await t.app.inject({
      method: 'POST',
      url: '/api/v1/store',
      payload: cut,
      headers: { ...auth(), 'content-type': 'application/json' },
    });
    assert.equal(cutRes.statusCode, 400);
    assert.equal(cutRes.json().error.details.field, 'body');
    // A replacement character sent as such is text like any other.
    const sent = await t.post('/api/v1/store', { messages: [user('caf\ufffd')], answer: 'x' }, key);
    assert.equal(sent.statusCode, 200);
    const read = await t.get(`/api/v1/entries/${sent.json().entry_id}`, key);
    assert.equal(read.json().question, 'caf\ufffd');
  });

  test('a compressed body is 415 UNSUPPORTED_MEDIA_TYPE naming Content-Encoding', async () => {
    const res = await t.post('/api/v1/check', { messages: [user('hello')] }, key, { 'content-encoding': 'gzip' });
    assert.equal(res.statusCode, 415);
    assert.equal(res.json().error.code, 'UNSUPPORTED_MEDIA_TYPE');
    assert.equal(res.json().error.details.field, 'Content-Encoding');
    const identity = await t.post('/api/v1/check', { messages: [user('hello')] }, key, { 'content-encoding': 'identity' });
    assert.equal(identity.statusCode, 200);
  });

  test('an expired entry is 404 to DELETE as to GET', async () => {
    const stored = await t.post('/api/v1/store', { messages: [user('short-lived')], answer: 'a', ttl_seconds: 1 }, key);
    const id = stored.json().entry_id as number;
    // Wait for the clock, not for the server: poll until the entry is gone.
    const deadline = Date.now() + 5000;
    while ((await t.get(`/api/v1/entries/${id}`, key)).statusCode === 200) {
      assert.ok(Date.now() < deadline, 'the entry did not expire');
      await new Promise((r) => setTimeout(r, 20));
    }
    const del = await t.app.inject({ method: 'DELETE', url: `/api/v1/entries/${id}`, headers: auth() });
    assert.equal(del.statusCode, 404);
    assert.equal(del.json().error.code, 'NOT_FOUND');
  });

  test('a hit shows in the entry at once: its count, last hit and mean lookup time', async () => {
    const messages = [user('what is shown right after a hit')];
    const stored = await t.post('/api/v1/store', { messages, answer: 'a' }, key);
    const id = stored.json().entry_id as number;
    const hit = await t.post('/api/v1/check', { messages }, key);
    assert.equal(hit.json().cache_hit, true);
    const entry = (await t.get(`/api/v1/entries/${id}`, key)).json();
    assert.equal(entry.usage_count, 1);
    assert.ok(!Number.isNaN(Date.parse(entry.last_hit_at as string)), `last_hit_at ${entry.last_hit_at}`);
    assert.equal(typeof entry.average_lookup_ms, 'number');
  });
});
