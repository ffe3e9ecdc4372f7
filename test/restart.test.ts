import assert from 'node:assert/strict';
import { copyFileSync, cpSync, existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { partitionOf, semanticKey } from '../src/cache/context.ts';
import { dot } from '../src/cache/scorer.ts';
import { vectorId } from '../src/cache/text-form.ts';
import { createRuntime } from '../src/runtime.ts';
import { BEFORE_VECTOR_NUMBERING, closeSharedEmbedder, crashImage, sharedEmbedder, startTestApp, testConfig, user } from './helpers.ts';
import { eventually } from './services.ts';

describe('data survives a restart', () => {
  const config = testConfig();
  after(async () => {
    rmSync(config.dataDir, { recursive: true, force: true });
    await closeSharedEmbedder();
  });

  test('entries, keys, usage and the vector index come back', async () => {
    const embedder = await sharedEmbedder();
    const first = await startTestApp({ config, embedder, keepData: true });
    const key = await first.key('persistent');
    const messages = [user('Which planet is known as the Red Planet?')];
    await first.post('/api/v1/store', { messages, answer: 'Mars.', model: 'gpt-4o', tokens_used: 5 }, key);
    await first.post('/api/v1/check', { messages }, key);
    await first.post('/api/v1/check', { messages: [user('unrelated question about cooking pasta')] }, key);
    await first.close();

    const second = await startTestApp({ config, embedder, keepData: true });
    try {
      const exact = (await second.post('/api/v1/check', { messages }, key)).json();
      assert.equal(exact.cache_type, 'exact');
      assert.equal(exact.answer, 'Mars.');
      assert.equal(exact.metadata.usage_count, 2);
      // The index is rebuilt from the store: a paraphrase finds the entry (at a loose threshold,
      // since this is about the reload, not about where the line is drawn).
      const semantic = (
        await second.post('/api/v1/check', { messages: [user('Which planet is called the Red Planet?')], similarity_threshold: 0.6 }, key)
      ).json();
      assert.equal(semantic.cache_type, 'semantic', JSON.stringify(semantic));
      assert.equal(semantic.answer, 'Mars.');
      const usage = (await second.get('/api/v1/usage', key)).json();
      assert.equal(usage.total_requests, 4);
      assert.equal(usage.exact_hits, 2);
      assert.equal(usage.semantic_hits, 1);
      assert.equal(usage.cache_misses, 1);
    } finally {
      await second.close();
    }
  });

  test("a data directory is one server's while it runs, and free again once it has closed", async () => {
    const own = testConfig();
    const first = await startTestApp({ config: own, keepData: true });
    await assert.rejects(startTestApp({ config: own, keepData: true }), (err: Error) => {
      assert.equal(err.name, 'StoreOpenError');
      assert.match(err.message, /another Reprise server is running on the data directory/);
      return true;
    });
    // The first is untouched by the refusal.
    const key = await first.key('first');
    assert.equal((await first.post('/api/v1/store', { messages: [user('still here?')], answer: 'Yes.' }, key)).json().stored, true);
    await first.close();
    const second = await startTestApp({ config: own });
    try {
      const hit = (await second.post('/api/v1/check', { messages: [user('still here?')] }, key)).json();
      assert.equal(hit.answer, 'Yes.');
    } finally {
      await second.close();
    }
  });

  test('a start that fails after taking the data directory leaves it free: the same process can start a server on it', async () => {
    // An embedding server that does not answer: the start fails once the store is open.
    const closed = createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const own = testConfig({ REPRISE_EMBEDDER: 'http', REPRISE_EMBED_URL: `http://127.0.0.1:${port}/v1` });
    await assert.rejects(createRuntime(own), (err: Error) => {
      assert.equal(err.name, 'EmbedderUnavailableError');
      return true;
    });
    const app = await startTestApp({ config: own });
    try {
      const key = await app.key('retried');
      assert.equal(
        (await app.post('/api/v1/store', { messages: [user('Is the directory free?')], answer: 'Yes.' }, key)).json().stored,
        true,
      );
    } finally {
      await app.close();
    }
  });

  test('a start stopped midway (its signal aborted) closes what it opened: the same process can start a server on the directory', async () => {
    // An embedding server whose probe, once the store is open, is answered after the stop is asked.
    const stop = new AbortController();
    const embeddings = createHttpServer((req, res) => {
      req.resume().on('end', () => {
        stop.abort('SIGTERM');
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ data: [{ index: 0, embedding: [1, 0, 0, 0] }] }));
      });
    });
    embeddings.listen(0, '127.0.0.1');
    await once(embeddings, 'listening');
    const { port } = embeddings.address() as AddressInfo;
    const own = testConfig({ REPRISE_EMBEDDER: 'http', REPRISE_EMBED_URL: `http://127.0.0.1:${port}/v1` });
    try {
      await assert.rejects(createRuntime(own, { signal: stop.signal }), (err: Error) => {
        assert.equal(err.name, 'StartStoppedError');
        return true;
      });
    } finally {
      embeddings.close();
    }
    const app = await startTestApp({ config: { ...own, embedder: { kind: 'none' } } });
    try {
      const key = await app.key('after-stop');
      assert.equal(
        (await app.post('/api/v1/store', { messages: [user('Is the directory free?')], answer: 'Yes.' }, key)).json().stored,
        true,
      );
    } finally {
      await app.close();
    }
  });

  test('a database restored from a backup is searched whole, whatever index snapshot is beside it', async () => {
    const embedder = await sharedEmbedder();
    const own = testConfig();
    const db = path.join(own.dataDir, 'reprise.db');
    const spider = [user('How many legs does a spider have?')];
    const first = await startTestApp({ config: own, embedder, keepData: true });
    const key = await first.key('restored');
    const stored = (await first.post('/api/v1/store', { messages: spider, answer: 'Eight.' }, key)).json();
    await first.close();
    const backup = `${db}.backup`;
    copyFileSync(db, backup);

    // After the backup: the entry deleted, and a snapshot saved at shutdown without it.
    const second = await startTestApp({ config: own, embedder, keepData: true });
    assert.equal(
      (
        await second.app.inject({
          method: 'DELETE',
          url: `/api/v1/entries/${stored.entry_id}`,
          headers: { authorization: `Bearer ${key}` },
        })
      ).statusCode,
      200,
    );
    await second.close();
    assert.ok(existsSync(path.join(own.dataDir, 'index', 'manifest.json')));

    // The operator restores the database; the snapshot stays where it was.
    for (const f of [db, `${db}-wal`, `${db}-shm`]) rmSync(f, { force: true });
    copyFileSync(backup, db);
    const third = await startTestApp({ config: own, embedder });
    try {
      const exact = (await third.post('/api/v1/check', { messages: spider }, key)).json();
      assert.equal(exact.cache_type, 'exact');
      const semantic = (
        await third.post('/api/v1/check', { messages: [user('How many legs do spiders have?')], similarity_threshold: 0.6 }, key)
      ).json();
      assert.equal(semantic.cache_type, 'semantic', JSON.stringify(semantic));
      assert.equal(semantic.answer, 'Eight.');
    } finally {
      await third.close();
    }
  });

  test('a data directory never stopped cleanly: the index rebuilt at start is saved once whole, and a start after a crash loads it', async () => {
    const embedder = await sharedEmbedder();
    const first = await startTestApp({ embedder, keepData: true });
    const key = await first.key('rebuilt');
    await first.post('/api/v1/store', { messages: [user('How many legs does a spider have?')], answer: 'Eight.' }, key);
    await first.post('/api/v1/store', { messages: [user('Which planet is known as the Red Planet?')], answer: 'Mars.' }, key);
    // Killed, and without a snapshot: as a data directory of a version that saved one only at shutdown.
    const crashed = crashImage(first.config.dataDir);
    await first.close();
    rmSync(path.join(crashed.dataDir, 'index'), { recursive: true, force: true });

    const logged: { msg: string; obj: Record<string, unknown> }[] = [];
    const log = { info: (obj: object, msg: string) => logged.push({ obj: obj as Record<string, unknown>, msg }), warn: () => undefined };
    const second = await startTestApp({ config: crashed, embedder, keepData: true, runtime: { log } });
    assert.equal(second.runtime.vectorsFromSnapshot, 0, 'rebuilt');
    const saved = logged.find((l) => /rebuilt semantic index is saved/.test(l.msg));
    assert.ok(saved, JSON.stringify(logged));
    assert.equal(saved.obj.vectors, 2);
    assert.equal(typeof saved.obj.save_ms, 'number');
    const water = [user('What is the boiling point of water?')];
    assert.equal((await second.post('/api/v1/store', { messages: water, answer: '100 °C.' }, key)).json().stored, true);
    // Killed again, before any clean stop.
    const again = crashImage(second.config.dataDir);
    await second.close();

    const third = await startTestApp({ config: again, embedder });
    try {
      assert.equal(third.runtime.vectorsFromSnapshot, 2, 'the snapshot saved after the rebuild is loaded');
      const mars = (
        await third.post('/api/v1/check', { messages: [user('Which planet is called the Red Planet?')], similarity_threshold: 0.6 }, key)
      ).json();
      assert.equal(mars.answer, 'Mars.', JSON.stringify(mars));
      const boiling = (await third.post('/api/v1/check', { messages: water, cache_types: ['semantic'] }, key)).json();
      assert.equal(boiling.answer, '100 °C.', JSON.stringify(boiling));
    } finally {
      await third.close();
    }
  });

  test('a shutdown killed between the two renames of its snapshot save: the next start loads the snapshot the database was saved with', async () => {
    const embedder = await sharedEmbedder();
    const own = testConfig();
    const dir = path.join(own.dataDir, 'index');
    const first = await startTestApp({ config: own, embedder, keepData: true });
    const key = await first.key('swap');
    await first.post('/api/v1/store', { messages: [user('How many legs does a spider have?')], answer: 'Eight.' }, key);
    await first.post('/api/v1/store', { messages: [user('Which planet is known as the Red Planet?')], answer: 'Mars.' }, key);
    await first.close();
    // What a later shutdown leaves when killed between the renames: the snapshot in place moved
    // aside, and the new one beside it, whose token the database was never given.
    renameSync(dir, `${dir}.old`);
    cpSync(`${dir}.old`, `${dir}.new`, { recursive: true });
    const manifest = path.join(`${dir}.new`, 'manifest.json');
    writeFileSync(manifest, JSON.stringify({ ...JSON.parse(readFileSync(manifest, 'utf8')), token: 'never-recorded' }));

    const second = await startTestApp({ config: own, embedder, keepData: true });
    try {
      assert.equal(second.runtime.vectorsFromSnapshot, 2, 'the snapshot is loaded, not the index rebuilt');
      const hit = (
        await second.post('/api/v1/check', { messages: [user('Which planet is called the Red Planet?')], similarity_threshold: 0.6 }, key)
      ).json();
      assert.equal(hit.answer, 'Mars.', JSON.stringify(hit));
      assert.ok(existsSync(path.join(dir, 'manifest.json')) && !existsSync(`${dir}.old`) && !existsSync(`${dir}.new`));
    } finally {
      await second.close();
    }
  });

  test('the kept snapshot is dropped once the removals since it was saved outnumber the index, and saved anew at shutdown', async () => {
    const embedder = await sharedEmbedder();
    const own = testConfig();
    const dir = path.join(own.dataDir, 'index');
    const runtime = { sweepMs: 10, removalsKept: 1 };
    const first = await startTestApp({ config: own, embedder, keepData: true, runtime });
    const key = await first.key('removals');
    const ids: number[] = [];
    for (const q of ['How many legs does a spider have?', 'Which planet is known as the Red Planet?', 'What is the capital of France?'])
      ids.push((await first.post('/api/v1/store', { messages: [user(q)], answer: 'A.' }, key)).json().entry_id);
    await first.close();
    assert.ok(existsSync(path.join(dir, 'manifest.json')));

    const second = await startTestApp({ config: own, embedder, keepData: true, runtime });
    const remove = (id: number | undefined) =>
      second.app.inject({ method: 'DELETE', url: `/api/v1/entries/${id}`, headers: { authorization: `Bearer ${key}` } });
    // Two removals, for an index of one.
    assert.equal((await remove(ids[0])).statusCode, 200);
    assert.equal((await remove(ids[1])).statusCode, 200);
    assert.ok(await eventually(async () => !existsSync(dir)), 'the snapshot is dropped');
    await second.close();
    assert.ok(existsSync(path.join(dir, 'manifest.json')), 'and saved at shutdown');

    const third = await startTestApp({ config: own, embedder, runtime });
    try {
      assert.equal(third.runtime.vectorsFromSnapshot, 1);
      const hit = (
        await third.post('/api/v1/check', { messages: [user('What is the capital city of France?')], similarity_threshold: 0.6 }, key)
      ).json();
      assert.equal(hit.entry_id, ids[2], JSON.stringify(hit));
    } finally {
      await third.close();
    }
  });

  test('upgraded from the version before the numbering of vector writes, whose newest entry was deleted: a store made after the upgrade is found after a crash', async () => {
    const embedder = await sharedEmbedder();
    const own = testConfig();
    const first = await startTestApp({ config: own, embedder, keepData: true });
    const key = await first.key('upgraded');
    await first.post('/api/v1/store', { messages: [user('How many legs does a spider have?')], answer: 'Eight.' }, key);
    const newest = (await first.post('/api/v1/store', { messages: [user('Who painted the Mona Lisa?')], answer: 'Leonardo.' }, key)).json();
    const highest = Math.max(...(await first.runtime.ctx.store.scanVectors(0, 100)).map((r) => r.id));
    const removed = await first.app.inject({
      method: 'DELETE',
      url: `/api/v1/entries/${newest.entry_id}`,
      headers: { authorization: `Bearer ${key}` },
    });
    assert.equal(removed.statusCode, 200);
    await first.close();
    // As the version before left it at its shutdown: the database without the numbering, and the
    // snapshot's watermark the highest entry id the index had held (the deleted entry's).
    const db = new Database(path.join(own.dataDir, 'reprise.db'));
    db.exec(BEFORE_VECTOR_NUMBERING);
    db.close();
    const manifest = path.join(own.dataDir, 'index', 'manifest.json');
    writeFileSync(manifest, JSON.stringify({ ...JSON.parse(readFileSync(manifest, 'utf8')), watermark: highest }));

    // This version's first start, a store, and the process killed.
    const second = await startTestApp({ config: own, embedder, keepData: true });
    assert.equal(second.runtime.vectorsFromSnapshot, 1);
    const water = [user('What is the boiling point of water?')];
    assert.deepEqual((await second.post('/api/v1/store', { messages: water, answer: '100 °C.' }, key)).json().cache_types_stored, [
      'exact',
      'semantic',
    ]);
    const crashed = crashImage(own.dataDir);
    await second.close();

    const third = await startTestApp({ config: crashed, embedder });
    try {
      assert.equal(third.runtime.vectorsFromSnapshot, 1, 'the snapshot is loaded again');
      const hit = (await third.post('/api/v1/check', { messages: water, cache_types: ['semantic'] }, key)).json();
      assert.equal(hit.cache_type, 'semantic', JSON.stringify(hit));
      assert.equal(hit.answer, '100 °C.');
    } finally {
      await third.close();
    }
  });

  test('with no index snapshot on disk, the vectors removed are not listed for one: an exact-only server does not keep them in its database', async () => {
    // The list of removed vectors is read only to bring a snapshot up to date; with none on disk
    // (no embedder has saved one), each delete and expiry added a row to the database for good.
    const own = testConfig();
    const first = await startTestApp({ config: own, keepData: true });
    const key = await first.key('exact-only');
    const remove = async (app: typeof first, n: number) => {
      for (let i = 0; i < n; i++) {
        const stored = (await app.post('/api/v1/store', { messages: [user(`Question ${n} ${i}?`)], answer: `Answer ${i}.` }, key)).json();
        const deleted = await app.app.inject({
          method: 'DELETE',
          url: `/api/v1/entries/${stored.entry_id}`,
          headers: { authorization: `Bearer ${key}` },
        });
        assert.equal(deleted.statusCode, 200);
      }
    };
    await remove(first, 5);
    await first.close();
    assert.ok(!existsSync(path.join(own.dataDir, 'index')));

    const runtime = await createRuntime(own, { embedder: null, sweepMs: 20 });
    try {
      const store = runtime.ctx.store;
      assert.deepEqual(await store.removedVectors?.(0, 100), [], 'forgotten at start');
      // And while it runs: those of its own deletes (here through the service) and of other
      // processes (the CLI) go at the next sweep.
      const account = await store.getAccountByName('exact-only');
      assert.ok(account);
      for (let i = 0; i < 5; i++) {
        const stored = await runtime.ctx.cache.store(account, {
          messages: [user(`Later question ${i}?`)],
          answer: 'Later.',
          model: 'gpt-4o',
        });
        assert.equal(await runtime.ctx.cache.deleteEntry(account, stored.entryId), true);
      }
      assert.ok(await eventually(async () => (await store.removedVectors?.(0, 100))?.length === 0), 'forgotten while it runs');
    } finally {
      await runtime.close();
    }
  });

  test('an entry embedded from an older form of its text is searched after a restart, and embedded again', async () => {
    const embedder = await sharedEmbedder();
    const older = testConfig();
    const first = await startTestApp({ config: older, embedder, keepData: true });
    const key = await first.key('older-form');
    const stored = (
      await first.post(
        '/api/v1/store',
        { messages: [user('Do you know the capital of Australia?')], answer: 'Canberra.', model: 'gpt-4o' },
        key,
      )
    ).json();
    // As a version before the current text form stored it: the text embedded as typed, under the
    // embedder's bare id.
    const [entry] = await first.runtime.ctx.store.getEntries((await first.runtime.ctx.store.scanVectors(0, 1000)).map((r) => r.id));
    assert.equal(entry?.publicId, stored.entry_id);
    const typed = (await embedder.embed(['Do you know the capital of Australia?']))[0] as Float32Array;
    const id = entry?.id as number;
    const update = { id, from: vectorId(embedder), embedderId: embedder.id, vector: typed, prefixVector: null };
    assert.deepEqual(await first.runtime.ctx.store.replaceVectors([update]), [id]);
    first.runtime.index.add(partitionOf(entry?.accountId as string, entry?.contextHash as string), id, typed);
    await first.close();

    const second = await startTestApp({ config: older, embedder });
    try {
      await second.runtime.reembedded;
      const [again] = await second.runtime.ctx.store.getEntries([id]);
      assert.equal(again?.embedderId, vectorId(embedder));
      const plain = (await embedder.embed(['What is the capital of Australia?']))[0] as Float32Array;
      assert.ok(dot(again?.vector as Float32Array, plain) > 0.9999, 'embedded without its wrapper');
      assert.equal(again?.answer, 'Canberra.');
      const hit = (await second.post('/api/v1/check', { messages: [user('What is the capital of Australia?')] }, key)).json();
      assert.equal(hit.cache_type, 'semantic');
      assert.equal(hit.answer, 'Canberra.');
    } finally {
      await second.close();
    }
  });
  test('a store under way when the server closes (its client gone) is written whole, and found after a restart', async () => {
    const embedder = await sharedEmbedder();
    const own = testConfig();
    const first = await startTestApp({ config: own, embedder, keepData: true });
    await first.key('closing');
    const account = await first.runtime.ctx.store.getAccountByName('closing');
    assert.ok(account);
    const messages = [user('How many moons does Mars have?')];
    // Under way, embedding, when closing starts: the HTTP server does not wait for a request whose
    // client has gone, so the service itself must.
    const storing = first.runtime.ctx.cache.store(account, { messages, answer: 'Two: Phobos and Deimos.', model: 'gpt-4o' });
    await first.close();
    const result = await storing;

    const second = await startTestApp({ config: own, embedder });
    try {
      const key = await second.key('closing');
      const hit = (await second.post('/api/v1/check', { messages }, key)).json();
      assert.equal(hit.cache_type, 'exact', JSON.stringify(hit));
      assert.equal(hit.answer, 'Two: Phobos and Deimos.');
      assert.equal(hit.entry_id, result.entryId);
    } finally {
      await second.close();
    }
  });

  test('after a crash the index is made again while exact hits and stores are served; semantic checks miss until it is in', async () => {
    const embedder = await sharedEmbedder();
    const own = testConfig();
    const first = await startTestApp({ config: own, embedder, keepData: true });
    const key = await first.key('rebuilding');
    const account = await first.runtime.ctx.store.getAccountByName('rebuilding');
    assert.ok(account);
    const messages = [user('Which planet is known as the Red Planet?')];
    await first.post('/api/v1/store', { messages, answer: 'Mars.', model: 'gpt-4o' }, key);
    await first.close();
    // As after a crash: no snapshot, so the index is made from the database.
    rmSync(path.join(own.dataDir, 'index'), { recursive: true, force: true });

    // Not waiting for the index: the load starts on the next turn, after these calls.
    const runtime = await createRuntime(own, { embedder, indexWaitMs: 0 });
    try {
      const cache = runtime.ctx.cache;
      assert.equal(cache.indexReady, false);
      const exact = cache.check(account, { messages });
      assert.ok(!(exact instanceof Promise) && exact.cacheHit, JSON.stringify(exact));
      assert.equal(exact.answer, 'Mars.');
      const paraphrase = [user('Which planet is called the Red Planet?')];
      const early = await cache.check(account, { messages: paraphrase, similarityThreshold: 0.6 });
      assert.equal(early.cacheHit, false);
      assert.deepEqual(!early.cacheHit && early.searchResults, { exactChecked: true, semanticChecked: false, closestMatchScore: 0 });
      const stored = await cache.store(account, { messages: [user('How many moons does Mars have?')], answer: 'Two.', model: 'gpt-4o' });
      assert.deepEqual(stored.cacheTypesStored, ['exact', 'semantic']);

      await runtime.indexLoaded;
      assert.equal(cache.indexReady, true);
      assert.equal((await runtime.ctx.ready()).checks.index, 'ok');
      const later = await cache.check(account, { messages: paraphrase, similarityThreshold: 0.6 });
      assert.ok(later.cacheHit && later.cacheType === 'semantic', JSON.stringify(later));
      assert.equal(later.answer, 'Mars.');
      const moons = await cache.check(account, { messages: [user('How many moons does Mars have?')], cacheTypes: ['semantic'] });
      assert.ok(moons.cacheHit && moons.answer === 'Two.', JSON.stringify(moons));
    } finally {
      await runtime.close();
    }
  });

  test('the log line of a loaded index counts the vectors it holds, not those read on the way', async () => {
    const embedder = await sharedEmbedder();
    const own = testConfig();
    const first = await startTestApp({ config: own, embedder, keepData: true });
    await first.key('counted');
    const account = await first.runtime.ctx.store.getAccountByName('counted');
    assert.ok(account);
    // Enough entries in one partition that the load waits for its graph to be built.
    const messages = [user('What is entry number 0?')];
    const key = semanticKey(messages, '');
    const stored = [];
    for (let i = 0; i < 2100; i++) {
      const vector = Float32Array.from({ length: embedder.dimensions }, () => Math.random() - 0.5);
      const norm = Math.hypot(...vector);
      stored.push(
        first.runtime.ctx.store.putEntry({
          accountId: account.id,
          exactHash: `entry-${i}`,
          contextHash: key.contextHash,
          namespace: null,
          prefixHash: key.prefixHash,
          messages: [user(`What is entry number ${i}?`)],
          queryText: `What is entry number ${i}?`,
          prefixText: '',
          answer: `Entry ${i}.`,
          model: 'gpt-4o',
          tokens: 3,
          embedderId: vectorId(embedder),
          vector: vector.map((x) => x / norm),
          prefixVector: null,
          createdAt: new Date().toISOString(),
          expiresAt: null,
        }),
      );
    }
    const [deleted] = await Promise.all(stored);
    assert.ok(deleted);
    await first.close();
    rmSync(path.join(own.dataDir, 'index'), { recursive: true, force: true });

    const logged: { obj: object; msg: string }[] = [];
    const log = { info: (obj: object, msg: string) => logged.push({ obj, msg }), warn: () => undefined };
    const runtime = await createRuntime(own, { embedder, indexWaitMs: 0, log });
    try {
      // Deleted once the load has put it in the index, and before the load is done.
      const partition = partitionOf(account.id, key.contextHash);
      for (let turns = 0; runtime.index.stateOf(partition) !== 'promoting'; turns++) {
        assert.ok(turns < 100_000, 'the load reached the graph build');
        await nextTurn();
      }
      assert.equal(await runtime.ctx.cache.deleteEntry(account, deleted.publicId), true);
      await runtime.indexLoaded;
      assert.equal(runtime.index.size, 2099);
      const line = logged.find((l) => l.msg.startsWith('the semantic index is loaded'));
      assert.deepEqual(line && { ...line.obj, load_ms: 0 }, { vectors: 2099, load_ms: 0 });
    } finally {
      await runtime.close();
    }
  });

  test('an entry deleted while the index loads is not put in it', async () => {
    const embedder = await sharedEmbedder();
    const app = await startTestApp({ config: testConfig(), embedder });
    try {
      const key = await app.key('deleting');
      const account = await app.runtime.ctx.store.getAccountByName('deleting');
      assert.ok(account);
      await app.post('/api/v1/store', { messages: [user('What is the boiling point of water?')], answer: '100 °C.' }, key);
      const second = (await app.post('/api/v1/store', { messages: [user('Who painted the Mona Lisa?')], answer: 'Leonardo.' }, key)).json();
      const { index, ctx } = app.runtime;
      assert.equal(index.size, 2);
      // Loaded again a vector a turn: the first is in, and the load waits for the next turn.
      index.clear();
      const loading = ctx.cache.loadIndex(0, { sliceMs: 0 });
      await nextTurn();
      assert.equal(index.size, 1);
      assert.equal(await ctx.cache.deleteEntry(account, second.entry_id), true);
      await loading;
      assert.equal(index.size, 1);
      assert.equal(ctx.cache.indexReady, true);
    } finally {
      await app.close();
    }
  });
});
