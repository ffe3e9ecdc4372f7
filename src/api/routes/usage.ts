import type { FastifyInstance } from 'fastify';
import type { Account } from '../../store/interface.ts';
import type { AppContext } from '../context.ts';
import { invalid } from '../errors.ts';
import { responses, usageResponseSchema } from '../schemas.ts';
import { requireAccount } from './util.ts';

export interface UsageQuery {
  from?: string;
  to?: string;
  granularity?: 'hour' | 'day';
}

/**
 * An ISO 8601 date (`2026-11-27`) or date-time (`2026-11-27T10:00`, `…:30`, `…:30.5`, with `Z`, an
 * offset such as `+05:30`, or nothing: times are UTC, as everywhere in the API). Nothing else is
 * taken: `Date.parse` would read "2026-11-27junk" as a day in June.
 */
const ISO_INSTANT = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?([Zz]|[+-]\d{2}(?::?\d{2})?)?)?$/;

function instant(field: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const m = ISO_INSTANT.exec(value);
  const ms = m ? instantOf(m) : null;
  if (ms === null) throw invalid(field, 'an ISO 8601 date or date-time (UTC unless it gives an offset)', value);
  return ms;
}

/** The instant the parts of an `ISO_INSTANT` match name, or null when one is out of range. */
function instantOf(m: RegExpExecArray): number | null {
  const [year, month, day, hour, minute, second] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i] ?? 0)) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (hour > 23 || minute > 59 || second > 59) return null;
  const d = new Date(0);
  // setUTCFullYear, not Date.UTC: Date.UTC takes the years 0 to 99 for 1900 to 1999.
  d.setUTCFullYear(year, month - 1, day);
  if (d.getUTCFullYear() !== year || d.getUTCMonth() !== month - 1 || d.getUTCDate() !== day) return null;
  const fraction = m[7] === undefined ? 0 : Math.floor(Number(`0.${m[7]}`) * 1000);
  let offset = 0;
  const zone = m[8];
  if (zone !== undefined && zone.toUpperCase() !== 'Z') {
    const digits = zone.slice(1).replace(':', '');
    const [h, min] = [Number(digits.slice(0, 2)), Number(digits.slice(2) || '0')];
    if (h > 23 || min > 59) return null;
    offset = (zone[0] === '-' ? -1 : 1) * (h * 60 + min) * 60_000;
  }
  return d.getTime() + ((hour * 60 + minute) * 60 + second) * 1000 + fraction - offset;
}

const HOUR_MS = 3_600_000;
const LAST_INSTANT = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/** The usage body (and, with `granularity`, its series) of an account. */
export async function usageBody(ctx: AppContext, account: Account, query: UsageQuery) {
  const fromMs = instant('from', query.from);
  const toMs = instant('to', query.to);
  if (fromMs !== undefined && toMs !== undefined && fromMs >= toMs) throw invalid('to', 'a time after from', query.to);
  // Counts are kept per hour: the period is widened to whole hours, and says so. (Both ends are
  // capped at the last instant of year 9999: the ISO text of a later time, +010000-…, would sort
  // before every hour counted.)
  const hourFloor =
    fromMs === undefined ? undefined : new Date(Math.min(Math.floor(fromMs / HOUR_MS) * HOUR_MS, LAST_INSTANT)).toISOString();
  const to = toMs === undefined ? undefined : new Date(Math.min(Math.ceil(toMs / HOUR_MS) * HOUR_MS, LAST_INSTANT)).toISOString();
  const granularity = query.granularity;
  const [u, storage] = await Promise.all([ctx.cache.usage(account, hourFloor, to, granularity), ctx.cache.storage(account)]);
  const series = u.series
    ? u.series.map((p) => ({
        start: p.start,
        total_requests: p.totalRequests,
        cache_hits: p.cacheHits,
        cache_misses: p.cacheMisses,
        exact_hits: p.exactHits,
        semantic_hits: p.semanticHits,
        hit_rate_percentage: p.hitRatePercentage,
        average_lookup_time_ms: p.averageLookupTimeMs,
        tokens_saved: p.tokensSaved,
        estimated_cost_savings: p.estimatedCostSavings,
        estimated_cost_savings_usd: p.estimatedCostSavingsUsd,
        stores: p.stores,
      }))
    : undefined;
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
    storage: {
      entries: storage.entries,
      stored_bytes: storage.bytes,
      max_entries: storage.maxEntries,
      max_stored_bytes: storage.maxStoredBytes,
    },
    period: { from: hourFloor ?? null, to: to ?? null },
    ...(series ? { granularity, series } : {}),
  };
}

export const usageQuerySchema = {
  type: 'object',
  properties: {
    from: { type: 'string', description: 'Count from this time (ISO 8601, inclusive; rounded down to the hour).' },
    to: { type: 'string', description: 'Count up to this time (ISO 8601, exclusive; rounded up to the hour).' },
    granularity: {
      type: 'string',
      enum: ['hour', 'day'],
      description: 'Adds `series`: the same figures per hour or per UTC day, oldest first (periods without requests are left out).',
    },
  },
} as const;

export function usageRoute(app: FastifyInstance, ctx: AppContext): void {
  app.get<{ Querystring: UsageQuery }>(
    '/api/v1/usage',
    {
      config: { route: 'usage' },
      schema: {
        summary: "The account's hit statistics and estimated savings",
        querystring: usageQuerySchema,
        response: responses(usageResponseSchema, [400, 401, 429, 500, 503]),
      },
    },
    async (request) => usageBody(ctx, requireAccount(request), request.query),
  );
}
