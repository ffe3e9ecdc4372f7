/**
 * Time to embed one text with USE-lite in one thread: the encoder on ONNX Runtime (what Reprise
 * runs) and the eager tfjs fallback, beside the published graph run by tfjs's graph executor
 * (the baseline, what Reprise ran before), measured in the same run, alternating rounds, medians. Texts are grouped by their token count; short ones are the
 * GPTCache mock questions, long ones real prompts from ../shared/eval.
 *
 *   node --import tsx bench/embedder.ts
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import * as tf from '@tensorflow/tfjs-core';
import * as tfconv from '@tensorflow/tfjs-converter';
import { Tokenizer } from '@tensorflow-models/universal-sentence-encoder';
import { UseLiteModel, readArtifacts, readVocabulary } from '../src/embedding/use-lite.model.ts';
import { startWasmBackend } from '../src/embedding/use-lite.tfjs.ts';

const ROUNDS = 7;
const PER_ROUND = 40;
const evalDir = path.join(import.meta.dirname, '..', '..', 'shared', 'eval');

const lines = (file: string) =>
  readFileSync(path.join(evalDir, file), 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Record<string, unknown>);
const texts = [
  ...lines('gptcache_mock.dev.jsonl').map((r) => String(r.a)),
  ...lines('prompts_mtbench.jsonl').map((r) => (r.messages as { content: string }[])[0]?.content ?? ''),
].filter(Boolean);

const onnx = await UseLiteModel.load('onnx');
const eager = await UseLiteModel.load('tfjs-wasm');
await startWasmBackend();
const graph = await tfconv.loadGraphModel({ load: async () => readArtifacts() });
const tokenizer = new Tokenizer(readVocabulary());

async function viaGraph(ids: number[]): Promise<void> {
  const indices = new Int32Array(ids.length * 2);
  ids.forEach((_, j) => (indices[2 * j + 1] = j));
  const indicesT = tf.tensor2d(indices, [ids.length, 2], 'int32');
  const valuesT = tf.tensor1d(ids, 'int32');
  const out = (await graph.executeAsync({ indices: indicesT, values: valuesT })) as tf.Tensor;
  await out.data();
  tf.dispose([out, indicesT, valuesT]);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const buckets: [string, number, number][] = [
  ['≤ 12 tokens', 1, 12],
  ['13–32 tokens', 13, 32],
  ['33–128 tokens', 33, 128],
];

console.log('tokens | onnx ms per text (p50) | tfjs eager | tfjs graph (baseline) | baseline / onnx');
const results: Record<string, { onnx: number; eager: number; graph: number }> = {};
for (const [label, lo, hi] of buckets) {
  const group = texts
    .map((t) => ({ t, ids: tokenizer.encode(t) }))
    .filter((x) => x.ids.length >= lo && x.ids.length <= hi)
    .slice(0, PER_ROUND);
  const runs: Record<'onnx' | 'eager' | 'graph', (x: { t: string; ids: number[] }) => Promise<unknown>> = {
    onnx: (x) => onnx.embed([x.t]),
    eager: (x) => eager.embed([x.t]),
    graph: (x) => viaGraph(x.ids),
  };
  const times: Record<string, number[]> = { onnx: [], eager: [], graph: [] };
  for (const run of Object.values(runs)) for (const x of group.slice(0, 5)) await run(x);
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, run] of Object.entries(runs)) {
      const t0 = performance.now();
      for (const x of group) await run(x);
      times[name]?.push((performance.now() - t0) / group.length);
    }
  }
  const m = { onnx: median(times.onnx ?? []), eager: median(times.eager ?? []), graph: median(times.graph ?? []) };
  results[label] = m;
  console.log(
    `${label} (${group.length} texts) | ${m.onnx.toFixed(2)} | ${m.eager.toFixed(2)} | ${m.graph.toFixed(2)} | ${(m.graph / m.onnx).toFixed(1)}`,
  );
}
