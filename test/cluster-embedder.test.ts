import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../src/config.ts';
import { createHttpEmbedder } from '../src/embedding/http.ts';
import { startTestApp, tempDir, user, type TestApp } from './helpers.ts';
import { eventually, freshSchema, serviceUrl, skipReason, uniquePrefix } from './services.ts';

const skip = skipReason('DATABASE_URL') || skipReason('REDIS_URL');

/** Vectors of hashed character trigrams: the same text, the same vector. */
function trigrams(text: string): number[] {
  const v = new Array<number>(16).fill(0);
  const t = ` ${text.toLowerCase()} `;
  for (let i = 0; i + 3 <= t.length; i++) {
    let h = 0;
    for (const ch of t.slice(i, i + 3)) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
    v[h % 16] = (v[h % 16] as number) + 1;
  }
  return v;
}

describe('cluster: an embedding server that fails and comes back', { skip }, () => {
  let failing = false;
  const server = createServer(async (req: IncomingMessage, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    if (failing) {
      res.writeHead(500).end('{"error":"overloaded"}');
      return;
    }
    const { input } = JSON.parse(body) as { input: string[] };
    const data = input.map((t, index) => ({ index, embedding: trigrams(t) }));
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data }));
  });
  const { schema, drop } = freshSchema();
  const nodes: TestApp[] = [];
  let env: Record<string, string> = {};
  const node = async () => {
    const embedder = await createHttpEmbedder({ baseUrl: env.REPRISE_EMBED_URL as string, model: 'trigrams' });
    const t = await startTestApp({ config: loadConfig({ ...env, REPRISE_DATA_DIR: tempDir() }), embedder });
    nodes.push(t);
    return t;
  };
  before(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    env = {
      REPRISE_EMBEDDER: 'http',
      REPRISE_EMBED_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      DATABASE_URL: serviceUrl('DATABASE_URL') as string,
      REPRISE_PG_SCHEMA: schema,
      REDIS_URL: serviceUrl('REDIS_URL') as string,
      REPRISE_REDIS_PREFIX: uniquePrefix(),
    };
  });
  after(async () => {
    failing = false;
    for (const t of nodes) await t.close();
    await drop();
    await new Promise<void>((r) => server.close(() => r()));
  });

  /** Stores on `a` while the embedder fails: kept for exact hits only. */
  async function storeDuringOutage(a: TestApp, key: string, messages: ReturnType<typeof user>[], answer: string) {
    failing = true;
    const stored = (await a.post('/api/v1/store', { messages, answer }, key)).json();
    assert.deepEqual(stored.cache_types_stored, ['exact']);
  }

  /** `b` comes to serve the entry stored for `messages` as a semantic hit, with its answer. */
  async function servedSemantically(b: TestApp, key: string, messages: ReturnType<typeof user>[], answer: string) {
    const semanticOnB = async () => (await b.post('/api/v1/check', { messages, cache_types: ['semantic'] }, key)).json();
    assert.ok(await eventually(async () => (await semanticOnB()).cache_type === 'semantic'), 'B serves the entry as a semantic hit');
    assert.equal((await semanticOnB()).answer, answer);
  }

  test('an entry stored on A while the embedder fails is a semantic hit on B once it is back, with no more requests to A', async () => {
    const a = await node();
    const b = await node();
    const key = await a.key('outage-a');
    const messages = [user('What is the tallest mountain in Africa?')];
    await storeDuringOutage(a, key, messages, 'Kilimanjaro');
    assert.equal((await a.get('/healthz')).json().checks.embedder, 'unavailable');
    failing = false;

    // A hears nothing more from clients: it finds out by itself that the embedder is back.
    assert.ok(await eventually(async () => (await a.get('/healthz')).json().checks.embedder === 'ok'), 'A says its embedder is ok again');
    await servedSemantically(b, key, messages, 'Kilimanjaro');
  });

  test('an entry stored on A while the embedder fails is a semantic hit on B once it is back, A stopped meanwhile', async () => {
    const a = await node();
    const b = await node();
    const key = await a.key('outage-stopped');
    const messages = [user('Which river flows through Budapest?')];
    await storeDuringOutage(a, key, messages, 'The Danube');
    // B finds the embedder failing too, and stores nothing meanwhile.
    const miss = (await b.post('/api/v1/check', { messages: [user('Who painted the Mona Lisa?')] }, key)).json();
    assert.equal(miss.search_results.semantic_checked, false);
    await a.close();
    nodes.splice(nodes.indexOf(a), 1);
    failing = false;

    await servedSemantically(b, key, messages, 'The Danube');
  });

  test('an entry stored on A while the embedder fails is a semantic hit on B, which never saw it fail, A stopped meanwhile', async () => {
    const a = await node();
    const b = await node();
    const key = await a.key('outage-unseen');
    const messages = [user('How many strings does a cello have?')];
    await storeDuringOutage(a, key, messages, 'Four');
    await a.close();
    nodes.splice(nodes.indexOf(a), 1);
    failing = false;

    await servedSemantically(b, key, messages, 'Four');
  });
});
