import { InferenceSession, Tensor } from 'onnxruntime-node';
import { encodeModel, FLOAT, INT64, type Graph, type Initializer, type Node } from './onnx-proto.ts';
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

/** ONNX opset of the built graph (LayerNormalization needs 17). */
const OPSET = 17;

/**
 * The encoder's graph in ONNX, built from the published weights: inputs are token ids [B, T],
 * the timing signal [1, T, 256], the key bias [B, 1, 1, T] (0, or -1e9 for padding), the mask
 * [B, T, 1] and 1 / length [B, 1]; the output is the tanh layer [B, 512] before normalisation.
 */
export function buildGraph(weights: UseLiteWeights): Graph {
  const nodes: Node[] = [];
  const initializers: Initializer[] = [];
  let counter = 0;
  const fresh = (hint: string) => `${hint}_${counter++}`;
  const constant = (name: string, dims: number[], data: Float32Array | number[]): string => {
    initializers.push({ name, dims, type: FLOAT, data: data instanceof Float32Array ? data : Float32Array.from(data) });
    return name;
  };
  const ints = (name: string, data: number[]): string => {
    initializers.push({ name, dims: [data.length], type: INT64, data: BigInt64Array.from(data.map(BigInt)) });
    return name;
  };
  const op = (type: string, inputs: string[], attributes?: Node['attributes'], outputs = 1): string[] => {
    const outs = Array.from({ length: outputs }, () => fresh(type.toLowerCase()));
    nodes.push({ op: type, inputs, outputs: outs, attributes });
    return outs;
  };
  const one = (type: string, inputs: string[], attributes?: Node['attributes']) => op(type, inputs, attributes)[0] as string;
  const matrix = (name: string, m: Matrix) => constant(name, [m.rows, m.cols], m.data);
  const dense = (x: string, name: string, d: Dense) =>
    one('Add', [one('MatMul', [x, matrix(`${name}.kernel`, d.kernel)]), constant(`${name}.bias`, [d.bias.length], d.bias)]);
  const layerNorm = (x: string, name: string, n: Norm) =>
    one(
      'LayerNormalization',
      [x, constant(`${name}.scale`, [n.scale.length], n.scale), constant(`${name}.bias`, [n.bias.length], n.bias)],
      {
        axis: -1,
        epsilon: { float: LN_EPSILON },
      },
    );

  const embedded = one('Gather', [matrix('embeddings', weights.embeddings), 'ids']);
  // The graph adds the embeddings twice: once as the input and once beside the timing signal.
  let x = one('Add', [one('Mul', [embedded, constant('two', [], [2])]), 'timing']);
  weights.layers.forEach((layer, i) => {
    const depth = layer.width / HEADS;
    const qkv = dense(layerNorm(x, `l${i}.norm`, layer.attentionNorm), `l${i}.qkv`, layer.qkv);
    const [q, k, v] = op('Split', [qkv, ints(`l${i}.split`, [layer.width, layer.width, layer.width])], { axis: 2 }, 3) as [
      string,
      string,
      string,
    ];
    const headShape = ints(`l${i}.heads`, [0, 0, HEADS, depth]);
    const heads = (t: string, perm: number[]) => one('Transpose', [one('Reshape', [t, headShape])], { perm });
    const scaled = one('Mul', [heads(q, [0, 2, 1, 3]), constant(`l${i}.scale`, [], [1 / Math.sqrt(depth)])]);
    const logits = one('Add', [one('MatMul', [scaled, heads(k, [0, 2, 3, 1])]), 'key_bias']);
    const attended = one('MatMul', [one('Softmax', [logits], { axis: -1 }), heads(v, [0, 2, 1, 3])]);
    const combined = one('Reshape', [one('Transpose', [attended], { perm: [0, 2, 1, 3] }), ints(`l${i}.combine`, [0, 0, layer.width])]);
    const residual = layer.residual ? dense(x, `l${i}.residual`, layer.residual) : x;
    const afterAttention = one('Add', [dense(combined, `l${i}.output`, layer.output), residual]);
    const hidden = one('Relu', [dense(layerNorm(afterAttention, `l${i}.ffn_norm`, layer.ffnNorm), `l${i}.ffn1`, layer.ffn1)]);
    x = one('Add', [dense(hidden, `l${i}.ffn2`, layer.ffn2), afterAttention]);
  });
  const summed = one('ReduceSum', [one('Mul', [x, 'mask']), ints('time_axis', [1])], { keepdims: 0 });
  const pooled = one('Mul', [summed, 'inverse_length']);
  nodes.push({ op: 'Tanh', inputs: [dense(pooled, 'pool', weights.pool)], outputs: ['hidden'] });
  const timingWidth = weights.timing.cols;
  return {
    name: 'use-lite',
    nodes,
    initializers,
    inputs: [
      { name: 'ids', type: INT64, dims: ['batch', 'length'] },
      { name: 'timing', type: FLOAT, dims: [1, 'length', timingWidth] },
      { name: 'key_bias', type: FLOAT, dims: ['batch', 1, 1, 'length'] },
      { name: 'mask', type: FLOAT, dims: ['batch', 'length', 1] },
      { name: 'inverse_length', type: FLOAT, dims: ['batch', 1] },
    ],
    outputs: [{ name: 'hidden', type: FLOAT, dims: ['batch', DIMENSIONS] }],
  };
}

/**
 * The encoder on ONNX Runtime's CPU provider, one intra-op thread (the embedder runs one worker
 * thread per core). Fails if onnxruntime-node has no binary for this platform.
 */
export async function createOnnxEncoder(weights: UseLiteWeights): Promise<WindowEncoder> {
  const session = await InferenceSession.create(encodeModel(buildGraph(weights), OPSET), {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const timingWidth = weights.timing.cols;
  return {
    name: 'onnx',
    async encode(rows, length) {
      const batch = rows.length;
      const { ids, valid, lengths } = padWindows(rows, length);
      // Padded keys get a large negative attention bias, as in the graph.
      const keyBias = valid.map((v) => (v ? 0 : -1e9));
      const inverseLength = lengths.map((n) => 1 / Math.max(n, 1));
      const out = await session.run({
        ids: new Tensor('int64', BigInt64Array.from(ids, BigInt), [batch, length]),
        timing: new Tensor('float32', weights.timing.data.subarray(0, length * timingWidth), [1, length, timingWidth]),
        key_bias: new Tensor('float32', keyBias, [batch, 1, 1, length]),
        mask: new Tensor('float32', valid, [batch, length, 1]),
        inverse_length: new Tensor('float32', inverseLength, [batch, 1]),
      });
      const hidden = out.hidden as Tensor;
      return hidden.data as Float32Array;
    },
  };
}
