/**
 * Just enough of ONNX's protobuf schema (onnx.proto, IR version 8) to write a model in memory:
 * a graph of nodes with attributes, float initializers and typed inputs and outputs.
 */

/** Protobuf wire encoding: varints and length-delimited fields. */
class Writer {
  private readonly parts: Uint8Array[] = [];
  private size = 0;

  private push(bytes: Uint8Array): this {
    this.parts.push(bytes);
    this.size += bytes.length;
    return this;
  }

  private varint(value: number | bigint): this {
    let v = BigInt.asUintN(64, BigInt(value));
    const out: number[] = [];
    while (v >= 0x80n) {
      out.push(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    out.push(Number(v));
    return this.push(Uint8Array.from(out));
  }

  private key(field: number, wire: 0 | 2 | 5): this {
    return this.varint((field << 3) | wire);
  }

  int(field: number, value: number): this {
    return this.key(field, 0).varint(value);
  }

  float(field: number, value: number): this {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, value, true);
    return this.key(field, 5).push(b);
  }

  bytes(field: number, value: Uint8Array): this {
    return this.key(field, 2).varint(value.length).push(value);
  }

  string(field: number, value: string): this {
    return this.bytes(field, new TextEncoder().encode(value));
  }

  message(field: number, inner: Writer): this {
    return this.bytes(field, inner.finish());
  }

  finish(): Uint8Array {
    const out = new Uint8Array(this.size);
    let at = 0;
    for (const p of this.parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }
}

export const FLOAT = 1;
export const INT64 = 7;

export type Attribute = number | number[] | { floats: number[] } | { float: number };

export interface Node {
  op: string;
  inputs: string[];
  outputs: string[];
  attributes?: Record<string, Attribute>;
}

export interface Initializer {
  name: string;
  dims: number[];
  type: typeof FLOAT | typeof INT64;
  data: Float32Array | BigInt64Array;
}

/** A graph input or output: element type and dimensions (a string names a dimension that varies). */
export interface ValueInfo {
  name: string;
  type: typeof FLOAT | typeof INT64;
  dims: (number | string)[];
}

export interface Graph {
  name: string;
  nodes: Node[];
  initializers: Initializer[];
  inputs: ValueInfo[];
  outputs: ValueInfo[];
}

function attribute(name: string, value: Attribute): Writer {
  const w = new Writer().string(1, name);
  // AttributeProto.type: FLOAT 1, INT 2, FLOATS 6, INTS 7.
  if (typeof value === 'number') return w.int(3, value).int(20, 2);
  if (Array.isArray(value)) {
    for (const v of value) w.int(8, v);
    return w.int(20, 7);
  }
  if ('float' in value) return w.float(2, value.float).int(20, 1);
  for (const v of value.floats) w.float(7, v);
  return w.int(20, 6);
}

function valueInfo(v: ValueInfo): Writer {
  const shape = new Writer();
  for (const d of v.dims) shape.message(1, typeof d === 'number' ? new Writer().int(1, d) : new Writer().string(2, d));
  const tensorType = new Writer().int(1, v.type).message(2, shape);
  return new Writer().string(1, v.name).message(2, new Writer().message(1, tensorType));
}

function tensor(t: Initializer): Writer {
  const w = new Writer();
  for (const d of t.dims) w.int(1, d);
  return w
    .int(2, t.type)
    .string(8, t.name)
    .bytes(9, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
}

/** The serialized ModelProto of a graph in the default ONNX domain at the given opset. */
export function encodeModel(graph: Graph, opset: number): Uint8Array {
  const g = new Writer();
  for (const n of graph.nodes) {
    const node = new Writer();
    for (const i of n.inputs) node.string(1, i);
    for (const o of n.outputs) node.string(2, o);
    node.string(4, n.op);
    for (const [name, value] of Object.entries(n.attributes ?? {})) node.message(5, attribute(name, value));
    g.message(1, node);
  }
  g.string(2, graph.name);
  for (const t of graph.initializers) g.message(5, tensor(t));
  for (const v of graph.inputs) g.message(11, valueInfo(v));
  for (const v of graph.outputs) g.message(12, valueInfo(v));
  return new Writer()
    .int(1, 8) // ir_version
    .string(2, 'reprise')
    .message(7, g)
    .message(8, new Writer().string(1, '').int(2, opset))
    .finish();
}
