import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { bearer } from './auth.ts';
import { ApiError } from './errors.ts';

/** Marks the hooks `install` adds to routes, so a route copied with its hooks (HEAD) gets one. */
const OBSERVES = Symbol('reprise.observes');

type Observer = ((request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void) & { [OBSERVES]: true };

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Prometheus metrics of one app: HTTP requests by route and status, check outcomes, and stores refused for storage limits. */
export class Metrics {
  readonly registry = new Registry();
  readonly http = new Histogram({
    name: 'reprise_http_request_duration_seconds',
    help: 'HTTP request duration by route and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1],
    registers: [this.registry],
  });
  readonly checks = new Counter({
    name: 'reprise_checks_total',
    help: 'Check requests by outcome',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly storesRefused = new Counter({
    name: 'reprise_stores_refused_total',
    help: "Stores refused for a storage limit of the account's plan, by limit",
    labelNames: ['limit'] as const,
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'reprise_' });
  }

  /** The outcomes' counters, bound once: a label object looked up on each check costs more than the count. */
  private readonly outcomes = new Map<string, { inc(): void }>();

  /** Counts a check by its outcome (`exact_hit`, `semantic_hit`, `miss`). */
  countCheck(outcome: string): void {
    let counter = this.outcomes.get(outcome);
    if (counter === undefined) {
      counter = this.checks.labels(outcome);
      this.outcomes.set(outcome, counter);
    }
    counter.inc();
  }

  /**
   * An onResponse hook observing the duration of the requests to `route`, with the histogram's
   * children bound once per method and status.
   */
  private observer(route: string): Observer {
    const children = new Map<string, Map<number, { observe(v: number): void }>>();
    const hook = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
      const method = request.method;
      let byStatus = children.get(method);
      if (byStatus === undefined) {
        byStatus = new Map();
        children.set(method, byStatus);
      }
      const status = reply.statusCode;
      let child = byStatus.get(status);
      if (child === undefined) {
        child = this.http.labels({ method, route, status: String(status) });
        byStatus.set(status, child);
      }
      child.observe(reply.elapsedTime / 1000);
      done();
    };
    return Object.assign(hook, { [OBSERVES]: true as const });
  }

  /**
   * Adds the request hook and `GET /metrics`. With a `token`, `/metrics` needs it as a bearer
   * token: the counts are of every account's traffic, for the operator, not for account holders.
   */
  install(app: FastifyInstance, token: string | null = null): void {
    const expected = token === null ? null : digest(token);
    // Each route observes its requests with its own URL as the label, in a hook of its own: the
    // URL read back from request.routeOptions is an object built afresh on every read. Requests
    // no route takes (404, 405, a path refused before routing) are observed as "unknown".
    app.addHook('onRoute', (route) => {
      const own = (h: unknown) => typeof h === 'function' && OBSERVES in h;
      const hooks = (Array.isArray(route.onResponse) ? route.onResponse : route.onResponse ? [route.onResponse] : []).filter(
        (h) => !own(h),
      );
      route.onResponse = [...hooks, this.observer(route.url)];
    });
    const unrouted = this.observer('unknown');
    app.addHook('onResponse', (request, reply, done) => {
      if (request.is404) unrouted(request, reply, done);
      else done();
    });
    app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
      // The header is read as an API key's is: the scheme in any case, spaces or a tab after it.
      if (expected !== null && !timingSafeEqual(digest(bearer(request.headers.authorization) ?? ''), expected)) {
        throw new ApiError('INVALID_API_KEY', 'GET /metrics needs Authorization: Bearer <REPRISE_METRICS_TOKEN>');
      }
      reply.header('Content-Type', this.registry.contentType);
      return this.registry.metrics();
    });
  }
}
