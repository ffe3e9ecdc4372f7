import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { createHttpEmbedder } from '../../embedding/http.ts';
import { entry } from '../../store/conformance.ts';
import { startTestApp, tempDir, testConfig, user, type TestApp } from '../../../test/helpers.ts';
import { freshSchema, serviceUrl, skipReason } from '../../../test/services.ts';

/** A config file with plans of small storage limits. */
function configWithSmallPlans(): string {
  const file = path.join(tempDir(), 'reprise.json');
  writeFileSync(
    file,
    JSON.stringify({
      plans: {
        three: { requests_per_minute: 6000, burst: 10_000, max_entries: 3, max_stored_bytes: 'unlimited' },
        small: { requests_per_minute: 6000, burst: 10_000, max_entries: 'unlimited', max_stored_bytes: 400 },
      },
    }),
  );
  return file;
}

/** The bytes an entry of these messages and answer counts for: the messages' JSON and the answer, in UTF-8. */
const bytesOf = (messages: { role: string; content: string }[], answer: string) =>
  Buffer.byteLength(JSON.stringify(messages)) + Buffer.byteLength(answer);

function assertRefused(res: LightMyRequestResponse, details: object): void {
  assert.equal(res.statusCode, 403, res.body);
  const body = res.json();
  assert.equal(body.error.code, 'STORAGE_QUOTA_EXCEEDED');
  assert.equal(body.status, 403);
  assert.ok(!Number.isNaN(Date.parse(body.timestamp)));
  assert.deepEqual(body.error.details, details);
  // It says how to make room.
  assert.match(body.error.message, /DELETE \/api\/v1\/entries\/\{id\}/);
  assert.match(body.error.message, /larger plan/);
  assert.equal(body.error.retry_after, undefined);
  assert.equal(res.headers['retry-after'], undefined);
  assert.ok(res.headers['x-ratelimit-limit']);
}

describe('POST /api/v1/store: the storage limits of the plan', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ config: testConfig({ REPRISE_CONFIG: configWithSmallPlans() }) });
  });
  after(() => t.close());

  const store = (key: string, question: string, answer = `Answer to ${question}`) =>
    t.post('/api/v1/store', { messages: [user(question)], answer }, key);
  const check = async (key: string, question: string) => (await t.post('/api/v1/check', { messages: [user(question)] }, key)).json();

  test('a store past max_entries is 403 STORAGE_QUOTA_EXCEEDED, naming the limit; every entry is kept', async () => {
    const key = await t.key(undefined, 'three');
    for (const q of ['q1', 'q2', 'q3']) assert.equal((await store(key, q)).statusCode, 200);
    const refused = await store(key, 'q4');
    assertRefused(refused, { limit: 'max_entries', allowed: 3, current: 3, adding: 1 });
    assert.match(refused.json().error.message, /three plan keeps at most 3 entries/);
    assert.equal((await check(key, 'q4')).cache_hit, false);
    for (const q of ['q1', 'q2', 'q3']) assert.equal((await check(key, q)).answer, `Answer to ${q}`);
    const usage = (await t.get('/api/v1/usage', key)).json();
    assert.equal(usage.storage.entries, 3);
    assert.equal(usage.storage.max_entries, 3);
    assert.equal(usage.storage.max_stored_bytes, null);
    // Usage's stores are the stores taken.
    assert.equal(usage.stores, 3);
    // A second refusal, and the metric counts both.
    assert.equal((await store(key, 'q5')).statusCode, 403);
    const metrics = (await t.get('/metrics')).body;
    assert.match(metrics, /^reprise_stores_refused_total\{limit="max_entries"\} 2$/m);
  });

  test('at the limit, a conversation stored again is taken: it replaces its entry', async () => {
    const key = await t.key(undefined, 'three');
    for (const q of ['q1', 'q2', 'q3']) await store(key, q);
    const again = await store(key, 'q2', 'A better answer');
    assert.equal(again.statusCode, 200, again.body);
    assert.equal((await check(key, 'q2')).answer, 'A better answer');
    assert.equal((await t.get('/api/v1/usage', key)).json().storage.entries, 3);
  });

  test('deleting an entry makes room for another', async () => {
    const key = await t.key(undefined, 'three');
    const ids: number[] = [];
    for (const q of ['q1', 'q2', 'q3']) ids.push((await store(key, q)).json().entry_id);
    assert.equal((await store(key, 'q4')).statusCode, 403);
    const deleted = await t.app.inject({ method: 'DELETE', url: `/api/v1/entries/${ids[0]}`, headers: { authorization: `Bearer ${key}` } });
    assert.equal(deleted.statusCode, 200);
    assert.equal((await store(key, 'q4')).statusCode, 200);
    assert.equal((await check(key, 'q4')).cache_hit, true);
    assert.equal((await store(key, 'q5')).statusCode, 403);
  });

  test('an account at its limit does not keep another from storing', async () => {
    const full = await t.key(undefined, 'three');
    const other = await t.key(undefined, 'three');
    for (const q of ['q1', 'q2', 'q3']) await store(full, q);
    assert.equal((await store(full, 'q4')).statusCode, 403);
    for (const q of ['q1', 'q2', 'q3']) assert.equal((await store(other, q)).statusCode, 200);
    assert.equal((await check(other, 'q3')).cache_hit, true);
    assert.equal((await t.get('/api/v1/usage', other)).json().storage.entries, 3);
  });

  test('a store past max_stored_bytes is 403, with the bytes kept and the bytes it would add', async () => {
    const key = await t.key(undefined, 'small');
    const answer = 'Ünïcödé answer, counted in bytes: 🙂'.repeat(2);
    let kept = 0;
    for (let i = 0; ; i++) {
      const messages = [user(`question ${i}`)];
      const res = await t.post('/api/v1/store', { messages, answer }, key);
      if (res.statusCode !== 200) {
        assertRefused(res, { limit: 'max_stored_bytes', allowed: 400, current: kept, adding: bytesOf(messages, answer) });
        assert.match(res.json().error.message, /small plan keeps at most 400 bytes of entries/);
        break;
      }
      kept += bytesOf(messages, answer);
    }
    assert.ok(kept > 0 && kept <= 400);
    const usage = (await t.get('/api/v1/usage', key)).json();
    assert.deepEqual(usage.storage, { entries: usage.storage.entries, stored_bytes: kept, max_entries: null, max_stored_bytes: 400 });
    // A shorter answer to a stored conversation is taken; a longer one past the limit is not.
    assert.equal((await t.post('/api/v1/store', { messages: [user('question 0')], answer: 'short' }, key)).statusCode, 200);
    const longer = await t.post('/api/v1/store', { messages: [user('question 0')], answer: 'x'.repeat(400) }, key);
    assert.equal(longer.statusCode, 403);
    assert.equal(longer.json().error.details.limit, 'max_stored_bytes');
    assert.equal((await check(key, 'question 0')).answer, 'short');
  });

  test('expired entries not yet removed make room at once for a store that needs it', async () => {
    const key = await t.key('expired-room', 'three');
    const account = await t.runtime.ctx.store.getAccountByName('expired-room');
    const past = new Date(Date.now() - 60_000).toISOString();
    // Three entries whose time has passed, which the minute's sweep has not removed yet.
    for (let i = 0; i < 3; i++) await t.runtime.ctx.store.putEntry(entry(account?.id ?? '', { expiresAt: past }));
    assert.equal((await t.get('/api/v1/usage', key)).json().storage.entries, 3);
    assert.equal((await store(key, 'fresh')).statusCode, 200);
    assert.equal((await t.get('/api/v1/usage', key)).json().storage.entries, 1);
    assert.equal((await check(key, 'fresh')).cache_hit, true);
  });

  test('the unlimited plan has no storage limits; the built-in plans have theirs', async () => {
    for (const [plan, entries, bytes] of [
      ['unlimited', null, null],
      ['free', 10_000, 100 * 1024 * 1024],
      ['pro', 100_000, 1024 * 1024 * 1024],
      ['enterprise', 1_000_000, 10 * 1024 * 1024 * 1024],
    ] as const) {
      const storage = (await t.get('/api/v1/usage', await t.key(undefined, plan))).json().storage;
      assert.deepEqual(storage, { entries: 0, stored_bytes: 0, max_entries: entries, max_stored_bytes: bytes }, plan);
    }
  });
});

describe('storage limits across a restart', () => {
  test('what an account keeps is the same after a restart, and its limit still holds', async () => {
    const config = testConfig({ REPRISE_CONFIG: configWithSmallPlans() });
    const first = await startTestApp({ config, keepData: true });
    const key = await first.key('restarted', 'three');
    for (const q of ['Grüße?', '世界?', 'q3']) await first.post('/api/v1/store', { messages: [user(q)], answer: `${q}!` }, key);
    const before = (await first.get('/api/v1/usage', key)).json().storage;
    await first.close();
    const second = await startTestApp({ config });
    try {
      const storage = (await second.get('/api/v1/usage', key)).json().storage;
      assert.deepEqual(storage, before);
      assert.equal(storage.entries, 3);
      assert.equal(
        storage.stored_bytes,
        ['Grüße?', '世界?', 'q3'].reduce((n, q) => n + bytesOf([user(q)], `${q}!`), 0),
      );
      assert.equal((await second.post('/api/v1/store', { messages: [user('one more')], answer: 'no room' }, key)).statusCode, 403);
    } finally {
      await second.close();
    }
  });
});

/**
 * An embedding server (an OpenAI-compatible `POST /v1/embeddings`, as `REPRISE_EMBEDDER=http`
 * calls) that keeps the texts it was asked to embed.
 */
function embeddingServer() {
  const texts: string[] = [];
  const server = createServer(async (req: IncomingMessage, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    const { input } = JSON.parse(body) as { input: string[] };
    texts.push(...input);
    const data = input.map((text, index) => ({ index, embedding: [1, text.length % 7, text.charCodeAt(0) % 5] }));
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data }));
  });
  return {
    /** Whether a text it embedded has `word`. */
    embedded: (word: string) => texts.some((t) => t.toLowerCase().includes(word)),
    async listen(): Promise<string> {
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

for (const kind of ['SQLite', 'PostgreSQL'] as const) {
  const skip = kind === 'PostgreSQL' && skipReason('DATABASE_URL');
  describe(`POST /api/v1/store past a storage limit is refused before it is embedded (${kind})`, { skip }, () => {
    const embeddings = embeddingServer();
    const { schema, drop } = freshSchema();
    let t: TestApp;
    before(async () => {
      const url = await embeddings.listen();
      const env: Record<string, string> = { REPRISE_CONFIG: configWithSmallPlans(), REPRISE_EMBEDDER: 'http', REPRISE_EMBED_URL: url };
      if (kind === 'PostgreSQL') Object.assign(env, { DATABASE_URL: serviceUrl('DATABASE_URL') as string, REPRISE_PG_SCHEMA: schema });
      t = await startTestApp({ config: testConfig(env), embedder: await createHttpEmbedder({ baseUrl: url, model: 'lengths' }) });
    });
    after(async () => {
      await t.close();
      await drop();
      await embeddings.close();
    });

    const store = (key: string, question: string, answer = `Answer to ${question}`) =>
      t.post('/api/v1/store', { messages: [user(question)], answer }, key);

    test('a new conversation past max_entries: 403, and its text never reaches the embedding server', async () => {
      const key = await t.key(undefined, 'three');
      for (const q of ['aardvark', 'badger', 'cheetah']) {
        const stored = await store(key, `What does a ${q} eat?`);
        assert.deepEqual(stored.json().cache_types_stored, ['exact', 'semantic'], stored.body);
        assert.ok(embeddings.embedded(q), `${q} was embedded`);
      }
      const refused = await store(key, 'What does a dingo eat?');
      assertRefused(refused, { limit: 'max_entries', allowed: 3, current: 3, adding: 1 });
      assert.equal(embeddings.embedded('dingo'), false);
      const metrics = (await t.get('/metrics')).body;
      assert.match(metrics, /^reprise_stores_refused_total\{limit="max_entries"\} 1$/m);
    });

    test('a store past max_stored_bytes: 403 with the bytes it would add, and not embedded', async () => {
      const key = await t.key(undefined, 'small');
      const messages = [user('How long is an echidna?')];
      const answer = 'About 40 centimetres. '.repeat(20);
      assertRefused(await t.post('/api/v1/store', { messages, answer }, key), {
        limit: 'max_stored_bytes',
        allowed: 400,
        current: 0,
        adding: bytesOf(messages, answer),
      });
      assert.equal(embeddings.embedded('echidna'), false);
    });

    test('at the limit, a conversation stored again is still embedded and taken', async () => {
      const key = await t.key(undefined, 'three');
      for (const q of ['What is a ferret?', 'What is a gecko?', 'What is a hedgehog?']) await store(key, q);
      const again = await store(key, 'What is a gecko?', 'A small lizard.');
      assert.equal(again.statusCode, 200, again.body);
      assert.deepEqual(again.json().cache_types_stored, ['exact', 'semantic']);
      assert.equal((await t.post('/api/v1/check', { messages: [user('What is a gecko?')] }, key)).json().answer, 'A small lizard.');
    });

    test('at the limit with expired entries not yet removed, a new conversation is embedded and taken', async () => {
      const name = `expired-${kind}`;
      const key = await t.key(name, 'three');
      const account = await t.runtime.ctx.store.getAccountByName(name);
      const past = new Date(Date.now() - 60_000).toISOString();
      for (let i = 0; i < 3; i++) await t.runtime.ctx.store.putEntry(entry(account?.id ?? '', { expiresAt: past }));
      const stored = await store(key, 'What is an ibex?');
      assert.equal(stored.statusCode, 200, stored.body);
      assert.deepEqual(stored.json().cache_types_stored, ['exact', 'semantic']);
      assert.ok(embeddings.embedded('ibex'));
      assert.equal((await t.get('/api/v1/usage', key)).json().storage.entries, 1);
    });
  });
}
