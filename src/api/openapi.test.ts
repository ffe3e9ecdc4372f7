import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../../test/helpers.ts';

interface Response {
  description: string;
  headers?: Record<string, { schema: { type: string } }>;
  content?: { 'application/json': { schema: { $ref?: string } } };
}
interface Operation {
  security?: unknown[];
  parameters?: { name: string; in: string; schema: { type: string; pattern?: string } }[];
  responses: Record<string, Response>;
}

const RATE_HEADERS = ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'];
const HEADERS = ['X-Request-Id', ...RATE_HEADERS];

describe('/openapi.json: statuses, error bodies and headers', () => {
  let t: TestApp;
  let key: string;
  let doc: { paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, { required: string[] }> } };
  before(async () => {
    t = await startTestApp();
    key = await t.key();
    doc = (await t.get('/openapi.json')).json();
  });
  after(() => t.close());

  const operations: [string, string, string[]][] = [
    ['/api/v1/check', 'post', ['200', '400', '401', '405', '408', '413', '415', '417', '429', '431', '500', '503']],
    ['/api/v1/store', 'post', ['200', '400', '401', '403', '405', '408', '413', '415', '417', '429', '431', '500', '503']],
    ['/api/v1/usage', 'get', ['200', '400', '401', '405', '408', '417', '429', '431', '500', '503']],
    ['/api/v1/health', 'get', ['200', '400', '401', '405', '408', '417', '429', '431', '500', '503']],
    ['/healthz', 'get', ['200', '400', '405', '408', '417', '429', '431', '500', '503']],
    ['/api/v1/entries/{id}', 'delete', ['200', '400', '401', '404', '405', '408', '413', '415', '417', '429', '431', '500', '503']],
  ];

  for (const [path, method, statuses] of operations) {
    test(`${method.toUpperCase()} ${path} documents ${statuses.join(', ')} with the error body and the headers`, () => {
      const op = doc.paths[path]?.[method];
      assert.ok(op, `${path} is documented`);
      assert.deepEqual(Object.keys(op.responses).sort(), statuses);
      for (const status of statuses) {
        const response = op.responses[status] as Response;
        const headers = Object.keys(response.headers ?? {});
        for (const h of HEADERS) assert.ok(headers.includes(h), `${path} ${status} declares ${h}`);
        assert.equal(headers.includes('Retry-After'), status === '429', `${path} ${status}: Retry-After only on 429`);
        assert.equal(response.headers?.['X-RateLimit-Reset']?.schema.type, 'integer');
        const schema = response.content?.['application/json'].schema;
        if (status === '200') assert.notEqual(schema?.$ref, '#/components/schemas/Error');
        else assert.equal(schema?.$ref, '#/components/schemas/Error', `${path} ${status} answers the error body`);
      }
    });
  }

  test('a DELETE with a body that is not JSON is refused as the document says', async () => {
    const res = await t.app.inject({
      method: 'DELETE',
      url: '/api/v1/entries/12345',
      payload: 'x',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'text/plain' },
    });
    assert.equal(res.statusCode, 415);
    assert.equal(res.json().error.code, 'UNSUPPORTED_MEDIA_TYPE');
    assert.ok(doc.paths['/api/v1/entries/{id}']?.delete?.responses['415']);
  });

  test('every documented path, asked with a method it does not take, is 405 as each of its operations documents, Allow naming its methods', async () => {
    for (const [path, item] of Object.entries(doc.paths)) {
      const documented = Object.keys(item).map((m) => m.toUpperCase());
      const allowed = documented.includes('GET') ? [...documented, 'HEAD'] : documented;
      for (const [method, op] of Object.entries(item)) {
        const response = op.responses['405'];
        assert.equal(response?.content?.['application/json'].schema.$ref, '#/components/schemas/Error', `${method} ${path}`);
        assert.equal(response?.headers?.Allow?.schema.type, 'string', `${method} ${path} 405 declares Allow`);
      }
      const method = (['PUT', 'PATCH', 'POST', 'DELETE'] as const).find((m) => !allowed.includes(m));
      assert.ok(method, path);
      const res = await t.app.inject({ method, url: path.replace('{id}', '12345'), headers: { authorization: `Bearer ${key}` } });
      assert.equal(res.statusCode, 405, `${method} ${path}`);
      assert.equal(res.json().error.code, 'METHOD_NOT_ALLOWED');
      assert.equal(res.json().status, 405);
      assert.deepEqual(String(res.headers.allow).split(', ').sort(), allowed.sort(), `${method} ${path}`);
      for (const h of HEADERS) assert.match(String(res.headers[h.toLowerCase()]), /^[\w-]+$/, `${method} ${path}: ${h}`);
    }
  });

  test('an operation without parameters answers 400 to a query that is not valid percent-encoding, as it documents', async () => {
    for (const [path, secret] of [
      ['/api/v1/health', key],
      ['/healthz', undefined],
    ] as const) {
      const res = await t.get(`${path}?probe=%`, secret);
      assert.equal(res.statusCode, 400, path);
      assert.equal(res.json().error.code, 'INVALID_INPUT');
      assert.equal(res.json().error.details.field, 'probe');
      assert.equal(doc.paths[path]?.get?.responses['400']?.content?.['application/json'].schema.$ref, '#/components/schemas/Error', path);
    }
  });

  test("the error body is the spec's", () => {
    assert.deepEqual(doc.components.schemas.Error?.required, ['error', 'status', 'timestamp']);
  });

  test('/healthz needs no key; the /api/v1 operations need the bearer key', () => {
    assert.deepEqual(doc.paths['/healthz']?.get?.security, []);
    assert.equal(doc.paths['/api/v1/usage']?.get?.security, undefined);
    assert.equal(doc.paths['/metrics'], undefined);
  });

  test('the documented headers are on the responses', async () => {
    const ok = await t.get('/api/v1/usage', key);
    const refused = await t.get('/api/v1/usage', 'rp_live_wrong');
    const healthz = await t.get('/healthz');
    for (const res of [ok, refused, healthz]) {
      for (const h of HEADERS) assert.match(String(res.headers[h.toLowerCase()]), /^[\w-]+$/, h);
    }
  });

  test('page and per_page are documented as whole numbers in strings, and still checked by the handler', async () => {
    const params = doc.paths['/api/v1/entries']?.get?.parameters ?? [];
    for (const name of ['page', 'per_page']) {
      const p = params.find((x) => x.name === name);
      assert.deepEqual(p?.schema, { type: 'string', pattern: '^\\d{1,9}$' }, name);
    }
    const bad = await t.get('/api/v1/entries?page=x', key);
    assert.equal(bad.statusCode, 400);
    assert.equal(bad.json().error.message, 'page must be an integer from 1 to 1000000');
    assert.equal((await t.get('/api/v1/entries?page=&per_page=5', key)).statusCode, 200);
  });
});
