import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createHttpEmbedder } from './http.ts';
import type { Embedder } from './interface.ts';
import { createUseLiteEmbedder } from './use-lite.ts';
import { startTestApp, tempDir } from '../../test/helpers.ts';
import { startCli } from '../../test/process.ts';

const dot = (a: Float32Array, b: Float32Array) => a.reduce((s, x, i) => s + x * (b[i] as number), 0);

describe('USE-lite embedder', () => {
  let e: Embedder;
  before(async () => {
    e = await createUseLiteEmbedder({ workers: 2, maxBatch: 8 });
  });
  after(() => e.close());

  test(
    'the workers run at the priority asked for (a nice value of their own threads)',
    { skip: process.platform !== 'linux' },
    async () => {
      const nices = () =>
        readdirSync('/proc/self/task').map((tid) => {
          // Field 19 of stat is the nice value; the command name before it may hold spaces.
          const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
          return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
        });
      assert.ok(!nices().includes(7));
      const seven = await createUseLiteEmbedder({ workers: 1, priority: 7 });
      try {
        assert.ok(nices().includes(7), String(nices()));
      } finally {
        await seven.close();
      }
    },
  );

  test('unit vectors of 512 dimensions; paraphrases closer than unrelated texts', async () => {
    const [a, b, c] = await e.embed(['How do I reset my password?', 'How can I change my password?', 'Best pizza in Naples']);
    assert.ok(a && b && c);
    assert.equal(a.length, 512);
    assert.equal(e.dimensions, 512);
    assert.ok(Math.abs(dot(a, a) - 1) < 1e-4);
    assert.ok(dot(a, b) > 0.8, String(dot(a, b)));
    assert.ok(dot(a, c) < 0.4, String(dot(a, c)));
  });

  test('the same text gives the same vector, alone or in a batch', async () => {
    const [alone] = await e.embed(['A stable sentence.']);
    const batch = await e.embed(['other', 'A stable sentence.', 'more']);
    assert.ok(alone && batch[1]);
    assert.ok(dot(alone, batch[1]) > 0.9999);
  });

  test('many concurrent calls resolve, each with its own text', async () => {
    const texts = Array.from({ length: 60 }, (_, i) => `question number ${i} about the ${i % 2 ? 'sea' : 'mountains'}`);
    const one = await Promise.all(texts.map((t) => e.embed([t]).then((v) => v[0] as Float32Array)));
    const together = await e.embed(texts);
    one.forEach((v, i) => assert.ok(dot(v, together[i] as Float32Array) > 0.9999, `text ${i}`));
  });

  test('a text remembered for one account is embedded afresh for another', async () => {
    const [first] = await e.embed(['Which account asked this?'], 'account-a');
    const [again] = await e.embed(['Which account asked this?'], 'account-a');
    const [other] = await e.embed(['Which account asked this?'], 'account-b');
    assert.ok(first && again && other);
    assert.equal(again, first, 'the same account is answered from memory');
    assert.notEqual(other, first, 'another account is not');
    assert.ok(dot(other, first) > 0.9999);
  });

  test('empty and very long texts embed to unit vectors', async () => {
    const long = 'The quick brown fox jumps over the lazy dog. '.repeat(400);
    const [empty, big] = await e.embed(['', long]);
    assert.ok(empty && big);
    assert.ok(Math.abs(dot(empty, empty) - 1) < 1e-4);
    assert.ok(Math.abs(dot(big, big) - 1) < 1e-4);
  });

  test(
    'a worker that stops and cannot be restarted: checks are refused, not left waiting, until one starts',
    { timeout: 30_000 },
    async () => {
      const pool = (await createUseLiteEmbedder({ workers: 1 })) as Embedder & {
        addWorker(): Promise<void>;
        slots: { worker: { terminate(): Promise<number>; once(event: 'exit', f: () => void): void } }[];
      };
      try {
        const addWorker = pool.addWorker.bind(pool);
        // The model no longer loads (say, out of memory) when the pool restarts its worker.
        pool.addWorker = () => Promise.reject(new Error('the model did not load'));
        const worker = (pool.slots[0] as (typeof pool.slots)[number]).worker;
        const exited = new Promise<void>((resolve) => worker.once('exit', resolve));
        await worker.terminate();
        await exited;
        await assert.rejects(pool.embed(['anyone there?']), (err: Error & { unavailable?: boolean }) => err.unavailable === true);
        // The pool keeps trying; once the model loads again, texts are embedded again.
        pool.addWorker = addWorker;
        const deadline = Date.now() + 10_000;
        let vector: Float32Array | undefined;
        while (!vector && Date.now() < deadline) {
          vector = await pool.embed(['anyone there?']).then(
            ([v]) => v,
            () => new Promise<undefined>((resolve) => setTimeout(resolve, 100)),
          );
        }
        assert.equal(vector?.length, 512);
      } finally {
        await pool.close();
      }
    },
  );
});

describe('HTTP embedder', () => {
  let failing = false;
  const server = createServer(async (req: IncomingMessage, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    if (req.headers.authorization !== 'Bearer secret') {
      res.writeHead(401).end('{"error":"no"}');
      return;
    }
    if (failing) {
      res.writeHead(500).end('{"error":"overloaded"}');
      return;
    }
    const { input } = JSON.parse(body) as { input: string[] };
    const data = input.map((t, index) => ({ index, embedding: [t.length, 1, 0] })).reverse();
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data }));
  });
  let base = '';
  before(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  test('learns the dimensions, keeps the order by index, normalises', async () => {
    const e = await createHttpEmbedder({ baseUrl: base, model: 'm', apiKey: 'secret' });
    assert.equal(e.id, 'http:m@3');
    assert.equal(e.dimensions, 3);
    const [a, b] = await e.embed(['abc', 'a']);
    assert.ok(a && b);
    assert.ok(Math.abs((a[0] as number) - 3 / Math.sqrt(10)) < 1e-6);
    assert.ok(Math.abs((b[0] as number) - 1 / Math.sqrt(2)) < 1e-6);
  });

  test('when the embedding server fails, checks are misses and stores exact only; once it is back, those stores are embedded', async () => {
    const e = await createHttpEmbedder({ baseUrl: base, model: 'm', apiKey: 'secret' });
    const t = await startTestApp({ embedder: e });
    try {
      const key = await t.key();
      const messages = [{ role: 'user', content: 'What is the capital of Australia?' }];
      failing = true;
      const miss = await t.post('/api/v1/check', { messages }, key);
      assert.equal(miss.statusCode, 200, miss.body);
      assert.equal(miss.json().cache_hit, false);
      assert.deepEqual(miss.json().search_results, { exact_checked: true, semantic_checked: false, closest_match_score: 0 });
      const stored = await t.post('/api/v1/store', { messages, answer: 'Canberra' }, key);
      assert.equal(stored.statusCode, 200, stored.body);
      assert.deepEqual(stored.json().cache_types_stored, ['exact']);
      assert.equal((await t.post('/api/v1/check', { messages }, key)).json().cache_type, 'exact');
      const health = await t.get('/healthz');
      assert.equal(health.statusCode, 200);
      assert.equal(health.json().checks.embedder, 'unavailable');

      failing = false;
      const other = await t.post('/api/v1/check', { messages: [{ role: 'user', content: 'Who wrote Hamlet?' }] }, key);
      assert.equal(other.json().search_results.semantic_checked, true);
      assert.equal((await t.get('/healthz')).json().checks.embedder, 'ok');
      // The entry stored meanwhile is embedded now, and found by the semantic cache.
      await t.runtime.reembedded;
      const semantic = (await t.post('/api/v1/check', { messages, cache_types: ['semantic'] }, key)).json();
      assert.equal(semantic.cache_type, 'semantic', JSON.stringify(semantic));
      assert.equal(semantic.answer, 'Canberra');
    } finally {
      failing = false;
      await t.close();
    }
  });

  test('REPRISE_EMBED_DIMENSIONS other than the model gives: the server refuses to start, in one line naming it and the real number', async () => {
    const env = {
      REPRISE_DATA_DIR: tempDir(),
      REPRISE_EMBEDDER: 'http',
      REPRISE_EMBED_URL: base,
      REPRISE_EMBED_MODEL: 'm',
      REPRISE_EMBED_API_KEY: 'secret',
      HOST: '127.0.0.1',
      PORT: '0',
    };
    const cli = startCli(['serve'], { ...env, REPRISE_EMBED_DIMENSIONS: '512' });
    // A server that starts all the same is stopped, and the test fails on its exit code.
    const started = setTimeout(() => cli.child.kill(), 30_000);
    const wrong = await cli.exited.finally(() => clearTimeout(started));
    assert.equal(wrong.code, 2, wrong.stderr);
    const lines = wrong.stderr.trim().split('\n');
    assert.equal(lines.length, 1, wrong.stderr);
    assert.match(
      lines[0] as string,
      /^reprise: configuration error: REPRISE_EMBED_DIMENSIONS: is 512, but the model m at .* returns vectors of 3 dimensions/,
    );
    assert.doesNotMatch(wrong.stdout, /rp_live_/);
    // The right number is taken, as is none.
    const right = await createHttpEmbedder({ baseUrl: base, model: 'm', apiKey: 'secret', dimensions: 3 });
    assert.equal(right.id, 'http:m@3');
  });

  test('a refusal or an unreachable server is a clear error', async () => {
    await assert.rejects(createHttpEmbedder({ baseUrl: base, model: 'm', apiKey: 'wrong' }), /answered 401/);
    await assert.rejects(createHttpEmbedder({ baseUrl: 'http://127.0.0.1:9', model: 'm' }), /did not answer/);
  });
});
