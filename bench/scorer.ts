/**
 * Time of one hit decision (the calibrated scorer on one candidate), beside a plain 512-d dot
 * product measured in the same run. Texts are real prompts from ../shared/eval when present;
 * vectors are random unit vectors (the scorer's cost does not depend on their values).
 *
 *   node --import tsx bench/scorer.ts
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { CalibratedScorer, loadHitModel } from '../src/cache/calibrated.ts';
import { dot } from '../src/cache/scorer.ts';
import { seededRandom } from '../src/util/random.ts';

const ROUNDS = 9;
const PER_ROUND = 2000;
const random = seededRandom(3);

function unit(): Float32Array {
  const v = new Float32Array(512).map(() => random() - 0.5);
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
}

function prompts(): string[] {
  const file = path.join(import.meta.dirname, '..', '..', 'shared', 'eval', 'prompts_mtbench.jsonl');
  if (!existsSync(file)) return Array.from({ length: 80 }, (_, i) => `What is the capital of country number ${i}, and why?`);
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => (JSON.parse(l) as { messages: { content: string }[] }).messages[0]?.content ?? '')
    .filter((t) => t.length > 0);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

const texts = prompts();
const vectors = texts.map(() => unit());
const pairsOf = (round: number) =>
  Array.from({ length: PER_ROUND }, (_, i) => {
    const a = (i + round) % texts.length;
    const b = (i * 7 + 3 + round) % texts.length;
    return [a, b === a ? (b + 1) % texts.length : b] as const;
  });

/** Per-call microseconds of `fn` over one round of pairs. */
function round(fn: (a: number, b: number) => number, r: number): number {
  const pairs = pairsOf(r);
  let sink = 0;
  const t0 = performance.now();
  for (const [a, b] of pairs) sink += fn(a, b);
  const us = ((performance.now() - t0) * 1000) / pairs.length;
  if (Number.isNaN(sink)) throw new Error('unreachable');
  return us;
}

const model = loadHitModel();
const warm = new CalibratedScorer(model);
const dotUs: number[] = [];
const warmUs: number[] = [];
const coldUs: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  dotUs.push(round((a, b) => dot(vectors[a] as Float32Array, vectors[b] as Float32Array), r));
  // The candidate's text seen before (the memo of stored texts holds it), as for a busy account;
  // the query's text is analysed for each check. A runner-up is given, so both stages run.
  warmUs.push(
    round(
      (a, b) =>
        warm.score(
          { text: texts[a] as string, vector: vectors[a] as Float32Array },
          { text: texts[b] as string, vector: vectors[b] as Float32Array },
          0.9,
          0.85,
        ),
      r,
    ),
  );
  // Every text analysed afresh: a new scorer for each pair.
  coldUs.push(
    round(
      (a, b) =>
        new CalibratedScorer(model).score(
          { text: texts[a] as string, vector: vectors[a] as Float32Array },
          { text: texts[b] as string, vector: vectors[b] as Float32Array },
          0.9,
          0.85,
        ),
      r,
    ),
  );
}

const meanChars = Math.round(texts.reduce((s, t) => s + t.length, 0) / texts.length);
console.log(`hit decision on one candidate (${texts.length} prompts, mean ${meanChars} chars; medians of ${ROUNDS} × ${PER_ROUND})`);
console.log(`  512-d dot product (baseline)    ${median(dotUs).toFixed(2)} µs`);
console.log(
  `  calibrated, stored text known   ${median(warmUs).toFixed(1)} µs  (${(median(warmUs) / median(dotUs)).toFixed(0)} × baseline)`,
);
console.log(
  `  calibrated, both texts new      ${median(coldUs).toFixed(1)} µs  (${(median(coldUs) / median(dotUs)).toFixed(0)} × baseline)`,
);
