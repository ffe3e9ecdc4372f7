import type { FastifyInstance, FastifyReply } from 'fastify';
import type { CacheType, CheckResult, Hit } from '../../cache/service.ts';
import { Lru } from '../../util/lru.ts';
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

/** An exact hit's body as the fields' values make it (JSON.stringify of the spec's shape). */
function hitBody(result: Hit) {
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

/** Stand-ins for the two fields of an exact hit's body that change from one hit to the next. */
const LOOKUP = '\u0000lookup\u0000';
const USES = '\u0000uses\u0000';
const LOOKUP_FIELD = `"lookup_time_ms":${JSON.stringify(LOOKUP)}`;
const USES_FIELD = `"usage_count":${JSON.stringify(USES)}`;

/** The longest answer whose exact hits' text is kept (`ExactBodies`): at most 4,096 × 16 K characters. */
const ANSWER_CHARS = 16_384;

/** The text of an exact hit's body around its time and count, and the values it was made of. */
interface HitText {
  head: string;
  middle: string;
  tail: string;
  of: Hit;
}

/**
 * The bodies of exact hits, as JSON.stringify writes them, made by filling an entry's text in
 * with the hit's lookup time and use count: the rest of the body is the same from one hit on an
 * entry to the next. The text is made once per entry (the last 4,096 entries hit) by
 * JSON.stringify itself, with stand-ins for the two values.
 */
class ExactBodies {
  private readonly texts = new Lru<number, HitText>(4096);

  /**
   * The body of `hit` (an exact hit), or null for values the text cannot hold as JSON.stringify
   * writes them, and for an answer over ANSWER_CHARS: texts of long answers would hold as much
   * memory again as the entries they are made of, and writing one out costs little beside it.
   */
  of(hit: Hit): string | null {
    if (hit.answer.length > ANSWER_CHARS) return null;
    if (!Number.isFinite(hit.lookupTimeMs) || !Number.isFinite(hit.metadata.usageCount)) return null;
    let text = this.texts.get(hit.entryId);
    if (text === undefined || !sameText(text.of, hit)) {
      const made = makeText(hit);
      if (made === null) return null;
      text = made;
      this.texts.set(hit.entryId, text);
    }
    return `${text.head}${hit.lookupTimeMs}${text.middle}${hit.metadata.usageCount}${text.tail}`;
  }
}

/** Whether two hits' bodies differ only in their time and count. */
function sameText(a: Hit, b: Hit): boolean {
  return (
    a.answer === b.answer &&
    a.cacheType === b.cacheType &&
    a.tokensSaved === b.tokensSaved &&
    a.createdAt === b.createdAt &&
    a.similarityScore === b.similarityScore &&
    a.metadata.model === b.metadata.model &&
    a.metadata.originalTokens === b.metadata.originalTokens &&
    a.entryId === b.entryId
  );
}

function makeText(hit: Hit): HitText | null {
  const body = hitBody(hit) as Record<string, unknown> & { metadata: Record<string, unknown> };
  body.lookup_time_ms = LOOKUP;
  body.metadata.usage_count = USES;
  const json = JSON.stringify(body);
  const at = json.indexOf(LOOKUP_FIELD);
  const uses = json.indexOf(USES_FIELD);
  if (at < 0 || uses < at) return null;
  const lookupValue = at + LOOKUP_FIELD.length - JSON.stringify(LOOKUP).length;
  const usesValue = uses + USES_FIELD.length - JSON.stringify(USES).length;
  return {
    head: json.slice(0, lookupValue),
    middle: json.slice(at + LOOKUP_FIELD.length, usesValue),
    tail: json.slice(uses + USES_FIELD.length),
    of: hit,
  };
}

export function checkRoute(app: FastifyInstance, ctx: AppContext, metrics: Metrics): void {
  const exactBodies = new ExactBodies();
  const respond = (result: CheckResult, reply: FastifyReply): unknown => {
    if (result.cacheHit && result.cacheType === 'exact') {
      metrics.countCheck('exact_hit');
      const text = exactBodies.of(result);
      if (text !== null) {
        reply.header('Content-Type', 'application/json; charset=utf-8');
        return text;
      }
      return hitBody(result);
    }
    metrics.countCheck(result.cacheHit ? 'semantic_hit' : 'miss');
    if (result.cacheHit) return hitBody(result);
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
    (request, reply) => {
      const account = requireAccount(request);
      const b = request.body;
      const result = ctx.cache.check(account, {
        messages: b.messages,
        similarityThreshold: b.similarity_threshold,
        cacheTypes: b.cache_types,
        namespace: b.namespace,
        model: b.model,
      });
      return result instanceof Promise ? result.then((r) => respond(r, reply)) : respond(result, reply);
    },
  );
}
