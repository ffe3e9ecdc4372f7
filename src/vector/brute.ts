import usearch, { type Matches } from 'usearch';
import type { Neighbour, VectorIndex } from './interface.ts';

/** usearch's matches (inner-product distances) as neighbours; `idOf` maps a match's key to an entry id. */
export function neighboursOf(res: Matches, idOf: (key: number) => number): Neighbour[] {
  const out: Neighbour[] = [];
  for (let i = 0; i < res.keys.length; i++) out.push({ id: idOf(Number(res.keys[i])), cosine: 1 - (res.distances[i] as number) });
  return out;
}

/** One partition: vectors packed in one growable Float32Array, removal by swap with the last. */
class Partition {
  ids: number[] = [];
  data: Float32Array;
  readonly slot = new Map<number, number>();

  constructor(private readonly dims: number) {
    // Room for one vector, doubled as it fills: most partitions hold one or a few (a system
    // message that names its user or the day makes a partition per conversation), and room for
    // 16 made each of them take 32 KB for its 2 KB vector.
    this.data = new Float32Array(dims);
  }

  add(id: number, v: Float32Array): void {
    const existing = this.slot.get(id);
    const at = existing ?? this.ids.length;
    if (existing === undefined) {
      if ((at + 1) * this.dims > this.data.length) {
        const grown = new Float32Array(this.data.length * 2);
        grown.set(this.data);
        this.data = grown;
      }
      this.ids.push(id);
      this.slot.set(id, at);
    }
    this.data.set(v, at * this.dims);
  }

  remove(id: number): void {
    const at = this.slot.get(id);
    if (at === undefined) return;
    const last = this.ids.length - 1;
    if (at !== last) {
      const lastId = this.ids[last] as number;
      this.data.copyWithin(at * this.dims, last * this.dims, (last + 1) * this.dims);
      this.ids[at] = lastId;
      this.slot.set(lastId, at);
    }
    this.ids.pop();
    this.slot.delete(id);
  }
}

/** Exact search by dot product. Right for small partitions. */
export class BruteForceIndex implements VectorIndex {
  private readonly parts = new Map<string, Partition>();
  private count = 0;

  constructor(readonly dimensions: number) {}

  get size(): number {
    return this.count;
  }

  add(partition: string, id: number, vector: Float32Array): void {
    if (vector.length !== this.dimensions) throw new Error(`vector has ${vector.length} dimensions, expected ${this.dimensions}`);
    let p = this.parts.get(partition);
    if (!p) {
      p = new Partition(this.dimensions);
      this.parts.set(partition, p);
    }
    const before = p.ids.length;
    p.add(id, vector);
    this.count += p.ids.length - before;
  }

  addMany(items: readonly { partition: string; id: number; vector: Float32Array }[]): void {
    for (const it of items) this.add(it.partition, it.id, it.vector);
  }

  remove(partition: string, id: number): void {
    const p = this.parts.get(partition);
    if (!p) return;
    const before = p.ids.length;
    p.remove(id);
    this.count -= before - p.ids.length;
    if (p.ids.length === 0) this.parts.delete(partition);
  }

  /** Every partition with its ids and packed vectors (row i of `data` is the vector of ids[i]). */
  *partitionsData(): Generator<{ name: string; ids: readonly number[]; data: Float32Array }> {
    for (const [name, p] of this.parts) yield { name, ids: p.ids, data: p.data.subarray(0, p.ids.length * this.dimensions) };
  }

  partitions(): string[] {
    return [...this.parts.keys()];
  }

  /** Removes a whole partition. */
  drop(partition: string): void {
    const p = this.parts.get(partition);
    if (!p) return;
    this.count -= p.ids.length;
    this.parts.delete(partition);
  }

  /** Ids held in a partition. */
  ids(partition: string): number[] {
    return [...(this.parts.get(partition)?.ids ?? [])];
  }

  /** One stored vector as a view of the partition's rows: valid until the partition next changes. */
  row(partition: string, id: number): Float32Array | null {
    const p = this.parts.get(partition);
    const at = p?.slot.get(id);
    if (!p || at === undefined) return null;
    return p.data.subarray(at * this.dimensions, (at + 1) * this.dimensions);
  }

  /** A copy of one stored vector. */
  vector(partition: string, id: number): Float32Array | null {
    const p = this.parts.get(partition);
    const at = p?.slot.get(id);
    if (!p || at === undefined) return null;
    return p.data.slice(at * this.dimensions, (at + 1) * this.dimensions);
  }

  search(partition: string, query: Float32Array, k: number): Neighbour[] {
    const p = this.parts.get(partition);
    const n = Math.min(k, p?.ids.length ?? 0);
    if (!p || n <= 0) return [];
    // usearch's exact scan (SIMD, one thread): about 7 times a JavaScript loop over the same rows.
    const rows = p.data.subarray(0, p.ids.length * this.dimensions);
    const res = usearch.exactSearch(rows, query, this.dimensions, n, usearch.MetricKind.IP, 1) as Matches;
    return neighboursOf(res, (row) => p.ids[row] as number);
  }
}
