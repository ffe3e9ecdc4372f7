/**
 * An embedder turns texts into unit-length vectors. It says who it is: stored
 * vectors carry `id`, and vectors of different embedders are never compared.
 */
export interface Embedder {
  /** Stable identifier of the model and its configuration, e.g. `use-lite@1`. */
  readonly id: string;
  /** Length of every vector it returns. */
  readonly dimensions: number;
  /** Where it computes, for the logs (e.g. `onnx` or `tfjs-wasm` for USE-lite, `http`). */
  readonly backend?: string;
  /** Largest number of texts it takes in one call. Callers may pass more; it splits them. */
  readonly maxBatch: number;
  /**
   * Embeds texts; each returned vector is L2-normalised (norm 1). Order follows `texts`. An
   * embedder that remembers recent results keeps those of each `scope` (an account) apart, so
   * how fast a text comes back says nothing about what another account has asked.
   */
  embed(texts: readonly string[], scope?: string): Promise<Float32Array[]>;
  /** Releases workers and handles. */
  close(): Promise<void>;
}

/**
 * The embedder cannot embed now: its server failed or answered something unusable, or no worker
 * is running. Requests that needed it are answered 503 SERVICE_UNAVAILABLE, like a database
 * that is away, not 500.
 */
export class EmbedderUnavailableError extends Error {
  override readonly name = 'EmbedderUnavailableError';
  readonly unavailable = true;
}
