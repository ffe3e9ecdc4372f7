/** What the hit decision sees of a query or a stored entry. */
export interface Side {
  text: string;
  vector: Float32Array;
}

/**
 * Turns a candidate into `similarity_score` in [0, 1], the number `similarity_threshold` is
 * compared with. `cosine` is the raw cosine of the two vectors; `runnerUp`, when the partition
 * holds another question, is the query's cosine with the nearest one after the candidate.
 */
export interface HitScorer {
  readonly id: string;
  score(query: Side, candidate: Side, cosine: number, runnerUp?: number): number;
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
