import { performance } from 'node:perf_hooks';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import usearch, { type Matches } from 'usearch';
import { createUseLiteEmbedder } from '../src/embedding/use-lite.ts';
import { HybridIndex, loadSnapshot, saveSnapshot } from '../src/vector/hnsw.ts';
import { seededRandom as rng } from '../src/util/random.ts';

export interface ScaleResult {
  size: number;
  vectors: VectorSource;
  queries: number;
  p50: number;
  p99: number;
  /** One exact scan of every vector (usearch, SIMD, one thread): the search without a graph. */
  exactP50: number;
  recall: number;
  bytesPerEntry: number;
  buildSeconds: number;
  /** Writing the index snapshot (done at shutdown). */
  saveSeconds: number;
  /** Loading the snapshot into a new index and serving the first search (done at start). */
  loadSeconds: number;
  snapshotBytesPerEntry: number;
}

/**
 * How the stored vectors are made:
 * - `sentences`: each is a mix of two real sentence embeddings (USE-lite vectors of the questions,
 *   sentences and prompts in `../shared/eval`, about 30,000 texts): 60-90 % of one, the rest of
 *   another, plus a little noise. They lie where real embeddings lie, with their clusters and
 *   their uneven spread, and every real text has dozens of close variants (like paraphrases).
 * - `random`: a topic centre (one per 50 entries) plus a larger per-entry offset: close to random
 *   directions, where all distances look alike (a worst case for any graph index).
 */
export type VectorSource = 'sentences' | 'random';

const DIMS = 512;

function unit(v: Float32Array): Float32Array {
  let n = 0;
  for (const x of v) n += x * x;
  n = Math.sqrt(n);
  for (let i = 0; i < v.length; i++) v[i] = (v[i] as number) / n;
  return v;
}

/** The texts of the evaluation data: both sides of every pair and the first turn of every prompt. */
function evalTexts(evalDir: string): string[] {
  const texts = new Set<string>();
  for (const file of readdirSync(evalDir).filter((f) => f.endsWith('.jsonl'))) {
    for (const line of readFileSync(path.join(evalDir, file), 'utf8').split('\n')) {
      if (!line) continue;
      const row = JSON.parse(line) as { a?: unknown; b?: unknown; messages?: { content: string }[] };
      for (const t of [row.a, row.b, row.messages?.[0]?.content]) if (typeof t === 'string' && t.trim()) texts.add(t.slice(0, 2000));
    }
  }
  return [...texts];
}

/** USE-lite vectors of the evaluation texts, computed once and kept in the temporary folder. */
async function sentenceVectors(evalDir: string): Promise<Float32Array> {
  const texts = evalTexts(evalDir);
  const key = createHash('sha256').update(texts.join('\u0000')).digest('hex').slice(0, 16);
  const file = path.join(tmpdir(), `reprise-bench-sentences-${key}.f32`);
  if (existsSync(file)) {
    const b = readFileSync(file);
    return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
  }
  const embedder = await createUseLiteEmbedder({ memoSize: 0 });
  const out = new Float32Array(texts.length * DIMS);
  try {
    for (let i = 0; i < texts.length; i += 256) {
      const vs = await embedder.embed(texts.slice(i, i + 256));
      vs.forEach((v, j) => out.set(v, (i + j) * DIMS));
    }
  } finally {
    await embedder.close();
  }
  writeFileSync(file, out);
  return out;
}

type Generator = (i: number) => Float32Array;

async function generator(source: VectorSource, size: number, evalDir: string): Promise<Generator> {
  if (source === 'sentences') {
    const base = await sentenceVectors(evalDir);
    const n = base.length / DIMS;
    return (i) => {
      const r = rng(i + 1);
      const a = Math.floor(r() * n) * DIMS;
      const b = Math.floor(r() * n) * DIMS;
      const w = 0.1 + 0.3 * r();
      const v = new Float32Array(DIMS);
      for (let d = 0; d < DIMS; d++) v[d] = (1 - w) * (base[a + d] as number) + w * (base[b + d] as number) + 0.02 * (r() - 0.5);
      return unit(v);
    };
  }
  const r = rng(12345);
  const centres = Array.from({ length: Math.max(1, Math.floor(size / 50)) }, () =>
    unit(Float32Array.from({ length: DIMS }, () => r() - 0.5)),
  );
  return (i) => {
    const ri = rng(i + 1);
    const c = centres[i % centres.length] as Float32Array;
    const v = new Float32Array(DIMS);
    for (let d = 0; d < DIMS; d++) v[d] = (c[d] as number) + 0.6 * (ri() - 0.5);
    return unit(v);
  };
}

/**
 * Builds an index of `size` generated vectors (regenerated from their number alone, so nothing
 * but the index holds them while memory is measured); measures search, recall@1 on
 * near-duplicates (a stored vector with 1 % noise) against an exact scan, memory and start-up.
 */
export async function indexScale(size: number, source: VectorSource, evalDir: string, queries = 1000): Promise<ScaleResult> {
  const vectorOf = await generator(source, size, evalDir);
  global.gc?.();
  const rssBefore = process.memoryUsage().rss;
  const index = new HybridIndex(DIMS, { crossover: 2000 });
  const t0 = performance.now();
  // In chunks, as a start-up without a snapshot reads them from the store.
  for (let start = 0; start < size; start += 5000) {
    const items = [];
    for (let i = start; i < Math.min(size, start + 5000); i++) items.push({ partition: 'bench', id: i, vector: vectorOf(i) });
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
  reloaded.search('bench', vectorOf(0), 1);
  const loadSeconds = (performance.now() - l0) / 1000;
  rmSync(snapDir, { recursive: true, force: true });

  // The exact reference holds every vector, allocated after the memory reading.
  const ref = new Float32Array(size * DIMS);
  for (let i = 0; i < size; i++) ref.set(vectorOf(i), i * DIMS);
  const times: number[] = [];
  const exactTimes: number[] = [];
  let agree = 0;
  const q = rng(999);
  for (let k = 0; k < queries; k++) {
    const target = Math.floor(q() * size);
    const query = vectorOf(target);
    for (let d = 0; d < DIMS; d++) query[d] = (query[d] as number) + 0.01 * (q() - 0.5);
    unit(query);
    const s = performance.now();
    const got = reloaded.search('bench', query, 1)[0];
    times.push(performance.now() - s);
    const e0 = performance.now();
    const exact = usearch.exactSearch(ref, query, DIMS, 1, usearch.MetricKind.IP, 1) as Matches;
    exactTimes.push(performance.now() - e0);
    if (got?.id === Number(exact.keys[0])) agree++;
  }
  times.sort((a, b) => a - b);
  exactTimes.sort((a, b) => a - b);
  return {
    size,
    vectors: source,
    queries,
    p50: times[Math.floor(times.length / 2)] as number,
    p99: times[Math.floor(times.length * 0.99)] as number,
    exactP50: exactTimes[Math.floor(exactTimes.length / 2)] as number,
    recall: agree / queries,
    bytesPerEntry,
    buildSeconds,
    saveSeconds,
    loadSeconds,
    snapshotBytesPerEntry: snapshotBytes / size,
  };
}

/**
 * One measurement in a process of its own, so the memory reading sees nothing of earlier ones:
 * `node --expose-gc --import tsx bench/scale.ts <size> <sentences|random> <eval dir>` prints the
 * result as JSON.
 */
export function indexScaleInChild(size: number, source: VectorSource, evalDir: string): Promise<ScaleResult> {
  const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', fileURLToPath(import.meta.url), String(size), source, evalDir], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) reject(new Error(`index scale ${size} (${source}) exited with ${code}`));
      else resolve(JSON.parse(out.trim().split('\n').pop() as string) as ScaleResult);
    });
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [size, source, evalDir] = process.argv.slice(2);
  const r = await indexScale(Number(size), source as VectorSource, evalDir as string);
  process.stdout.write(`${JSON.stringify(r)}\n`);
}
