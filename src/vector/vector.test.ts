import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { BruteForceIndex } from './brute.ts';
import { HybridIndex, loadSnapshot, saveSnapshot } from './hnsw.ts';
import type { VectorIndex } from './interface.ts';
import { tempDir } from '../../test/helpers.ts';

/** Deterministic unit vectors. */
function randomUnit(seed: number, dims: number): Float32Array {
  let a = seed >>> 0;
  const v = new Float32Array(dims);
  let norm = 0;
  for (let i = 0; i < dims; i++) {
    a = (a * 1664525 + 1013904223) >>> 0;
    const x = a / 2 ** 32 - 0.5;
    v[i] = x;
    norm += x * x;
  }
  norm = Math.sqrt(norm);
  for (let i = 0; i < dims; i++) v[i] = (v[i] as number) / norm;
  return v;
}

function nearDuplicate(v: Float32Array, seed: number, spread = 0.15): Float32Array {
  const noise = randomUnit(seed, v.length);
  const out = v.map((x, i) => x + spread * (noise[i] as number));
  const n = Math.sqrt(out.reduce((s, x) => s + x * x, 0));
  return out.map((x) => x / n);
}

/** Lets the event loop turn once. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

for (const [name, make, settle] of [
  ['brute force', () => new BruteForceIndex(64), async () => {}],
  // A partition crossing over as it grows is built a slice an event-loop turn: these tests run
  // without a turn, so it is searched, added to and removed from while its graph is half built...
  ['hybrid, while promoting', () => new HybridIndex(64, { crossover: 50 }), async () => {}],
  // ...and once built.
  ['hybrid (HNSW above 50)', () => new HybridIndex(64, { crossover: 50 }), (index: VectorIndex) => (index as HybridIndex).promoted()],
] as const) {
  describe(`${name} index`, () => {
    const fill = async (index: VectorIndex, n: number, partition = 'p') => {
      for (let i = 1; i <= n; i++) index.add(partition, i, randomUnit(i, 64));
      await settle(index);
    };

    test('finds the nearest vector of near-duplicates, best first', async () => {
      const index = make();
      await fill(index, 400);
      let found = 0;
      for (let i = 1; i <= 400; i += 7) {
        const res = index.search('p', nearDuplicate(randomUnit(i, 64), 10_000 + i), 3);
        if (res[0]?.id === i) found++;
        assert.ok(res.length === 3 && (res[0]?.cosine ?? 0) >= (res[1]?.cosine ?? 0));
      }
      // Brute force is exact. An HNSW graph is approximate: these queries are near, not equal, to
      // what was stored, and it has missed 1 of these 58.
      const queries = Math.ceil(400 / 7);
      if (name !== 'hybrid (HNSW above 50)') assert.equal(found, queries);
      else assert.ok(found >= Math.floor(queries * 0.95), `${found} of ${queries} found`);
      assert.equal(index.size, 400);
    });

    test('never crosses partitions', async () => {
      const index = make();
      await fill(index, 100, 'a');
      index.add('b', 1000, randomUnit(1, 64));
      const res = index.search('b', randomUnit(2, 64), 5);
      assert.deepEqual(
        res.map((r) => r.id),
        [1000],
      );
      assert.deepEqual(index.search('c', randomUnit(2, 64), 5), []);
    });

    test('a removed vector is never returned; re-adding restores it', async () => {
      const index = make();
      await fill(index, 120);
      index.remove('p', 7);
      const res = index.search('p', randomUnit(7, 64), 10);
      assert.ok(!res.some((r) => r.id === 7));
      assert.equal(index.size, 119);
      index.add('p', 7, randomUnit(7, 64));
      assert.equal(index.search('p', randomUnit(7, 64), 1)[0]?.id, 7);
      assert.equal(index.size, 120);
    });

    test('a dropped partition is gone whole, whatever its state; the others are kept, and it can be filled again', async () => {
      const index = make();
      await fill(index, 120, 'gone');
      await fill(index, 3, 'kept');
      assert.deepEqual(index.partitions().sort(), ['gone', 'kept']);
      index.drop('gone');
      assert.deepEqual(index.partitions(), ['kept']);
      assert.equal(index.size, 3);
      assert.deepEqual(index.search('gone', randomUnit(7, 64), 5), []);
      assert.equal(index.search('kept', randomUnit(2, 64), 1)[0]?.id, 2);
      // A build that was under way is over: nothing comes back on later turns.
      for (let t = 0; t < 5; t++) await turn();
      await (index as Partial<HybridIndex>).promoted?.();
      assert.equal(index.size, 3);
      index.add('gone', 500, randomUnit(500, 64));
      assert.deepEqual(
        index.search('gone', randomUnit(500, 64), 5).map((r) => r.id),
        [500],
      );
      assert.equal(index.size, 4);
    });

    test('adding an id again replaces its vector', async () => {
      const index = make();
      await fill(index, 80);
      index.add('p', 3, randomUnit(999, 64));
      assert.equal(index.size, 80);
      assert.equal(index.search('p', randomUnit(999, 64), 1)[0]?.id, 3);
    });

    test('many vectors added at once are found like ones added singly, over partitions', async () => {
      const index = make();
      await fill(index, 30, 'a');
      const items = [];
      for (let i = 31; i <= 230; i++) items.push({ partition: i % 4 === 0 ? 'b' : 'a', id: i, vector: randomUnit(i, 64) });
      items.push({ partition: 'a', id: 5, vector: randomUnit(777, 64) });
      index.addMany(items);
      assert.equal(index.size, 230);
      for (const id of [1, 31, 33, 229]) assert.equal(index.search('a', nearDuplicate(randomUnit(id, 64), id), 1)[0]?.id, id);
      assert.equal(index.search('b', randomUnit(32, 64), 1)[0]?.id, 32);
      assert.equal(index.search('a', randomUnit(777, 64), 1)[0]?.id, 5);
      assert.ok(!index.search('b', randomUnit(33, 64), 60).some((n) => n.id === 33));
    });
  });
}

describe('memory', () => {
  test('partitions of one vector each (a system message per user) hold about their vectors, not a block each', () => {
    const index = new HybridIndex(512);
    const vectors = Array.from({ length: 2000 }, (_, i) => randomUnit(i + 1, 512));
    const before = process.memoryUsage().arrayBuffers;
    vectors.forEach((v, i) => index.add(`account:context ${i + 1}`, i + 1, v));
    const perVector = (process.memoryUsage().arrayBuffers - before) / index.size;
    assert.equal(index.size, 2000);
    // A vector is 2,048 bytes; each partition took 32 KB before.
    assert.ok(perVector < 4096, `${Math.round(perVector)} bytes of arrays per vector`);
  });
});

describe('HNSW graph', () => {
  test('every vector of a partition promoted or loaded at once is found by its own vector', async () => {
    // Clusters of near-duplicates, as a crowded account's questions are. Several builds: a graph
    // built on several threads left a few vectors linked to none in most of them.
    const dims = 64;
    const n = 3000;
    const vectors = Array.from({ length: n }, (_, i) => nearDuplicate(randomUnit(1 + (i % 200), dims), 50_000 + i, 0.5));
    for (let build = 0; build < 2; build++) {
      const index = new HybridIndex(dims, { crossover: 2000 });
      // A partition crosses over as it grows (one by one), another is loaded at once (at start).
      for (let i = 0; i < 2100; i++) index.add('grown', i + 1, vectors[(i + build * 97) % n] as Float32Array);
      index.addMany(vectors.map((vector, i) => ({ partition: 'loaded', id: i + 1, vector })));
      await index.promoted();
      assert.equal(index.stateOf('grown'), 'graph');
      const lost: string[] = [];
      for (let i = 0; i < 2100; i++) {
        if (index.search('grown', vectors[(i + build * 97) % n] as Float32Array, 8)[0]?.id !== i + 1) lost.push(`grown ${i + 1}`);
      }
      vectors.forEach((v, i) => {
        if (index.search('loaded', v, 8)[0]?.id !== i + 1) lost.push(`loaded ${i + 1}`);
      });
      assert.deepEqual(lost, [], `build ${build}`);
    }
  });
});

describe('promotion of a partition that grows past the crossover', () => {
  const dims = 64;
  /** Ids of a search, to compare with an exact index's. */
  const ids = (res: { id: number }[]) => res.map((r) => r.id);

  test('the partition is searched exactly while its graph is built a slice a turn, then through the graph', async () => {
    const index = new HybridIndex(dims, { crossover: 200, sliceVectors: 10 });
    const exact = new BruteForceIndex(dims);
    for (let i = 1; i <= 199; i++) {
      index.add('p', i, randomUnit(i, dims));
      exact.add('p', i, randomUnit(i, dims));
    }
    assert.equal(index.stateOf('p'), 'exact');
    // The add that reaches the crossover returns before any of the graph is built.
    index.add('p', 200, randomUnit(200, dims));
    exact.add('p', 200, randomUnit(200, dims));
    assert.equal(index.stateOf('p'), 'promoting');
    let turns = 0;
    while (index.stateOf('p') === 'promoting') {
      for (const q of [turns, 1000 + turns]) {
        const query = nearDuplicate(randomUnit(q, dims), 5000 + q, 0.5);
        assert.deepEqual(ids(index.search('p', query, 10)), ids(exact.search('p', query, 10)), `turn ${turns}`);
      }
      await turn();
      turns++;
    }
    // 200 vectors, at most 10 a turn.
    assert.ok(turns >= 20, `a graph after ${turns} turns`);
    assert.equal(index.stateOf('p'), 'graph');
    assert.equal(index.size, 200);
    for (let i = 1; i <= 200; i++) assert.equal(index.search('p', randomUnit(i, dims), 1)[0]?.id, i);
  });

  test('adds, replacements and removals during the build are what the graph holds once it serves', async () => {
    const index = new HybridIndex(dims, { crossover: 200, sliceVectors: 10 });
    const exact = new BruteForceIndex(dims);
    const live = new Map<number, Float32Array>();
    const removed = new Map<number, Float32Array>();
    const put = (id: number, vector: Float32Array) => {
      index.add('p', id, vector);
      exact.add('p', id, vector);
      live.set(id, vector);
      removed.delete(id);
    };
    const remove = (id: number) => {
      index.remove('p', id);
      exact.remove('p', id);
      const vector = live.get(id);
      if (vector) removed.set(id, vector);
      live.delete(id);
    };
    for (let i = 1; i <= 200; i++) put(i, randomUnit(i, dims));
    assert.equal(index.stateOf('p'), 'promoting');
    let step = 0;
    while (index.stateOf('p') === 'promoting') {
      // Ids the build has inserted already (low) and ones it has not reached yet (high); new ids;
      // some removed then added again, some added then removed.
      const s = step++;
      if (s < 15) {
        put(201 + s, randomUnit(201 + s, dims));
        put(1 + s, randomUnit(10_000 + s, dims));
        put(199 - s, randomUnit(20_000 + s, dims));
        remove(30 + s);
        remove(180 - s);
        remove(100 + s);
        put(100 + s, randomUnit(30_000 + s, dims));
        put(300 + s, randomUnit(300 + s, dims));
        remove(300 + s);
        put(60 + s, randomUnit(40_000 + s, dims));
        remove(60 + s);
      }
      for (const [id, vector] of removed) assert.ok(!ids(index.search('p', vector, 20)).includes(id), `removed ${id} found at step ${s}`);
      const query = randomUnit(50_000 + s, dims);
      assert.deepEqual(ids(index.search('p', query, 10)), ids(exact.search('p', query, 10)), `step ${s}`);
      await turn();
    }
    assert.ok(step > 15, `the build took ${step} turns`);
    assert.equal(index.stateOf('p'), 'graph');
    assert.equal(index.size, live.size);
    const lost: number[] = [];
    for (const [id, vector] of live) {
      const top = index.search('p', vector, 1)[0];
      if (top?.id !== id || top.cosine < 0.99) lost.push(id);
    }
    assert.deepEqual(lost, []);
    for (const [id, vector] of removed) assert.ok(!ids(index.search('p', vector, 20)).includes(id), `removed ${id} found`);
    // Replaced vectors no longer match their ids.
    for (const s of [0, 14]) assert.ok(!index.search('p', randomUnit(1 + s, dims), 5).some((n) => n.id === 1 + s && n.cosine > 0.99));
    // The graph holds the live vectors and no other.
    const dir = tempDir('reprise-promote-');
    assert.deepEqual(
      index.writeTo(dir, 'x').graphs.map((g) => g.size),
      [live.size],
    );
  });

  test('a snapshot taken during a build holds the partition whole, and loads it as a graph', async () => {
    const index = new HybridIndex(dims, { crossover: 50, sliceVectors: 5 });
    for (let i = 1; i <= 80; i++) index.add('p', i, randomUnit(i, dims));
    index.remove('p', 3);
    await turn();
    assert.equal(index.stateOf('p'), 'promoting');
    const dir = path.join(tempDir('reprise-snap-'), 'index');
    saveSnapshot(index, dir, 'embedder@1');
    const loaded = new HybridIndex(dims, { crossover: 50 });
    assert.equal(loadSnapshot(loaded, dir, 'embedder@1'), 80);
    assert.equal(loaded.size, 79);
    assert.equal(loaded.stateOf('p'), 'graph');
    for (let i = 1; i <= 80; i++) assert.equal(loaded.search('p', randomUnit(i, dims), 1)[0]?.id === i, i !== 3, `id ${i}`);
  });

  test('clear ends a build and leaves nothing; close ends it and keeps the partition exact', async () => {
    const cleared = new HybridIndex(dims, { crossover: 50, sliceVectors: 5 });
    for (let i = 1; i <= 60; i++) cleared.add('p', i, randomUnit(i, dims));
    await turn();
    cleared.clear();
    await cleared.promoted();
    for (let t = 0; t < 20; t++) await turn();
    assert.equal(cleared.stateOf('p'), null);
    assert.equal(cleared.size, 0);
    assert.deepEqual(cleared.search('p', randomUnit(1, dims), 5), []);

    const closed = new HybridIndex(dims, { crossover: 50, sliceVectors: 5 });
    const exact = new BruteForceIndex(dims);
    for (let i = 1; i <= 60; i++) {
      closed.add('p', i, randomUnit(i, dims));
      exact.add('p', i, randomUnit(i, dims));
    }
    await turn();
    closed.close();
    await closed.promoted();
    for (let i = 61; i <= 120; i++) {
      closed.add('p', i, randomUnit(i, dims));
      exact.add('p', i, randomUnit(i, dims));
    }
    for (let t = 0; t < 40; t++) await turn();
    assert.equal(closed.stateOf('p'), 'exact');
    assert.equal(closed.size, 120);
    const query = randomUnit(777, dims);
    assert.deepEqual(ids(closed.search('p', query, 10)), ids(exact.search('p', query, 10)));
  });

  test('vectors added at once to a partition being built finish its graph at once', () => {
    const index = new HybridIndex(dims, { crossover: 50, sliceVectors: 5 });
    for (let i = 1; i <= 60; i++) index.add('p', i, randomUnit(i, dims));
    index.remove('p', 10);
    index.add('p', 20, randomUnit(2020, dims));
    index.addMany(Array.from({ length: 40 }, (_, i) => ({ partition: 'p', id: 61 + i, vector: randomUnit(61 + i, dims) })));
    assert.equal(index.stateOf('p'), 'graph');
    assert.equal(index.size, 99);
    for (let i = 1; i <= 100; i++) {
      const vector = randomUnit(i === 20 ? 2020 : i, dims);
      assert.equal(index.search('p', vector, 1)[0]?.id === i, i !== 10, `id ${i}`);
    }
  });
});

describe('index snapshot', () => {
  const build = async () => {
    const index = new HybridIndex(64, { crossover: 50 });
    for (let i = 1; i <= 120; i++) index.add('big', i, randomUnit(i, 64));
    await index.promoted();
    for (let i = 121; i <= 130; i++) index.add('small', i, randomUnit(i, 64));
    index.remove('big', 7);
    index.remove('small', 125);
    return index;
  };

  test('a saved index loads once, with the same contents, removals and watermark', async () => {
    const dir = path.join(tempDir('reprise-snap-'), 'index');
    const before = await build();
    saveSnapshot(before, dir, 'embedder@1');
    const after = new HybridIndex(64, { crossover: 50 });
    assert.equal(loadSnapshot(after, dir, 'embedder@1'), 130);
    assert.equal(after.size, 128);
    assert.equal(loadSnapshot(new HybridIndex(64, { crossover: 50 }), dir, 'embedder@1'), null, 'a snapshot is used once');
    for (const id of [1, 60, 120]) assert.equal(after.search('big', nearDuplicate(randomUnit(id, 64), id + 1000), 1)[0]?.id, id);
    assert.equal(after.search('small', randomUnit(123, 64), 1)[0]?.id, 123);
    assert.ok(!after.search('big', randomUnit(7, 64), 5).some((n) => n.id === 7));
    assert.ok(!after.search('small', randomUnit(125, 64), 10).some((n) => n.id === 125));
    // The loaded index keeps working: adds and removals after the load.
    after.add('big', 500, randomUnit(500, 64));
    after.remove('big', 1);
    assert.equal(after.search('big', randomUnit(500, 64), 1)[0]?.id, 500);
    assert.ok(!after.search('big', randomUnit(1, 64), 5).some((n) => n.id === 1));
  });

  test('a snapshot loaded to be kept stays on disk, whole, with the watermark it was saved with', async () => {
    const dir = path.join(tempDir('reprise-snap-'), 'index');
    saveSnapshot(await build(), dir, 'embedder@1', 'state-1', 4242);
    for (let start = 0; start < 2; start++) {
      const index = new HybridIndex(64, { crossover: 50 });
      assert.equal(loadSnapshot(index, dir, 'embedder@1', 'state-1', true), 4242);
      assert.equal(index.size, 128);
      assert.equal(index.search('big', nearDuplicate(randomUnit(60, 64), 1060), 1)[0]?.id, 60);
    }
    assert.ok(!existsSync(`${dir}.loading`));
    assert.equal(loadSnapshot(new HybridIndex(64, { crossover: 50 }), dir, 'embedder@1', 'state-1'), 4242);
    assert.ok(!existsSync(dir), 'loaded without keeping it: used once');
  });

  test('a snapshot is loaded only with the token it was saved with, and is gone after any other', async () => {
    const dir = path.join(tempDir('reprise-snap-'), 'index');
    saveSnapshot(await build(), dir, 'embedder@1', 'state-1');
    const other = new HybridIndex(64, { crossover: 50 });
    assert.equal(loadSnapshot(other, dir, 'embedder@1', 'state-2'), null);
    assert.equal(other.size, 0);
    assert.equal(existsSync(dir), false);
    saveSnapshot(await build(), dir, 'embedder@1', 'state-1');
    assert.equal(loadSnapshot(new HybridIndex(64, { crossover: 50 }), dir, 'embedder@1', null), null, 'a database without a token');
    saveSnapshot(await build(), dir, 'embedder@1', 'state-1');
    assert.equal(loadSnapshot(new HybridIndex(64, { crossover: 50 }), dir, 'embedder@1', 'state-1'), 130);
  });

  test('a save killed between its two renames leaves the old and the new snapshot, and the one of the token is loaded and put in place', async () => {
    for (const [token, watermark] of [
      ['state-1', 100],
      ['state-2', 200],
    ] as const) {
      const dir = path.join(tempDir('reprise-snap-'), 'index');
      saveSnapshot(await build(), dir, 'embedder@1', 'state-1', 100);
      // What the second save leaves when killed after its first rename: the old snapshot moved
      // aside, the new one whole beside it, none in place.
      const newer = await build();
      newer.add('small', 131, randomUnit(131, 64));
      saveSnapshot(newer, `${dir}-second`, 'embedder@1', 'state-2', 200);
      renameSync(dir, `${dir}.old`);
      renameSync(`${dir}-second`, `${dir}.new`);
      const index = new HybridIndex(64, { crossover: 50 });
      assert.equal(loadSnapshot(index, dir, 'embedder@1', token, true), watermark, token);
      assert.equal(index.size, token === 'state-1' ? 128 : 129);
      assert.equal(index.search('big', nearDuplicate(randomUnit(60, 64), 1060), 1)[0]?.id, 60);
      assert.ok(!existsSync(`${dir}.old`) && !existsSync(`${dir}.new`), 'the other is gone');
      // In place, and loaded again at the next start.
      assert.equal(loadSnapshot(new HybridIndex(64, { crossover: 50 }), dir, 'embedder@1', token, true), watermark);
    }
  });

  test('a snapshot of another embedder, another shape, or none is not loaded', async () => {
    const dir = path.join(tempDir('reprise-snap-'), 'index');
    assert.equal(loadSnapshot(new HybridIndex(64), dir, 'embedder@1'), null);
    saveSnapshot(await build(), dir, 'embedder@1');
    const other = new HybridIndex(64);
    assert.equal(loadSnapshot(other, dir, 'embedder@2'), null);
    assert.equal(other.size, 0);
    assert.equal(loadSnapshot(new HybridIndex(32), dir, 'embedder@1'), null);
    // Saving again replaces the snapshot whole.
    const smaller = new HybridIndex(64, { crossover: 50 });
    smaller.add('small', 1, randomUnit(1, 64));
    saveSnapshot(smaller, dir, 'embedder@1');
    const loaded = new HybridIndex(64, { crossover: 50 });
    assert.equal(loadSnapshot(loaded, dir, 'embedder@1'), 1);
    assert.equal(loaded.size, 1);
  });

  test('a snapshot whose vector file was cut short is not loaded, even at a record boundary', () => {
    for (const cut of ['empty', 'one partition less']) {
      const dir = path.join(tempDir('reprise-snap-'), 'index');
      const index = new HybridIndex(64, { crossover: 50 });
      for (let i = 1; i <= 10; i++) index.add(i <= 5 ? 'a' : 'b', i, randomUnit(i, 64));
      saveSnapshot(index, dir, 'embedder@1');
      const file = path.join(dir, 'flat.bin');
      const bytes = readFileSync(file);
      // Each partition's record: 8 header bytes, its name, then 5 ids and 5 vectors.
      const record = 8 + 1 + 5 * 8 + 5 * 64 * 4;
      writeFileSync(file, cut === 'empty' ? Buffer.alloc(0) : bytes.subarray(0, record));
      const after = new HybridIndex(64, { crossover: 50 });
      assert.equal(loadSnapshot(after, dir, 'embedder@1'), null, cut);
      assert.equal(after.size, 0, cut);
    }
  });

  /** Bytes that are no usearch graph: what a damaged disk or another build's format could leave. */
  const garbage = (n: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 131) & 255));

  /** Loads the snapshot in a process of its own, as a server's start does: a native abort ends that process only. */
  const loadInChild = (dir: string) => {
    const module = new URL('./hnsw.ts', import.meta.url).href;
    const code = `const { HybridIndex, loadSnapshot } = await import(${JSON.stringify(module)});
      const index = new HybridIndex(64, { crossover: 50 });
      console.log(JSON.stringify({ watermark: loadSnapshot(index, ${JSON.stringify(dir)}, 'embedder@1'), size: index.size }));`;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { encoding: 'utf8' });
    return { status: r.status, out: r.stdout.trim(), err: r.stderr };
  };

  test('a snapshot with a damaged file is not loaded, and is gone: the index is rebuilt from the store', async () => {
    // A vector file of the right length whose bytes changed: read as it is, its vectors are scores no embedder made.
    const flatDir = path.join(tempDir('reprise-snap-'), 'index');
    saveSnapshot(await build(), flatDir, 'embedder@1');
    const flat = readFileSync(path.join(flatDir, 'flat.bin'));
    flat.fill(0x3f, 100, 200);
    writeFileSync(path.join(flatDir, 'flat.bin'), flat);
    const after = new HybridIndex(64, { crossover: 50 });
    assert.equal(loadSnapshot(after, flatDir, 'embedder@1'), null);
    assert.equal(after.size, 0);
    assert.equal(existsSync(flatDir), false);

    // A graph file overwritten: usearch's loader aborts the process on some such bytes.
    const graphDir = path.join(tempDir('reprise-snap-'), 'index');
    saveSnapshot(await build(), graphDir, 'embedder@1');
    const graph = path.join(graphDir, 'graph-0.usearch');
    writeFileSync(graph, garbage(readFileSync(graph).length));
    const loaded = loadInChild(graphDir);
    assert.equal(loaded.status, 0, loaded.err);
    assert.deepEqual(JSON.parse(loaded.out), { watermark: null, size: 0 });
    assert.equal(existsSync(graphDir), false);
  });

  test('a snapshot whose loading ended the process is not tried again at the next start', async () => {
    const dir = path.join(tempDir('reprise-snap-'), 'index');
    saveSnapshot(await build(), dir, 'embedder@1');
    // A graph its digest vouches for that the loader still cannot read (written by another build
    // of it, say): the first start ends there.
    const graph = path.join(dir, 'graph-0.usearch');
    const bytes = garbage(readFileSync(graph).length);
    writeFileSync(graph, bytes);
    const manifestFile = path.join(dir, 'manifest.json');
    const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as { digests?: Record<string, string> };
    manifest.digests = { ...manifest.digests, 'graph-0.usearch': createHash('sha256').update(bytes).digest('hex') };
    writeFileSync(manifestFile, JSON.stringify(manifest));
    const first = loadInChild(dir);
    assert.notEqual(first.status, 0, first.out);
    const second = loadInChild(dir);
    assert.equal(second.status, 0, second.err);
    assert.deepEqual(JSON.parse(second.out), { watermark: null, size: 0 });
    assert.equal(existsSync(dir), false);
    assert.equal(existsSync(`${dir}.loading`), false);
  });
});
