import hnswlib from 'hnswlib-node';
import { BruteForceIndex } from './brute.ts';
import type { Neighbour, VectorIndex } from './interface.ts';

const { HierarchicalNSW } = hnswlib;
type Hnsw = InstanceType<typeof HierarchicalNSW>;

export interface HnswOptions {
  /** A partition moves from exact search to HNSW when it reaches this many vectors. */
  crossover?: number;
  /** Graph degree. */
  m?: number;
  efConstruction?: number;
  /** Search breadth; at least k. */
  efSearch?: number;
}

interface Graph {
  index: Hnsw;
  /** Labels present and not deleted. */
  live: Set<number>;
  /** Labels marked deleted: never returned; restored if the same id is added again. */
  deleted: Set<number>;
}

/**
 * Exact search for small partitions and an HNSW graph (hnswlib) for large ones. A partition is
 * promoted once it reaches `crossover` vectors; deleted vectors are marked and never returned.
 */
export class HybridIndex implements VectorIndex {
  private readonly small: BruteForceIndex;
  private readonly smallCount = new Map<string, number>();
  private readonly graphs = new Map<string, Graph>();
  private readonly crossover: number;
  private readonly m: number;
  private readonly efConstruction: number;
  private readonly efSearch: number;
  private count = 0;

  constructor(
    readonly dimensions: number,
    opts: HnswOptions = {},
  ) {
    this.small = new BruteForceIndex(dimensions);
    this.crossover = opts.crossover ?? 5000;
    this.m = opts.m ?? 16;
    this.efConstruction = opts.efConstruction ?? 200;
    this.efSearch = opts.efSearch ?? 128;
  }

  get size(): number {
    return this.count;
  }

  add(partition: string, id: number, vector: Float32Array): void {
    const graph = this.graphs.get(partition);
    if (graph) {
      this.addToGraph(graph, id, vector);
      return;
    }
    const before = this.small.size;
    this.small.add(partition, id, vector);
    const added = this.small.size - before;
    this.count += added;
    const n = (this.smallCount.get(partition) ?? 0) + added;
    this.smallCount.set(partition, n);
    if (n >= this.crossover) this.promote(partition);
  }

  private newGraph(capacity: number): Graph {
    const index = new HierarchicalNSW('ip', this.dimensions);
    index.initIndex({ maxElements: capacity, m: this.m, efConstruction: this.efConstruction, randomSeed: 42, allowReplaceDeleted: false });
    index.setEf(this.efSearch);
    return { index, live: new Set(), deleted: new Set() };
  }

  private addToGraph(graph: Graph, id: number, vector: Float32Array): void {
    const g = graph.index;
    if (graph.deleted.has(id)) {
      g.unmarkDelete(id);
      graph.deleted.delete(id);
    }
    const isNew = !graph.live.has(id);
    if (g.getCurrentCount() >= g.getMaxElements()) g.resizeIndex(Math.ceil(g.getMaxElements() * 1.5));
    g.addPoint(Array.from(vector), id);
    if (isNew) {
      graph.live.add(id);
      this.count++;
    }
  }

  private promote(partition: string): void {
    const ids = this.small.ids(partition);
    const graph = this.newGraph(Math.max(ids.length * 2, 1024));
    for (const id of ids) {
      const v = this.small.vector(partition, id);
      if (v) graph.index.addPoint(Array.from(v), id);
      graph.live.add(id);
    }
    for (const id of ids) this.small.remove(partition, id);
    this.smallCount.delete(partition);
    this.graphs.set(partition, graph);
  }

  remove(partition: string, id: number): void {
    const graph = this.graphs.get(partition);
    if (graph) {
      if (!graph.live.has(id)) return;
      graph.index.markDelete(id);
      graph.live.delete(id);
      graph.deleted.add(id);
      this.count--;
      return;
    }
    const before = this.small.size;
    this.small.remove(partition, id);
    const removed = before - this.small.size;
    if (removed > 0) {
      this.count -= removed;
      const n = (this.smallCount.get(partition) ?? 1) - removed;
      if (n <= 0) this.smallCount.delete(partition);
      else this.smallCount.set(partition, n);
    }
  }

  search(partition: string, query: Float32Array, k: number): Neighbour[] {
    const graph = this.graphs.get(partition);
    if (!graph) return this.small.search(partition, query, k);
    const n = Math.min(k, graph.live.size);
    if (n <= 0) return [];
    const res = graph.index.searchKnn(Array.from(query), n);
    return res.neighbors.map((id, i) => ({ id, cosine: 1 - (res.distances[i] as number) }));
  }
}
