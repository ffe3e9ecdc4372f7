import { createRequire } from 'node:module';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
import { setWasmPaths } from '@tensorflow/tfjs-backend-wasm';
import {
  DIMENSIONS,
  HEADS,
  LN_EPSILON,
  padWindows,
  type Dense,
  type Matrix,
  type Norm,
  type UseLiteWeights,
  type WindowEncoder,
} from './use-lite.model.ts';

const require = createRequire(import.meta.url);

/** Starts the tfjs WebAssembly backend (SIMD) from the files in the npm package. */
export async function startWasmBackend(): Promise<void> {
  const wasmDir = path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm'));
  setWasmPaths(`${wasmDir}${path.sep}`);
  await tf.setBackend('wasm');
  await tf.ready();
}

interface TensorDense {
  kernel: tf.Tensor2D;
  bias: tf.Tensor1D;
}

const matrix = (m: Matrix) => tf.tensor2d(m.data, [m.rows, m.cols]);
const dense = (d: Dense): TensorDense => ({ kernel: matrix(d.kernel), bias: tf.tensor1d(d.bias) });
const norm = (n: Norm) => ({ scale: tf.tensor1d(n.scale), bias: tf.tensor1d(n.bias) });

function layerNorm(x: tf.Tensor2D, n: { scale: tf.Tensor1D; bias: tf.Tensor1D }): tf.Tensor2D {
  const centred = tf.sub(x, tf.mean(x, -1, true));
  const variance = tf.mean(tf.square(centred), -1, true);
  return tf.add(tf.mul(tf.mul(centred, tf.rsqrt(tf.add(variance, LN_EPSILON))), n.scale), n.bias);
}

function apply(x: tf.Tensor2D, d: TensorDense, activation?: 'relu'): tf.Tensor2D {
  return tf.fused.matMul({ a: x, b: d.kernel, bias: d.bias, activation: activation ?? 'linear' }) as tf.Tensor2D;
}

/**
 * The encoder as eager tfjs ops on the WebAssembly backend: the fallback where ONNX Runtime has
 * no binary. Rows are [batch × length] token windows, padded keys masked out of attention.
 */
export async function createTfjsEncoder(weights: UseLiteWeights): Promise<WindowEncoder> {
  await startWasmBackend();
  const w = {
    embeddings: matrix(weights.embeddings),
    timing: matrix(weights.timing),
    pool: dense(weights.pool),
    layers: weights.layers.map((l) => ({
      attentionNorm: norm(l.attentionNorm),
      qkv: dense(l.qkv),
      output: dense(l.output),
      residual: l.residual ? dense(l.residual) : null,
      ffnNorm: norm(l.ffnNorm),
      ffn1: dense(l.ffn1),
      ffn2: dense(l.ffn2),
      width: l.width,
    })),
  };
  return {
    name: 'tfjs-wasm',
    async encode(rows, length) {
      const batch = rows.length;
      const { ids, valid, lengths } = padWindows(rows, length);
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
          const qkv = apply(layerNorm(x, layer.attentionNorm), layer.qkv);
          const [q, k, v] = tf.split(qkv, 3, 1) as [tf.Tensor2D, tf.Tensor2D, tf.Tensor2D];
          const logits = tf.add(tf.matMul(tf.mul(heads(q), 1 / Math.sqrt(depth)), heads(k), false, true), keyBias);
          const attended = tf.reshape(tf.transpose(tf.matMul(tf.softmax(logits), heads(v)), [0, 2, 1, 3]), [
            batch * length,
            layer.width,
          ]) as tf.Tensor2D;
          const residual = layer.residual ? apply(x, layer.residual) : x;
          x = tf.add(apply(attended, layer.output), residual);
          x = tf.add(apply(apply(layerNorm(x, layer.ffnNorm), layer.ffn1, 'relu'), layer.ffn2), x);
        }
        const summed = tf.sum(tf.mul(tf.reshape(x, [batch, length, DIMENSIONS]), tf.expandDims(mask, 2)), 1) as tf.Tensor2D;
        const pooled = tf.div(summed, tf.maximum(tf.tensor2d(lengths, [batch, 1]), 1)) as tf.Tensor2D;
        return tf.tanh(apply(pooled, w.pool));
      });
      try {
        return out.dataSync() as Float32Array;
      } finally {
        out.dispose();
      }
    },
  };
}
