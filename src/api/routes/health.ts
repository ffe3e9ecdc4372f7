import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AppContext } from '../context.ts';
import { ApiError } from '../errors.ts';
import { healthResponseSchema, healthzResponseSchema, responses } from '../schemas.ts';
import { requireAccount } from './util.ts';

/** The refusal of a service that is not ready; why is logged, not sent. */
function unavailable(request: FastifyRequest, { checks, error }: { checks: Record<string, string>; error?: unknown }): ApiError {
  request.log.warn({ err: error, checks }, 'not ready');
  const failing = Object.entries(checks)
    .filter(([, v]) => v === 'unavailable' || v === 'damaged')
    .map(([k, v]) => `${k}: ${v}`)
    .join('; ');
  return new ApiError('SERVICE_UNAVAILABLE', `Reprise is not ready (${failing})`);
}

export function healthRoute(app: FastifyInstance, ctx: AppContext): void {
  app.get(
    '/api/v1/health',
    {
      config: { route: 'health' },
      schema: {
        summary: 'Tests an integration: the key works and the cache answers',
        description: 'Uses the generic envelope {status, data, message, timestamp}.',
        response: responses(healthResponseSchema, [401, 429, 500, 503]),
      },
    },
    async (request) => {
      const account = requireAccount(request);
      const ready = await ctx.ready();
      if (!ready.ok) throw unavailable(request, ready);
      return {
        status: 'success',
        data: {
          healthy: true,
          version: ctx.version,
          account: { id: account.id, name: account.name, plan: account.plan },
          cache_types: ctx.cache.semanticEnabled ? ['exact', 'semantic'] : ['exact'],
          checks: ready.checks,
        },
        message: 'Reprise is healthy',
        timestamp: new Date().toISOString(),
      };
    },
  );

  app.get(
    '/healthz',
    {
      schema: {
        summary: 'Readiness, for load balancers: needs no key',
        security: [],
        response: responses(healthzResponseSchema, [429, 500, 503]),
      },
    },
    async (request) => {
      const ready = await ctx.ready();
      if (!ready.ok) throw unavailable(request, ready);
      return { status: 'ok', checks: ready.checks };
    },
  );
}
