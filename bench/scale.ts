import { performance } from 'node:perf_hooks';
import { mkdtempSync, rmSync, statSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { HybridIndex, loadSnapshot, saveSnapshot } from '../src/vector/hnsw.ts';
import { seededRandom as rng } from '../src/util/random.ts';

export interface ScaleResult {
  size: number;
  p50: number;
  p99: number;
  bruteP50: number;
  recall: number;
  bytesPerEntry: number;
  buildSeconds: number;
  /** Writing the index snapshot (done at shutdown). */
  saveSeconds: number;
  /** Loading the snapshot into a new index and serving the first search (done at start). */
  loadSeconds: number;
  snapshotBytesPerEntry: number;
}

const DIMS = 512;

function unit(v: Float32Array): Float32Array {
  let n = 0;
  for (const x of v) n += x * x;
  n = Math.sqrt(n);
  for (let i = 0; i < v.length; i++) v[i] = (v[i] as number) / n;
  return v;
}

/**
 * Vector i: a topic centre (one per 50 entries, like questions on the same subject) plus its
 * own offset, unit length. Regenerated from i alone, so nothing but the index holds them.
 */
function vectorOf(i: number, centres: Float32Array[]): Float32Array {
  const r = rng(i + 1);
  const c = centres[i % centres.length] as Float32Array;
  const v = new Float32Array(DIMS);
  for (let d = 0; d < DIMS; d++) v[d] = (c[d] as number) + 0.6 * (r() - 0.5);
  return unit(v);
}

function dot(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < DIMS; i++) s += (a[i] as number) * (b[i] as number);
  return s;
}

/** Builds an index of `size` generated vectors; measures search, recall@1 on near-duplicates, memory. */
export async function indexScale(size: number, queries = size >= 1_000_000 ? 50 : 100): Promise<ScaleResult> {
  const r = rng(12345);
  const centres = Array.from({ length: Math.max(1, Math.floor(size / 50)) }, () =>
    unit(Float32Array.from({ length: DIMS }, () => r() - 0.5)),
  );
  global.gc?.();
  const rssBefore = process.memoryUsage().rss;
  const index = new HybridIndex(DIMS, { crossover: 2000 });
  const t0 = performance.now();
  // In chunks, as a start-up without a snapshot reads them from the store.
  for (let start = 0; start < size; start += 5000) {
    const items = [];
    for (let i = start; i < Math.min(size, start + 5000); i++) items.push({ partition: 'bench', id: i, vector: vectorOf(i, centres) });
    index.addMany(items);
  }
  const buildSeconds = (performance.now() - t0) / 1000;
  global.gc?.();
  const bytesPerEntry = (process.memoryUsage().rss - rssBefore) / size;

  // Start-up: the snapshot written at shutdown, loaded into a fresh index, then one search.
  const snapDir = mkdtempSync(path.join(tmpdir(), 'reprise-scale-'));
  const s0 = performance.now();
  saveSnapshot(index, path.join(snapDir, 'index'), 'bench');
  const saveSeconds = (performance.now() - s0) / 1000;
  const snapshotBytes = readdirSync(path.join(snapDir, 'index')).reduce((sum, f) => sum + statSync(path.join(snapDir, 'index', f)).size, 0);
  const l0 = performance.now();
  const reloaded = new HybridIndex(DIMS, { crossover: 2000 });
  if (loadSnapshot(reloaded, path.join(snapDir, 'index'), 'bench') === null) throw new Error('snapshot did not load');
  reloaded.search('bench', vectorOf(0, centres), 1);
  const loadSeconds = (performance.now() - l0) / 1000;
  rmSync(snapDir, { recursive: true, force: true });

  // The brute-force reference holds every vector, allocated after the memory reading.
  const ref = new Float32Array(size * DIMS);
  for (let i = 0; i < size; i++) ref.set(vectorOf(i, centres), i * DIMS);
  const times: number[] = [];
  const bruteTimes: number[] = [];
  let agree = 0;
  const q = rng(999);
  for (let k = 0; k < queries; k++) {
    const target = Math.floor(q() * size);
    const query = vectorOf(target, centres);
    for (let d = 0; d < DIMS; d++) query[d] = (query[d] as number) + 0.01 * (q() - 0.5);
    unit(query);
    const s = performance.now();
    const got = reloaded.search('bench', query, 1)[0];
    times.push(performance.now() - s);
    const b0 = performance.now();
    let best = -1;
    let bestScore = -2;
    for (let i = 0; i < size; i++) {
      const sc = dot(query, ref.subarray(i * DIMS, (i + 1) * DIMS));
      if (sc > bestScore) {
        bestScore = sc;
        best = i;
      }
    }
    bruteTimes.push(performance.now() - b0);
    if (got?.id === best) agree++;
  }
  times.sort((a, b) => a - b);
  bruteTimes.sort((a, b) => a - b);
  return {
    size,
    p50: times[Math.floor(times.length / 2)] as number,
    p99: times[Math.floor(times.length * 0.99)] as number,
    bruteP50: bruteTimes[Math.floor(bruteTimes.length / 2)] as number,
    recall: agree / queries,
    bytesPerEntry,
    buildSeconds,
    saveSeconds,
    loadSeconds,
    snapshotBytesPerEntry: snapshotBytes / size,
  };
}
