import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
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

for (const [name, make] of [
  ['brute force', () => new BruteForceIndex(64)],
  ['hybrid (HNSW above 50)', () => new HybridIndex(64, { crossover: 50 })],
] as const) {
  describe(`${name} index`, () => {
    const fill = (index: VectorIndex, n: number, partition = 'p') => {
      for (let i = 1; i <= n; i++) index.add(partition, i, randomUnit(i, 64));
    };

    test('finds the nearest vector of near-duplicates, best first', () => {
      const index = make();
      fill(index, 400);
      let found = 0;
      for (let i = 1; i <= 400; i += 7) {
        const res = index.search('p', nearDuplicate(randomUnit(i, 64), 10_000 + i), 3);
        if (res[0]?.id === i) found++;
        assert.ok(res.length === 3 && (res[0]?.cosine ?? 0) >= (res[1]?.cosine ?? 0));
      }
      // Brute force is exact. An HNSW graph is approximate: these queries are near, not equal, to
      // what was stored, and it has missed 1 of these 58.
      const queries = Math.ceil(400 / 7);
      if (name === 'brute force') assert.equal(found, queries);
      else assert.ok(found >= Math.floor(queries * 0.95), `${found} of ${queries} found`);
      assert.equal(index.size, 400);
    });

    test('never crosses partitions', () => {
      const index = make();
      fill(index, 100, 'a');
      index.add('b', 1000, randomUnit(1, 64));
      const res = index.search('b', randomUnit(2, 64), 5);
      assert.deepEqual(
        res.map((r) => r.id),
        [1000],
      );
      assert.deepEqual(index.search('c', randomUnit(2, 64), 5), []);
    });

    test('a removed vector is never returned; re-adding restores it', () => {
      const index = make();
      fill(index, 120);
      index.remove('p', 7);
      const res = index.search('p', randomUnit(7, 64), 10);
      assert.ok(!res.some((r) => r.id === 7));
      assert.equal(index.size, 119);
      index.add('p', 7, randomUnit(7, 64));
      assert.equal(index.search('p', randomUnit(7, 64), 1)[0]?.id, 7);
      assert.equal(index.size, 120);
    });

    test('adding an id again replaces its vector', () => {
      const index = make();
      fill(index, 80);
      index.add('p', 3, randomUnit(999, 64));
      assert.equal(index.size, 80);
      assert.equal(index.search('p', randomUnit(999, 64), 1)[0]?.id, 3);
    });

    test('many vectors added at once are found like ones added singly, over partitions', () => {
      const index = make();
      fill(index, 30, 'a');
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
  test('every vector of a partition promoted or loaded at once is found by its own vector', () => {
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

describe('index snapshot', () => {
  const build = () => {
    const index = new HybridIndex(64, { crossover: 50 });
    for (let i = 1; i <= 120; i++) index.add('big', i, randomUnit(i, 64));
    for (let i = 121; i <= 130; i++) index.add('small', i, randomUnit(i, 64));
    index.remove('big', 7);
    index.remove('small', 125);
    return index;
  };

  test('a saved index loads once, with the same contents, removals and watermark', () => {
    const dir = path.join(tempDir('reprise-snap-'), 'index');
    const before = build();
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

  test('a snapshot is loaded only with the token it was saved with, and is gone after any other', () => {
    const dir = path.join(tempDir('reprise-snap-'), 'index');
    saveSnapshot(build(), dir, 'embedder@1', 'state-1');
    const other = new HybridIndex(64, { crossover: 50 });
    assert.equal(loadSnapshot(other, dir, 'embedder@1', 'state-2'), null);
    assert.equal(other.size, 0);
    assert.equal(existsSync(dir), false);
    saveSnapshot(build(), dir, 'embedder@1', 'state-1');
    assert.equal(loadSnapshot(new HybridIndex(64, { crossover: 50 }), dir, 'embedder@1', null), null, 'a database without a token');
    saveSnapshot(build(), dir, 'embedder@1', 'state-1');
    assert.equal(loadSnapshot(new HybridIndex(64, { crossover: 50 }), dir, 'embedder@1', 'state-1'), 130);
  });

  test('a snapshot of another embedder, another shape, or none is not loaded', () => {
    const dir = path.join(tempDir('reprise-snap-'), 'index');
    assert.equal(loadSnapshot(new HybridIndex(64), dir, 'embedder@1'), null);
    saveSnapshot(build(), dir, 'embedder@1');
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

  test('a snapshot with a damaged file is not loaded, and is gone: the index is rebuilt from the store', () => {
    // A vector file of the right length whose bytes changed: read as it is, its vectors are scores no embedder made.
    const flatDir = path.join(tempDir('reprise-snap-'), 'index');
    saveSnapshot(build(), flatDir, 'embedder@1');
    const flat = readFileSync(path.join(flatDir, 'flat.bin'));
    flat.fill(0x3f, 100, 200);
    writeFileSync(path.join(flatDir, 'flat.bin'), flat);
    const after = new HybridIndex(64, { crossover: 50 });
    assert.equal(loadSnapshot(after, flatDir, 'embedder@1'), null);
    assert.equal(after.size, 0);
    assert.equal(existsSync(flatDir), false);

    // A graph file overwritten: usearch's loader aborts the process on some such bytes.
    const graphDir = path.join(tempDir('reprise-snap-'), 'index');
    saveSnapshot(build(), graphDir, 'embedder@1');
    const graph = path.join(graphDir, 'graph-0.usearch');
    writeFileSync(graph, garbage(readFileSync(graph).length));
    const loaded = loadInChild(graphDir);
    assert.equal(loaded.status, 0, loaded.err);
    assert.deepEqual(JSON.parse(loaded.out), { watermark: null, size: 0 });
    assert.equal(existsSync(graphDir), false);
  });

  test('a snapshot whose loading ended the process is not tried again at the next start', () => {
    const dir = path.join(tempDir('reprise-snap-'), 'index');
    saveSnapshot(build(), dir, 'embedder@1');
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
