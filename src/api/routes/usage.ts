import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.ts';
import { invalid } from '../errors.ts';
import { errorResponseSchema, usageResponseSchema } from '../schemas.ts';
import { requireAccount } from './util.ts';

interface UsageQuery {
  from?: string;
  to?: string;
}

function instant(field: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const ms = Date.parse(value);
  if (!/^\d{4}-\d{2}-\d{2}/.test(value) || Number.isNaN(ms)) {
    throw invalid(field, 'an ISO 8601 date or date-time', value);
  }
  return new Date(ms).toISOString();
}

export function usageRoute(app: FastifyInstance, ctx: AppContext): void {
  app.get<{ Querystring: UsageQuery }>(
    '/api/v1/usage',
    {
      config: { route: 'usage' },
      schema: {
        summary: "The account's hit statistics and estimated savings",
        querystring: {
          type: 'object',
          properties: {
            from: { type: 'string', description: 'Count from this time (ISO 8601, inclusive; rounded down to the hour).' },
            to: { type: 'string', description: 'Count up to this time (ISO 8601, exclusive).' },
          },
        },
        response: { 200: usageResponseSchema, '4xx': errorResponseSchema },
      },
    },
    async (request) => {
      const account = requireAccount(request);
      const from = instant('from', request.query.from);
      const to = instant('to', request.query.to);
      if (from && to && from >= to) throw invalid('to', 'a time after from', request.query.to);
      const hourFloor = from ? new Date(Math.floor(Date.parse(from) / 3_600_000) * 3_600_000).toISOString() : undefined;
      const u = await ctx.cache.usage(account, hourFloor, to);
      return {
        total_requests: u.totalRequests,
        cache_hits: u.cacheHits,
        cache_misses: u.cacheMisses,
        hit_rate_percentage: u.hitRatePercentage,
        exact_hits: u.exactHits,
        semantic_hits: u.semanticHits,
        average_lookup_time_ms: u.averageLookupTimeMs,
        performance: {
          fast_responses: u.exactHits,
          smart_responses: u.semanticHits,
          estimated_cost_savings: u.estimatedCostSavings,
        },
        tokens_saved: u.tokensSaved,
        stores: u.stores,
        period: { from: hourFloor ?? null, to: to ?? null },
      };
    },
  );
}
