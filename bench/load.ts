import autocannon from 'autocannon';

export interface LoadResult {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  total: number;
  errors: number;
  non2xx: number;
}

export interface LoadOptions {
  url: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  /** A fixed body, or a function giving the body of the i-th request. */
  body?: string | ((i: number) => string);
  connections: number;
  /** Seconds, or a request count with `amount`. */
  duration?: number;
  amount?: number;
}

/** Runs autocannon against one URL and returns throughput and latency (ms). */
export async function load(opts: LoadOptions): Promise<LoadResult> {
  let i = 0;
  const body = opts.body;
  const result = await autocannon({
    url: opts.url,
    method: opts.method ?? 'POST',
    headers: { 'content-type': 'application/json', ...opts.headers },
    connections: opts.connections,
    ...(opts.amount !== undefined ? { amount: opts.amount } : { duration: opts.duration ?? 5 }),
    ...(typeof body === 'function'
      ? { requests: [{ setupRequest: (req: Record<string, unknown>) => ({ ...req, body: body(i++) }) }] }
      : { body }),
  } as autocannon.Options);
  return {
    requestsPerSecond: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    total: result.requests.total,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
  };
}
