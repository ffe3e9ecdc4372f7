import type { FastifyInstance } from 'fastify';
import type { Message } from '../../cache/canonical.ts';
import type { AppContext } from '../context.ts';
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

export function storeRoute(app: FastifyInstance, ctx: AppContext): void {
  app.post<{ Body: StoreBody }>(
    '/api/v1/store',
    {
      config: { route: 'store' },
      schema: {
        summary: 'Cache an answer obtained from an LLM provider',
        body: storeBodySchema(ctx.config.limits),
        response: responses(storeResponseSchema, [400, 401, 413, 415, 429, 500, 503]),
      },
    },
    async (request) => {
      const account = requireAccount(request);
      const b = request.body;
      const r = await ctx.cache.store(account, {
        messages: b.messages,
        answer: b.answer,
        model: b.model ?? 'unknown',
        tokensUsed: b.tokens_used,
        namespace: b.namespace,
        ttlSeconds: b.ttl_seconds,
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
