import type { FastifyInstance } from 'fastify';
import type { CacheType, CheckResult } from '../../cache/service.ts';
import type { Message } from '../../cache/canonical.ts';
import type { AppContext } from '../context.ts';
import type { Metrics } from '../metrics.ts';
import { checkBodySchema, checkResponseSchema, responses } from '../schemas.ts';
import { requireAccount } from './util.ts';

interface CheckBody {
  messages: Message[];
  similarity_threshold?: number;
  cache_types?: CacheType[];
  namespace?: string;
  model?: string;
}

export function checkRoute(app: FastifyInstance, ctx: AppContext, metrics: Metrics): void {
  const respond = (result: CheckResult) => {
    metrics.countCheck(result.cacheHit ? (result.cacheType === 'exact' ? 'exact_hit' : 'semantic_hit') : 'miss');
    if (result.cacheHit) {
      return {
        cache_hit: true,
        answer: result.answer,
        cache_type: result.cacheType,
        lookup_time_ms: result.lookupTimeMs,
        tokens_saved: result.tokensSaved,
        created_at: result.createdAt,
        similarity_score: result.similarityScore,
        metadata: {
          model: result.metadata.model,
          original_tokens: result.metadata.originalTokens,
          usage_count: result.metadata.usageCount,
        },
        entry_id: result.entryId,
      };
    }
    return {
      cache_hit: false,
      message: 'No cached response found for these messages',
      prompt_hash: result.promptHash,
      lookup_time_ms: result.lookupTimeMs,
      suggested_action: 'Call your LLM provider, then POST the answer to /api/v1/store so later checks hit',
      search_results: {
        exact_checked: result.searchResults.exactChecked,
        semantic_checked: result.searchResults.semanticChecked,
        closest_match_score: result.searchResults.closestMatchScore,
      },
    };
  };
  app.post<{ Body: CheckBody }>(
    '/api/v1/check',
    {
      config: { route: 'check' },
      schema: {
        summary: 'Look up a cached answer for a conversation',
        body: checkBodySchema(ctx.config.limits),
        response: responses(checkResponseSchema, [400, 401, 413, 415, 429, 500, 503]),
      },
    },
    // Not async: an exact hit answered in process is sent without a promise.
    (request) => {
      const account = requireAccount(request);
      const b = request.body;
      const result = ctx.cache.check(account, {
        messages: b.messages,
        similarityThreshold: b.similarity_threshold,
        cacheTypes: b.cache_types,
        namespace: b.namespace,
        model: b.model,
      });
      return result instanceof Promise ? result.then(respond) : respond(result);
    },
  );
}
