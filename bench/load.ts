import autocannon from 'autocannon';
import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';

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
  /** Requests per second from all connections together; as fast as answers come when absent. */
  rate?: number;
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
    ...(opts.rate !== undefined ? { overallRate: opts.rate } : {}),
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

export interface ProbeResult {
  requests: number;
  /** Milliseconds, to the microsecond. */
  p50: number;
  p99: number;
  errors: number;
}

/**
 * Sends the same request at about `rate` per second over `connections` keep-alive connections
 * for `duration` seconds, timing each to the microsecond (autocannon reports whole milliseconds,
 * too coarse for a sub-millisecond p99). Paced, so the prober's own load stays small and the
 * same with or without other traffic.
 */
export async function probe(opts: {
  url: string;
  headers?: Record<string, string>;
  body: string;
  connections: number;
  rate: number;
  duration: number;
}): Promise<ProbeResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: opts.connections });
  const headers = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(opts.body)), ...opts.headers };
  const times: number[] = [];
  let errors = 0;
  const end = performance.now() + opts.duration * 1000;
  const one = () =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      const req = request(opts.url, { method: 'POST', agent, headers }, (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode === 200) times.push(performance.now() - t0);
          else errors++;
          resolve();
        });
      });
      req.on('error', () => {
        errors++;
        resolve();
      });
      req.end(opts.body);
    });
  const gap = (1000 * opts.connections) / opts.rate;
  await Promise.all(
    Array.from({ length: opts.connections }, async (_, c) => {
      // Each connection sends on its own schedule, offset from the others'.
      let next = performance.now() + (gap * c) / opts.connections;
      while (next < end) {
        const wait = next - performance.now();
        if (wait > 0) await delay(wait);
        await one();
        next = Math.max(next + gap, performance.now());
      }
    }),
  );
  agent.destroy();
  times.sort((a, b) => a - b);
  const at = (q: number) => Math.round((times[Math.min(times.length - 1, Math.floor(times.length * q))] ?? Number.NaN) * 1000) / 1000;
  return { requests: times.length, p50: at(0.5), p99: at(0.99), errors };
}
