export interface Neighbour {
  id: number;
  /** Cosine similarity of unit vectors, in [-1, 1]. */
  cosine: number;
}

/**
 * Nearest-neighbour search over unit vectors, split into partitions (an account and its
 * conversation context). A search never crosses partitions.
 */
export interface VectorIndex {
  add(partition: string, id: number, vector: Float32Array): void;
  /** Adds many vectors at once (a bulk load; the load at start adds one at a time, between requests). */
  addMany(items: readonly { partition: string; id: number; vector: Float32Array }[]): void;
  remove(partition: string, id: number): void;
  /** The partitions that hold vectors. */
  partitions(): string[];
  /** Removes a whole partition. */
  drop(partition: string): void;
  /** Up to `k` nearest vectors of the partition, best first. */
  search(partition: string, query: Float32Array, k: number): Neighbour[];
  /** How the partition is searched now, where the index has more than one way (`HybridIndex`). */
  stateOf?(partition: string): 'exact' | 'promoting' | 'graph' | null;
  /** Settles when no partition's graph is being built (`HybridIndex`). */
  promoted?(): Promise<void>;
  /** Number of vectors held, over all partitions. */
  readonly size: number;
}
