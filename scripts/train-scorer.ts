/**
 * Trains the hit model (src/cache/hit-model.json) on the development pair files only:
 * 1. an ensemble of small neural networks (or, with --hidden 0, logistic regressions) over
 *    hand-made pair features and the element-wise product and absolute difference of the two
 *    USE-lite vectors, cross-validated in 3 folds (a pair's texts and every other pair of those
 *    texts fall in the same fold) and reported beside raw cosine;
 * 2. the neighbourhood stage, a small network fitted on crowded use: every `a` of a file
 *    stored, every `b` checked, the nearest entry scored by the fold model that never saw `b`,
 *    with how much nearer it is than the runner-up; cross-validated and reported the same way.
 * Then the first stage is trained on all rows and both are written.
 *
 *   node --import tsx scripts/train-scorer.ts [--data DIR] [--out FILE] [--hidden 32]
 *     [--epochs 30] [--l2 0.0001] [--ensemble 3] [--no-skip] [--weighting rows|sqrt|sources] [--no-write]
 *     [--crowded-out FILE]   (the held-out crowded checks the neighbourhood stage is fitted on, as JSON)
 *     [--crowded-in FILE]    (fit the neighbourhood stage on checks kept by --crowded-out: no first-stage
 *                             cross-validation, so trying the stage's settings takes seconds)
 *     [--stage-hidden 4] [--stage-epochs 60] [--stage-l2 0.001]
 *     [--extra-features]     (with --no-write: the features of EXTRA_FEATURE_NAMES too, which the
 *                             shipped model leaves out; their figures are in docs/quality.md)
 *
 * The defaults reproduce the shipped model.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import {
  inputVector,
  type HitModel,
  type HitNet,
  forward,
  NEIGHBOURHOOD_FEATURES,
  neighbourhoodFeatures,
  neighbourhoodLogit,
  standardisedStage,
  stageShare,
} from '../src/cache/calibrated.ts';
import { analyse, EXTRA_FEATURE_NAMES, extraPairFeatures, FEATURE_NAMES, pairFeatures, type TextInfo } from '../src/cache/features.ts';
import { dot, runnerUpOf } from '../src/cache/scorer.ts';
import { createUseLiteEmbedder } from '../src/embedding/use-lite.ts';
import { BruteForceIndex } from '../src/vector/brute.ts';
import { answerGroups, CachedEmbedder, componentFolds, defaultEvalDir, loadPairs, pairFiles, type Pair } from '../eval/data.ts';
import { seededRandom as rng } from '../src/util/random.ts';

const { values } = parseArgs({
  options: {
    data: { type: 'string' },
    out: { type: 'string', default: fileURLToPath(new URL('../src/cache/hit-model.json', import.meta.url)) },
    epochs: { type: 'string', default: '30' },
    hidden: { type: 'string', default: '32' },
    l2: { type: 'string', default: '0.0001' },
    lr: { type: 'string', default: '0.002' },
    seed: { type: 'string', default: '7' },
    weighting: { type: 'string', default: 'rows' },
    'no-skip': { type: 'boolean', default: false },
    ensemble: { type: 'string', default: '3' },
    only: { type: 'string' },
    'crowded-out': { type: 'string' },
    'crowded-in': { type: 'string' },
    'stage-hidden': { type: 'string', default: '4' },
    'stage-epochs': { type: 'string', default: '60' },
    'stage-l2': { type: 'string', default: '0.001' },
    'no-write': { type: 'boolean', default: false },
    'extra-features': { type: 'boolean', default: false },
  },
});
const dir = values.data ?? defaultEvalDir();
if (!dir) throw new Error('no evaluation data: pass --data DIR');
if (values['extra-features'] && !values['no-write'])
  throw new Error('--extra-features needs --no-write: the service reads the features of FEATURE_NAMES only');
if (!['rows', 'sqrt', 'sources'].includes(values.weighting))
  throw new Error(`--weighting must be rows, sqrt or sources, not ${values.weighting}`);
const EPOCHS = Number(values.epochs);
const HIDDEN = Number(values.hidden);
const L2 = Number(values.l2);
const LR = Number(values.lr);

/** Weights are written with five decimals. */
const round = (x: number) => Math.round(x * 1e5) / 1e5;
const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));
const text = (x: string | string[]) => (Array.isArray(x) ? (x[x.length - 1] as string) : x);
const pairs: (Pair & { file: string })[] = pairFiles(dir)
  .flatMap((f) => loadPairs(f).map((p) => ({ ...p, file: path.basename(f) })))
  .filter((p) => !Array.isArray(p.a))
  .filter((p) => values.only === undefined || p.source.includes(values.only));
console.log(`pairs: ${pairs.length} from ${dir}`);

const embedder = new CachedEmbedder(await createUseLiteEmbedder({ memoSize: 0 }));
const texts = [...new Set(pairs.flatMap((p) => [text(p.a), text(p.b)]))];
const vecs = await embedder.embed(texts);
await embedder.close();
const vec = new Map(texts.map((t, i) => [t, vecs[i] as Float32Array]));

/** The hand-made features' names: FEATURE_NAMES, with --extra-features those of EXTRA_FEATURE_NAMES before the bias. */
const NAMES: string[] = values['extra-features'] ? [...FEATURE_NAMES.slice(0, -1), ...EXTRA_FEATURE_NAMES, 'bias'] : [...FEATURE_NAMES];
/** A pair's hand-made features, in NAMES order. */
function handOf(a: TextInfo, b: TextInfo, cosine: number): number[] {
  const hand = pairFeatures(a, b, cosine);
  if (values['extra-features']) hand.splice(hand.length - 1, 0, ...extraPairFeatures(a, b));
  return hand;
}
const H = NAMES.length;
interface Row {
  hand: number[];
  u: Float32Array;
  v: Float32Array;
  cosine: number;
  y: number;
  fold: number;
  source: string;
}
const foldOf = componentFolds(pairs, 3);
const rows: Row[] = pairs.map((p) => {
  const u = vec.get(text(p.a)) as Float32Array;
  const v = vec.get(text(p.b)) as Float32Array;
  const cosine = dot(u, v);
  return {
    hand: handOf(analyse(text(p.a)), analyse(text(p.b)), cosine),
    u,
    v,
    cosine,
    y: p.label,
    fold: foldOf(text(p.a)),
    source: p.source,
  };
});

/** The mean and standard deviation of each input over the rows. */
function meanAndStd(inputs: number[][]): { mean: number[]; std: number[] } {
  const k = inputs[0]?.length ?? 0;
  const mean = new Array<number>(k).fill(0);
  const variance = new Array<number>(k).fill(0);
  for (const x of inputs) x.forEach((v, i) => (mean[i] = (mean[i] as number) + v / inputs.length));
  for (const x of inputs) x.forEach((v, i) => (variance[i] = (variance[i] as number) + (v - (mean[i] as number)) ** 2 / inputs.length));
  return { mean, std: variance.map(Math.sqrt) };
}

/** An ensemble of `--ensemble` networks, each trained from its own seed on the same rows. */
function train(trainRows: Row[], seed: number): HitModel {
  const { mean, std: spread } = meanAndStd(trainRows.map((r) => r.hand));
  // The bias feature is left as it is (a standard deviation of 0 passes it through as 0).
  const std = spread.map((s, i) => (NAMES[i] === 'bias' ? 0 : s));
  const shell: HitModel = { version: 3, embedderId: 'use-lite@1', features: [...NAMES], mean, std, nets: [] };
  const X = trainRows.map((r) => inputVector(shell, r.hand, r.u, r.v));
  const weight = rowWeights(trainRows);
  const y = trainRows.map((r) => r.y);
  const options = { hidden: HIDDEN, epochs: EPOCHS, l2: L2, skipInputs: values['no-skip'] ? 0 : H };
  const nets = Array.from({ length: Number(values.ensemble) }, (_, k) => trainNet(X, y, weight, seed + 1000 * k, options));
  return { ...shell, mean: mean.map(round), std: std.map(round), nets };
}

/**
 * Each row's weight in the loss. 'sources': each source weighs the same in total; 'rows': every
 * pair weighs the same; 'sqrt': a source weighs the square root of its size in total.
 */
function rowWeights(trainRows: Row[]): number[] {
  const bySource = new Map<string, number>();
  for (const r of trainRows) bySource.set(r.source, (bySource.get(r.source) ?? 0) + 1);
  const rootSum = [...bySource.values()].reduce((a, n) => a + Math.sqrt(n), 0);
  return trainRows.map((r) => {
    const n = bySource.get(r.source) as number;
    if (values.weighting === 'rows') return 1;
    if (values.weighting === 'sqrt') return (trainRows.length * Math.sqrt(n)) / rootSum / n;
    return trainRows.length / bySource.size / n;
  });
}

interface NetOptions {
  hidden: number;
  epochs: number;
  l2: number;
  /** How many leading inputs also have a linear path straight to the output (0: none). */
  skipInputs: number;
  /**
   * Per row, the logit the loss sees is `share × the network's + (1 − share) × base` (the
   * neighbourhood stage's blend with the first stage); by default the network's alone.
   */
  blend?: { share: number[]; base: number[] };
}

/** Minibatch Adam on the L2-regularised log loss of one network. */
function trainNet(X: Float64Array[], y: number[], weight: number[], seed: number, options: NetOptions): HitNet {
  const random = rng(seed);
  const n = X[0]?.length ?? 0;
  const sizes = options.hidden > 0 ? [n, options.hidden, 1] : [n, 1];
  const params: Float64Array[] = [];
  for (let l = 0; l + 1 < sizes.length; l++) {
    const fanIn = sizes[l] as number;
    const out = sizes[l + 1] as number;
    const w = new Float64Array(out * fanIn).map(() => (random() * 2 - 1) * Math.sqrt(6 / (fanIn + out)));
    params.push(w, new Float64Array(out));
  }
  // The linear path from the hand-made features, when asked for, is the last parameter array.
  const skip = options.skipInputs > 0 ? new Float64Array(options.skipInputs) : null;
  if (skip) params.push(skip);
  const m = params.map((p) => new Float64Array(p.length));
  const s = params.map((p) => new Float64Array(p.length));
  let step = 0;
  const order = X.map((_, i) => i);
  const batch = 64;
  for (let epoch = 0; epoch < options.epochs; epoch++) {
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [order[i], order[j]] = [order[j] as number, order[i] as number];
    }
    for (let start = 0; start < order.length; start += batch) {
      const grads = params.map((p) => new Float64Array(p.length));
      const idx = order.slice(start, start + batch);
      for (const k of idx) {
        const share = options.blend?.share[k] ?? 1;
        const base = options.blend?.base[k] ?? 0;
        backprop(params, sizes, X[k] as Float64Array, y[k] as number, weight[k] as number, grads, options.skipInputs, share, base);
      }
      step++;
      params.forEach((p, pi) => {
        const g = grads[pi] as Float64Array;
        const mp = m[pi] as Float64Array;
        const sp = s[pi] as Float64Array;
        const isWeight = pi % 2 === 0 || p === skip;
        for (let i = 0; i < p.length; i++) {
          const gi = (g[i] as number) / idx.length + (isWeight ? options.l2 * (p[i] as number) : 0);
          mp[i] = 0.9 * (mp[i] as number) + 0.1 * gi;
          sp[i] = 0.999 * (sp[i] as number) + 0.001 * gi * gi;
          p[i] =
            (p[i] as number) - (LR * ((mp[i] as number) / (1 - 0.9 ** step))) / (Math.sqrt((sp[i] as number) / (1 - 0.999 ** step)) + 1e-8);
        }
      });
    }
  }
  const layers: HitNet['layers'] = [];
  for (let l = 0; l + 1 < sizes.length; l++) {
    layers.push({
      in: sizes[l] as number,
      out: sizes[l + 1] as number,
      w: Array.from(params[2 * l] as Float64Array, round),
      b: Array.from(params[2 * l + 1] as Float64Array, round),
    });
  }
  return { layers, ...(skip ? { skip: Array.from(skip, round) } : {}) };
}

/** Adds the gradient of the weighted log loss of one example into `grads`. */
function backprop(
  params: Float64Array[],
  sizes: number[],
  x: Float64Array,
  y: number,
  weight: number,
  grads: Float64Array[],
  skipInputs: number,
  share: number,
  base: number,
): void {
  const layerCount = sizes.length - 1;
  const acts: Float64Array[] = [x];
  for (let l = 0; l + 1 < sizes.length; l++) {
    const fanIn = sizes[l] as number;
    const out = sizes[l + 1] as number;
    const w = params[2 * l] as Float64Array;
    const b = params[2 * l + 1] as Float64Array;
    const a = acts[l] as Float64Array;
    const z = new Float64Array(out);
    for (let o = 0; o < out; o++) {
      let sum = b[o] as number;
      const off = o * fanIn;
      for (let i = 0; i < fanIn; i++) sum += (w[off + i] as number) * (a[i] as number);
      z[o] = l + 2 < sizes.length ? Math.max(0, sum) : sum;
    }
    acts.push(z);
  }
  const last = acts[acts.length - 1] as Float64Array;
  let logit = last[0] as number;
  const skipW = skipInputs > 0 ? (params[2 * layerCount] as Float64Array) : null;
  if (skipW) for (let i = 0; i < skipInputs; i++) logit += (skipW[i] as number) * (x[i] as number);
  const d0 = (sigmoid(share * logit + (1 - share) * base) - y) * weight * share;
  if (skipW) {
    const gs = grads[2 * layerCount] as Float64Array;
    for (let i = 0; i < skipInputs; i++) gs[i] = (gs[i] as number) + d0 * (x[i] as number);
  }
  let delta = new Float64Array([d0]);
  for (let l = sizes.length - 2; l >= 0; l--) {
    const fanIn = sizes[l] as number;
    const out = sizes[l + 1] as number;
    const w = params[2 * l] as Float64Array;
    const gw = grads[2 * l] as Float64Array;
    const gb = grads[2 * l + 1] as Float64Array;
    const a = acts[l] as Float64Array;
    const prev = new Float64Array(fanIn);
    for (let o = 0; o < out; o++) {
      const d = delta[o] as number;
      if (d === 0) continue;
      gb[o] = (gb[o] as number) + d;
      const off = o * fanIn;
      for (let i = 0; i < fanIn; i++) {
        gw[off + i] = (gw[off + i] as number) + d * (a[i] as number);
        if (l > 0) prev[i] = (prev[i] as number) + d * (w[off + i] as number);
      }
    }
    if (l > 0) for (let i = 0; i < fanIn; i++) if (((acts[l] as Float64Array)[i] as number) <= 0) prev[i] = 0;
    delta = prev;
  }
}

function predict(model: HitModel, r: Row): number {
  return sigmoid(forward(model, inputVector(model, r.hand, r.u, r.v)));
}

/** Precision when just enough of the best-scored pairs are taken to reach the given recall. */
function precisionAtRecall(scored: { score: number; y: number }[], recall: number): number {
  const pos = scored.filter((r) => r.y === 1).length;
  const sorted = [...scored].sort((a, b) => b.score - a.score);
  let tp = 0;
  for (let i = 0; i < sorted.length; i++) {
    tp += (sorted[i] as { y: number }).y;
    if (tp >= recall * pos) return tp / (i + 1);
  }
  return tp / Math.max(1, sorted.length);
}

function report(name: string, scored: { score: number; y: number }[]): void {
  const pos = scored.filter((r) => r.y === 1).length;
  const line = [0.6, 0.75, 0.85, 0.9, 0.95].map((t) => {
    const hits = scored.filter((r) => r.score >= t);
    const tp = hits.filter((r) => r.y === 1).length;
    return `@${t}: P ${(tp / Math.max(1, hits.length)).toFixed(3)} R ${(tp / Math.max(1, pos)).toFixed(3)}`;
  });
  const atRecall = `P@R.3 ${precisionAtRecall(scored, 0.3).toFixed(3)}`;
  console.log(`${name.padEnd(34)} ${atRecall}  ${line.join('  ')}`);
}

const seed = Number(values.seed);
const heldOut: { score: number; cos: number; y: number; source: string }[] = [];
const foldModels: HitModel[] = [];
for (let fold = 0; fold < (values['crowded-in'] ? 0 : 3); fold++) {
  const model = train(
    rows.filter((r) => r.fold !== fold),
    seed + fold,
  );
  foldModels.push(model);
  for (const r of rows.filter((r) => r.fold === fold)) heldOut.push({ score: predict(model, r), cos: r.cosine, y: r.y, source: r.source });
}
for (const source of [...new Set(heldOut.map((r) => r.source))]) {
  const sub = heldOut.filter((r) => r.source === source);
  report(
    `${source} cosine (held-out)`,
    sub.map((r) => ({ score: r.cos, y: r.y })),
  );
  report(
    `${source} model (held-out)`,
    sub.map((r) => ({ score: r.score, y: r.y })),
  );
}

/**
 * One crowded check: the nearest stored `a` for a query `b` of the same file, scored by the fold
 * model that never saw `b`, with the runner-up's cosine (found the way the service finds it).
 */
interface CrowdedRow {
  logit: number;
  raw: number[];
  y: number;
  /** The query's group has a stored entry (a right answer exists). */
  answerable: boolean;
  fold: number;
  file: string;
}

function crowdedRows(): CrowdedRow[] {
  const out: CrowdedRow[] = [];
  for (const file of [...new Set(pairs.map((p) => p.file))]) {
    const filePairs = pairs.filter((p) => p.file === file);
    const group = answerGroups(filePairs);
    const stored = [...new Set(filePairs.map((p) => text(p.a)))];
    const storedGroups = new Set(stored.map(group));
    const index = new BruteForceIndex(512);
    stored.forEach((t, i) => index.add('crowded', i, vec.get(t) as Float32Array));
    for (const q of new Set(filePairs.map((p) => text(p.b)))) {
      const v = vec.get(q) as Float32Array;
      const neighbours = index.search('crowded', v, 8);
      const top = neighbours[0];
      if (!top) continue;
      const candidate = stored[top.id] as string;
      const a = analyse(q);
      const b = analyse(candidate);
      // Identical texts score 1 before any model, and a lone entry has no runner-up.
      const rival = runnerUpOf(neighbours, top.id, top.cosine);
      if (a.normalised === b.normalised || rival === undefined) continue;
      const fold = foldOf(q);
      const model = foldModels[fold] as HitModel;
      const u = vec.get(candidate) as Float32Array;
      const logit = forward(model, inputVector(model, handOf(a, b, top.cosine), v, u));
      const g = group(q);
      out.push({
        logit,
        raw: neighbourhoodFeatures(logit, top.cosine, rival, a),
        y: group(candidate) === g ? 1 : 0,
        answerable: storedGroups.has(g),
        fold,
        file,
      });
    }
  }
  return out;
}

type Stage = NonNullable<HitModel['neighbourhood']>;

/**
 * The neighbourhood stage: a network with `--stage-hidden` units and a linear path over the standardised
 * inputs, each file weighing the same in total, so the many QQP questions do not drown the others.
 */
function fitStage(train: CrowdedRow[]): Stage {
  const k = NEIGHBOURHOOD_FEATURES.length;
  const { mean, std } = meanAndStd(train.map((r) => r.raw));
  const stage: Stage = { features: [...NEIGHBOURHOOD_FEATURES], mean: mean.map(round), std: std.map(round), net: { layers: [] } };
  const X = train.map((r) => standardisedStage(stage, r.raw));
  const perFile = new Map<string, number>();
  for (const r of train) perFile.set(r.file, (perFile.get(r.file) ?? 0) + 1);
  const weight = train.map((r) => train.length / perFile.size / (perFile.get(r.file) as number));
  stage.net = trainNet(
    X,
    train.map((r) => r.y),
    weight,
    seed + 500,
    {
      hidden: Number(values['stage-hidden']),
      epochs: Number(values['stage-epochs']),
      l2: Number(values['stage-l2']),
      skipInputs: k,
      blend: { share: train.map((r) => stageShare(r.raw[1] as number)), base: train.map((r) => r.raw[0] as number) },
    },
  );
  return stage;
}

/** Right / wrong hits among the crowded checks at each threshold, and precision and recall. */
function crowdedReport(name: string, scored: { score: number; y: number }[], answerable: number): void {
  const line = [0.6, 0.75, 0.85, 0.9, 0.95].map((t) => {
    const hits = scored.filter((r) => r.score >= t);
    const right = hits.filter((r) => r.y === 1).length;
    return `@${t}: ${right}/${hits.length - right} P ${(right / Math.max(1, hits.length)).toFixed(3)} R ${(right / Math.max(1, answerable)).toFixed(3)}`;
  });
  console.log(`${name.padEnd(34)} ${line.join('  ')}`);
}

const crowded = values['crowded-in'] ? (JSON.parse(readFileSync(values['crowded-in'], 'utf8')) as CrowdedRow[]) : crowdedRows();
if (crowded.some((r) => r.raw.length !== NEIGHBOURHOOD_FEATURES.length))
  throw new Error(`${values['crowded-in']} holds checks with other neighbourhood features; keep them again with --crowded-out`);
if (values['crowded-out']) writeFileSync(values['crowded-out'], JSON.stringify(crowded));
const staged: { score: number; y: number; file: string }[] = [];
for (let fold = 0; fold < 3; fold++) {
  const stage = fitStage(crowded.filter((r) => r.fold !== fold));
  for (const r of crowded.filter((r) => r.fold === fold))
    staged.push({ score: sigmoid(neighbourhoodLogit(stage, r.raw)), y: r.y, file: r.file });
}
console.log('\ncrowded (every a stored, every b checked; right/wrong hits among checks with a runner-up, held-out):');
for (const file of [...new Set(crowded.map((r) => r.file))]) {
  const sub = crowded.filter((r) => r.file === file);
  const answerable = sub.filter((r) => r.answerable).length;
  crowdedReport(
    `${file} first stage`,
    sub.map((r) => ({ score: sigmoid(r.logit), y: r.y })),
    answerable,
  );
  crowdedReport(
    `${file} with neighbourhood`,
    staged.filter((r) => r.file === file),
    answerable,
  );
}

if (!values['no-write']) {
  const neighbourhood = fitStage(crowded);
  writeFileSync(values.out, `${JSON.stringify({ ...train(rows, seed), neighbourhood })}\n`);
  console.log(`wrote ${values.out}`);
}
