/**
 * How long the event loop is held while a partition of 512-dimension vectors crosses the
 * crossover (2,000) as it grows: 1,999 vectors are added, then, one add a turn of the event loop
 * (`setImmediate`), the 2,000th and 299 more, with a search every 10 turns, until the partition
 * is served by its graph. Prints, per run and their median:
 * - the longest turn, in wall time: on a busy machine it includes time the process was not
 *   running, and garbage collections (5–40 ms here, with or without a graph being built);
 * - the longest turn no garbage collection fell in;
 * - the most CPU time the main thread spent in such a turn (Linux), which the machine's other
 *   work does not inflate;
 * - the time from the crossing add to the graph serving.
 * `--control` does the same with the crossover out of reach (no graph): what the loop, the
 * collector and the machine cost alone. Another `hnsw.ts` (an older build's, beside its
 * `brute.ts` and `interface.ts`) can be given to compare.
 *
 *   node --import tsx bench/promotion.ts [--runs 7] [--control] [path/to/hnsw.ts]
 */
import { existsSync, readFileSync } from 'node:fs';
import { PerformanceObserver } from 'node:perf_hooks';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { HybridIndex as Hybrid, HnswOptions } from '../src/vector/hnsw.ts';

const args = process.argv.slice(2);
const runsAt = args.indexOf('--runs');
const runs = runsAt >= 0 ? Number(args[runsAt + 1]) : 7;
const control = args.includes('--control');
const file = args.find((a, i) => a.endsWith('.ts') && args[i - 1] !== '--runs');
const module = file ? pathToFileURL(path.resolve(file)).href : new URL('../src/vector/hnsw.ts', import.meta.url).href;
const { HybridIndex } = (await import(module)) as { HybridIndex: new (dims: number, opts: HnswOptions) => Hybrid };

const DIMS = 512;
const CROSSOVER = 2000;
const TURNS = 300;

function unit(seed: number): Float32Array {
  let x = (seed * 2654435761) % 2147483647;
  const v = new Float32Array(DIMS);
  let norm = 0;
  for (let i = 0; i < DIMS; i++) {
    x = (x * 48271) % 2147483647;
    v[i] = x / 2147483647 - 0.5;
    norm += (v[i] as number) ** 2;
  }
  norm = Math.sqrt(norm);
  return v.map((a) => a / norm);
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)] as number;
const ms = (a: number[], digits = 1) => `${a.map((x) => x.toFixed(digits)).join(' ')}  (median ${median(a).toFixed(digits)})`;

/** Garbage collections, as [start, end] in performance.now() time. */
const collections: [number, number][] = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) collections.push([e.startTime, e.startTime + e.duration]);
}).observe({ entryTypes: ['gc'] });

/** CPU time of the main thread so far, in ms (Linux: what the scheduler counts, not the wall time). */
const schedstat = `/proc/self/task/${process.pid}/schedstat`;
const threadCpu = existsSync(schedstat) ? () => Number(readFileSync(schedstat, 'utf8').split(' ')[0]) / 1e6 : null;

const longest: number[] = [];
const longestWithoutGc: number[] = [];
const cpuWithoutGc: number[] = [];
const toGraph: number[] = [];
for (let r = 0; r < runs; r++) {
  const index = new HybridIndex(DIMS, { crossover: control ? Infinity : CROSSOVER });
  for (let i = 1; i < CROSSOVER; i++) index.add('p', i, unit(i + r * 7919));
  await new Promise((resolve) => setTimeout(resolve, 20));
  /** Each turn: its start and end (performance.now()) and the main thread's CPU time in it. */
  const turns: { start: number; end: number; cpu: number }[] = [];
  let last = performance.now();
  let lastCpu = threadCpu?.() ?? 0;
  let crossed = 0;
  let graphAfter = 0;
  for (let t = 0; t < TURNS || !graphAfter; t++) {
    await turn();
    const now = performance.now();
    const nowCpu = threadCpu?.() ?? 0;
    turns.push({ start: last, end: now, cpu: nowCpu - lastCpu });
    last = now;
    lastCpu = nowCpu;
    if (t === 0) {
      crossed = performance.now();
      index.add('p', CROSSOVER, unit(99_999 + r));
    } else if (t < TURNS) index.add('p', CROSSOVER + t, unit(200_000 + t + r * 7919));
    if (t % 10 === 0) index.search('p', unit(5 + t), 5);
    // An older build has no stateOf: its graph serves from the crossing add on.
    const graph = control || typeof index.stateOf !== 'function' || index.stateOf('p') === 'graph';
    if (graph && !graphAfter) graphAfter = performance.now() - crossed;
  }
  if (index.size !== CROSSOVER + TURNS - 1) throw new Error(`the index holds ${index.size} vectors`);
  // The observer hears of the last collections after this turn.
  await new Promise((resolve) => setTimeout(resolve, 50));
  const clean = turns.filter((u) => !collections.some(([start, end]) => start < u.end && end > u.start));
  collections.length = 0;
  longest.push(Math.max(...turns.map((u) => u.end - u.start)));
  longestWithoutGc.push(Math.max(...clean.map((u) => u.end - u.start)));
  cpuWithoutGc.push(Math.max(...clean.map((u) => u.cpu)));
  toGraph.push(graphAfter);
}
console.log(`${control ? 'control, no crossing' : path.relative(process.cwd(), new URL(module).pathname)}, ${runs} runs`);
console.log(`longest turn (ms):                          ${ms(longest)}`);
console.log(`longest turn without GC (ms):               ${ms(longestWithoutGc)}`);
if (threadCpu) console.log(`most main-thread CPU, turn without GC (ms): ${ms(cpuWithoutGc)}`);
if (!control) console.log(`crossing add to graph (ms):                 ${ms(toGraph, 0)}`);
