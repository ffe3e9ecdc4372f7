import type { Neighbour } from '../vector/interface.ts';

/** What the hit decision sees of a query or a stored entry. */
export interface Side {
  text: string;
  vector: Float32Array;
  /**
   * Whose entry it is (an account): a scorer that remembers what it read of stored texts keeps
   * each scope's apart, so how fast a check is answered says nothing about other accounts.
   */
  scope?: string;
}

/**
 * Turns a candidate into `similarity_score` in [0, 1], the number `similarity_threshold` is
 * compared with. `cosine` is the raw cosine of the two vectors; `runnerUp`, when the partition
 * holds another question, is the query's cosine with the nearest one after the candidate.
 */
export interface HitScorer {
  readonly id: string;
  score(query: Side, candidate: Side, cosine: number, runnerUp?: number): number;
  /**
   * Optional: when the two texts share a long passage and differ around it, the parts around it,
   * which are then scored alone as well (see `aroundShared`); null otherwise.
   */
  around?(query: Side, candidate: Side): { a: string; b: string } | null;
  /**
   * Optional: why the candidate is another request however near it is ("sort ascending" / "sort
   * descending", "10 miles to km" / "10 km to miles", "for 2 people" / "for 20 people"), or null.
   * Such a candidate is passed over for the next nearest, and is no rival to it.
   */
  differs?(query: Side, candidate: Side): string | null;
}

/**
 * The runner-up's cosine: the nearest neighbour other than the served entry, skipping entries
 * with the very same vector (the same text stored again is no rival); none when there is no other.
 */
export function runnerUpOf(neighbours: readonly Neighbour[], servedId: number, cosine: number): number | undefined {
  return neighbours.find((n) => mayRival(n, servedId, cosine))?.cosine;
}

/** Whether a neighbour can be the runner-up of the served entry: another entry, another vector. */
export function mayRival(n: Neighbour, servedId: number, cosine: number): boolean {
  return n.id !== servedId && Math.abs(n.cosine - cosine) > 1e-5;
}

export function dot(a: Float32Array, b: Float32Array): number {
  let s = 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) s += (a[i] as number) * (b[i] as number);
  return s;
}

/** The raw cosine, clamped to [0, 1]. */
export const cosineScorer: HitScorer = {
  id: 'cosine',
  score: (_q, _c, cosine) => Math.min(1, Math.max(0, cosine)),
};
