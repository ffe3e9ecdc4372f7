import type { FastifyInstance } from 'fastify';
import type { Message } from '../../cache/canonical.ts';
import { StorageQuotaError } from '../../store/quota.ts';
import type { AppContext } from '../context.ts';
import { ApiError } from '../errors.ts';
import type { Metrics } from '../metrics.ts';
import { responses, storeBodySchema, storeResponseSchema } from '../schemas.ts';
import { requireAccount } from './util.ts';

interface StoreBody {
  messages: Message[];
  answer: string;
  model?: string;
  tokens_used?: number;
  namespace?: string;
  ttl_seconds?: number;
}

const count = (n: number): string => n.toLocaleString('en-US');

/**
 * 403 STORAGE_QUOTA_EXCEEDED: waiting does not make room (as it would for a 429), and the server is
 * not at fault (as a 5xx, 507 among them, would say, and clients retry). Says how to make room.
 */
function quotaExceeded(plan: string, err: StorageQuotaError): ApiError {
  const reached =
    err.limit === 'max_entries'
      ? `The ${plan} plan keeps at most ${count(err.allowed)} entries per account, and this account has ${count(err.current)}.`
      : `The ${plan} plan keeps at most ${count(err.allowed)} bytes of entries per account; this account has ${count(err.current)}, and this store would add ${count(err.adding)}.`;
  return new ApiError(
    'STORAGE_QUOTA_EXCEEDED',
    `${reached} Nothing stored was removed: make room by deleting entries you no longer need (DELETE /api/v1/entries/{id}), or move the account to a larger plan.`,
    { limit: err.limit, allowed: err.allowed, current: err.current, adding: err.adding },
  );
}

export function storeRoute(app: FastifyInstance, ctx: AppContext, metrics: Metrics): void {
  app.post<{ Body: StoreBody }>(
    '/api/v1/store',
    {
      config: { route: 'store' },
      schema: {
        summary: 'Cache an answer obtained from an LLM provider',
        body: storeBodySchema(ctx.config.limits),
        response: responses(storeResponseSchema, [400, 401, 403, 413, 415, 429, 500, 503]),
      },
    },
    async (request) => {
      const account = requireAccount(request);
      const b = request.body;
      const r = await ctx.cache
        .store(account, {
          messages: b.messages,
          answer: b.answer,
          model: b.model ?? 'unknown',
          tokensUsed: b.tokens_used,
          namespace: b.namespace,
          ttlSeconds: b.ttl_seconds,
        })
        .catch((err: unknown) => {
          if (!(err instanceof StorageQuotaError)) throw err;
          metrics.storesRefused.inc({ limit: err.limit });
          throw quotaExceeded(account.plan, err);
        });
      return {
        stored: r.stored,
        message: `Response cached (${r.cacheTypesStored.join(' and ')})`,
        cache_types_stored: r.cacheTypesStored,
        storage_time_ms: r.storageTimeMs,
        entry_id: r.entryId,
        prompt_hash: r.promptHash,
      };
    },
  );
}
