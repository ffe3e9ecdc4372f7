import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BruteForceIndex } from './brute.ts';
import { HybridIndex } from './hnsw.ts';
import type { VectorIndex } from './interface.ts';

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

function nearDuplicate(v: Float32Array, seed: number): Float32Array {
  const noise = randomUnit(seed, v.length);
  const out = v.map((x, i) => x + 0.15 * (noise[i] as number));
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
      assert.equal(found, Math.ceil(400 / 7));
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
  });
}
