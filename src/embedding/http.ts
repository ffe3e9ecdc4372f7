import { EmbedderUnavailableError, type Embedder } from './interface.ts';

export interface HttpEmbedderOptions {
  /** Base URL of an OpenAI-compatible server; `/v1/embeddings` is appended. */
  baseUrl: string;
  model: string;
  apiKey?: string;
  /** Known dimensions; otherwise learnt from a probe at creation. */
  dimensions?: number;
  maxBatch?: number;
  timeoutMs?: number;
}

interface EmbeddingsResponse {
  data?: { embedding?: unknown; index?: unknown }[];
}

function normalise(values: number[]): Float32Array {
  const v = Float32Array.from(values);
  let norm = 0;
  for (const x of v) norm += x * x;
  norm = Math.sqrt(norm) || 1;
  for (let i = 0; i < v.length; i++) v[i] = (v[i] as number) / norm;
  return v;
}

/** Embeds through an OpenAI-compatible `POST /v1/embeddings` endpoint run by the user. */
class HttpEmbedder implements Embedder {
  readonly maxBatch: number;
  dimensions: number;
  private readonly url: string;

  /** The embeddings endpoint it calls. */
  get endpoint(): string {
    return this.url;
  }

  constructor(private readonly opts: HttpEmbedderOptions) {
    this.maxBatch = opts.maxBatch ?? 64;
    this.dimensions = opts.dimensions ?? 0;
    this.url = `${opts.baseUrl.replace(/\/+$/, '').replace(/\/v1$/, '')}/v1/embeddings`;
  }

  /**
   * The model and its dimensions: vectors of another model are never compared with this one's,
   * and a server that now answers with another number of dimensions (another model under the
   * same name) makes the stored vectors another embedder's, skipped, instead of mixed in.
   */
  get id(): string {
    return `http:${this.opts.model}@${this.dimensions}`;
  }

  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    const out: Float32Array[] = [];
    for (let i = 0; i < texts.length; i += this.maxBatch) {
      out.push(...(await this.call(texts.slice(i, i + this.maxBatch))));
    }
    return out;
  }

  private async call(input: readonly string[]): Promise<Float32Array[]> {
    let res: Response;
    try {
      res = await fetch(this.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(this.opts.apiKey ? { authorization: `Bearer ${this.opts.apiKey}` } : {}),
        },
        body: JSON.stringify({ model: this.opts.model, input }),
        signal: AbortSignal.timeout(this.opts.timeoutMs ?? 10_000),
      });
    } catch (err) {
      throw new EmbedderUnavailableError(`embedding server ${this.url} did not answer: ${(err as Error).message}`);
    }
    if (!res.ok) {
      const text = (await res.text().catch(() => '')).slice(0, 200);
      throw new EmbedderUnavailableError(`embedding server ${this.url} answered ${res.status}: ${text}`);
    }
    const body = (await res.json().catch(() => null)) as EmbeddingsResponse | null;
    const data = body?.data;
    if (!Array.isArray(data) || data.length !== input.length) {
      throw new EmbedderUnavailableError(
        `embedding server ${this.url} returned ${Array.isArray(data) ? data.length : 'no'} vectors for ${input.length} texts`,
      );
    }
    const vectors: Float32Array[] = new Array(input.length);
    data.forEach((d, i) => {
      const index = typeof d.index === 'number' ? d.index : i;
      const e = d.embedding;
      if (
        !Array.isArray(e) ||
        e.some((x) => typeof x !== 'number') ||
        !Number.isInteger(index) ||
        index < 0 ||
        index >= input.length ||
        vectors[index] !== undefined
      ) {
        throw new EmbedderUnavailableError(`embedding server ${this.url} returned a malformed vector`);
      }
      if (this.dimensions === 0) this.dimensions = e.length;
      if (e.length !== this.dimensions) {
        throw new EmbedderUnavailableError(`embedding server ${this.url} returned ${e.length} dimensions, expected ${this.dimensions}`);
      }
      vectors[index] = normalise(e as number[]);
    });
    return vectors;
  }

  async close(): Promise<void> {}
}

/** The dimensions given are not those of the model's vectors. */
export class DimensionsMismatchError extends Error {
  override readonly name = 'DimensionsMismatchError';
  constructor(
    readonly given: number,
    readonly actual: number,
    readonly url: string,
  ) {
    super(`${url} returns vectors of ${actual} dimensions, not ${given}`);
  }
}

/**
 * Creates the embedder. It embeds one probe text: without `dimensions`, to learn them; with them,
 * to check them, so that a wrong number is refused at start rather than found at the first
 * embedding (`DimensionsMismatchError`). A server that does not answer the check is checked at
 * its first embedding, as the embedder is tried again until it embeds.
 */
export async function createHttpEmbedder(opts: HttpEmbedderOptions): Promise<Embedder> {
  const probe = new HttpEmbedder({ ...opts, dimensions: undefined });
  if (!opts.dimensions) {
    await probe.embed(['dimension probe']);
    return probe;
  }
  const e = new HttpEmbedder(opts);
  try {
    await probe.embed(['dimension probe']);
  } catch (err) {
    if (err instanceof EmbedderUnavailableError) return e;
    throw err;
  }
  if (probe.dimensions !== e.dimensions) throw new DimensionsMismatchError(e.dimensions, probe.dimensions, e.endpoint);
  return e;
}
