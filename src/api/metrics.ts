import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { bearer } from './auth.ts';
import { ApiError } from './errors.ts';

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

  /**
   * Adds the request hook and `GET /metrics`. With a `token`, `/metrics` needs it as a bearer
   * token: the counts are of every account's traffic, for the operator, not for account holders.
   */
  install(app: FastifyInstance, token: string | null = null): void {
    const expected = token === null ? null : digest(token);
    app.addHook('onResponse', (request, reply, done) => {
      this.http.observe(
        { method: request.method, route: request.routeOptions.url ?? 'unknown', status: String(reply.statusCode) },
        reply.elapsedTime / 1000,
      );
      done();
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
