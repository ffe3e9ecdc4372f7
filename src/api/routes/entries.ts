import type { FastifyInstance } from 'fastify';
import { promptHash } from '../../cache/canonical.ts';
import type { Entry, EntryOrder, EntryPreview, HitDelta } from '../../store/interface.ts';
import type { AppContext } from '../context.ts';
import { ApiError, invalid } from '../errors.ts';
import {
  entryDeletedResponseSchema,
  entryDetailResponseSchema,
  entryListResponseSchema,
  responses,
  STORABLE_TEXT,
  WHOLE_NUMBER,
} from '../schemas.ts';
import { requireAccount } from './util.ts';

export interface EntryListQuery {
  page?: string;
  per_page?: string;
  q?: string;
  namespace?: string;
  order?: EntryOrder;
}

export const entryListQuerySchema = {
  type: 'object',
  properties: {
    page: { type: 'string', description: 'Page number, from 1 to 1,000,000 (default 1).' },
    per_page: { type: 'string', description: 'Entries per page, 1 to 100 (default 20).' },
    q: { type: 'string', maxLength: 200, pattern: STORABLE_TEXT, description: 'Text searched in the question, answer and model.' },
    namespace: { type: 'string', maxLength: 128, pattern: STORABLE_TEXT, description: 'Only entries stored in this namespace.' },
    order: {
      type: 'string',
      enum: ['recent', 'hits', 'slowest'],
      default: 'recent',
      description: 'recent, most hits, or slowest mean lookup first',
    },
  },
} as const;

/** The query as documented: `page` and `per_page` with their pattern, which `whole()` checks so that its message gives the range. */
const entryListQueryDoc = {
  ...entryListQuerySchema,
  properties: {
    ...entryListQuerySchema.properties,
    page: { ...entryListQuerySchema.properties.page, pattern: WHOLE_NUMBER },
    per_page: { ...entryListQuerySchema.properties.per_page, pattern: WHOLE_NUMBER },
  },
};

/**
 * The figures of an entry as listed, with the hits counted on this node and not yet written
 * (`pending`) added to its count, its mean lookup time and its last hit, when they were on its
 * current answer.
 */
function entryFigures(
  e: Omit<EntryPreview, 'queryPreview' | 'queryLength' | 'answerPreview' | 'answerLength'>,
  pending?: Readonly<HitDelta>,
) {
  const p = pending !== undefined && pending.createdAt === e.createdAt ? pending : undefined;
  const hits = e.usageCount + (p?.count ?? 0);
  const lookupMs = e.lookupMsTotal + (p?.lookupMs ?? 0);
  const lastHitAt = p !== undefined && (e.lastHitAt === null || p.at > e.lastHitAt) ? p.at : e.lastHitAt;
  return {
    model: e.model,
    namespace: e.namespace,
    tokens: e.tokens,
    usage_count: hits,
    average_lookup_ms: hits > 0 ? Math.round((lookupMs / hits) * 1000) / 1000 : null,
    created_at: e.createdAt,
    last_hit_at: lastHitAt,
    expires_at: e.expiresAt,
    cache_types: e.hasVector ? ['exact', 'semantic'] : ['exact'],
  };
}

/** An entry as listed (see `entryFigures`). */
export function entrySummary(e: Entry, pending?: Readonly<HitDelta>) {
  const { model, ...figures } = entryFigures({ ...e, hasVector: e.vector !== null }, pending);
  return { id: e.publicId, question: e.queryText, answer: e.answer, model, ...figures };
}

export function entryDetail(e: Entry, pending?: Readonly<HitDelta>) {
  return { ...entrySummary(e, pending), messages: e.messages, prompt_hash: promptHash(e.messages) };
}

/** A page of an account's entries in the spec's list shape. */
export async function listEntries(ctx: AppContext, accountId: string, q: EntryListQuery) {
  const page = whole('page', q.page, 1, 1, 1_000_000);
  const perPage = whole('per_page', q.per_page, 20, 1, 100);
  const { entries, total } = await ctx.store.listEntries(accountId, { page, perPage, q: q.q, namespace: q.namespace, order: q.order });
  return {
    data: entries.map((e) => entrySummary(e, ctx.cache.pendingHits(e.id))),
    pagination: { page, per_page: perPage, total, total_pages: Math.ceil(total / perPage) },
  };
}

/**
 * A page of an account's entries as the dashboard lists them: the first `chars` UTF-16 code
 * units of each question and answer and their lengths, in place of the whole texts.
 */
export async function listEntryPreviews(ctx: AppContext, accountId: string, q: EntryListQuery, chars: number) {
  const page = whole('page', q.page, 1, 1, 1_000_000);
  const perPage = whole('per_page', q.per_page, 20, 1, 100);
  const { entries, total } = await ctx.store.listEntryPreviews(
    accountId,
    { page, perPage, q: q.q, namespace: q.namespace, order: q.order },
    chars,
  );
  return {
    data: entries.map((e) => ({
      id: e.publicId,
      ...entryFigures(e, ctx.cache.pendingHits(e.id)),
      question_preview: e.queryPreview,
      question_length: e.queryLength,
      answer_preview: e.answerPreview,
      answer_length: e.answerLength,
    })),
    pagination: { page, per_page: perPage, total, total_pages: Math.ceil(total / perPage) },
  };
}

const wholeNumber = new RegExp(WHOLE_NUMBER);

function whole(field: string, raw: string | undefined, fallback: number, min: number, max: number): number {
  if (raw === undefined || raw === '') return fallback;
  const n = wholeNumber.test(raw) ? Number(raw) : Number.NaN;
  if (!(n >= min && n <= max)) throw invalid(field, `an integer from ${min} to ${max}`, raw);
  return n;
}

export function parseEntryId(raw: string): number {
  if (!/^\d{1,16}$/.test(raw) || !Number.isSafeInteger(Number(raw)) || Number(raw) < 1) {
    throw new ApiError('INVALID_INPUT', 'id must be a positive integer', {
      field: 'id',
      expected: 'a positive integer',
      received: raw.slice(0, 40),
    });
  }
  return Number(raw);
}

export function entriesRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.get<{ Querystring: EntryListQuery }>(
    '/api/v1/entries',
    {
      config: { route: 'entries', swaggerTransform: ({ schema, url }) => ({ schema: { ...schema, querystring: entryListQueryDoc }, url }) },
      schema: {
        summary: "List the account's cached entries",
        querystring: entryListQuerySchema,
        response: responses(entryListResponseSchema, [400, 401, 429, 500, 503]),
      },
    },
    async (request) => listEntries(ctx, requireAccount(request).id, request.query),
  );

  app.get<{ Params: { id: string } }>(
    '/api/v1/entries/:id',
    {
      config: { route: 'entries' },
      schema: {
        summary: 'One cached entry with its conversation',
        response: responses(entryDetailResponseSchema, [400, 401, 404, 429, 500, 503]),
      },
    },
    async (request) => {
      const account = requireAccount(request);
      const entry = await ctx.store.getEntry(account.id, parseEntryId(request.params.id));
      if (!entry) throw new ApiError('NOT_FOUND', `No entry ${request.params.id}`);
      return entryDetail(entry, ctx.cache.pendingHits(entry.id));
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/api/v1/entries/:id',
    {
      config: { route: 'entries' },
      schema: {
        summary: 'Delete a cached entry; it stops matching at once',
        response: responses(entryDeletedResponseSchema, [400, 401, 404, 413, 415, 429, 500, 503]),
      },
    },
    async (request) => {
      const account = requireAccount(request);
      const id = parseEntryId(request.params.id);
      if (!(await ctx.cache.deleteEntry(account, id))) throw new ApiError('NOT_FOUND', `No entry ${request.params.id}`);
      return { deleted: true, id };
    },
  );
}
