import type { InputLimits } from '../config.ts';

/**
 * Text without NUL (U+0000) and without unpaired surrogates (a JSON `"\ud83d"` alone): PostgreSQL
 * cannot store a NUL, neither store can keep half a character as it was sent (each would give
 * back a different replacement), and no conversation needs either, so both are refused alike.
 * (The pattern is matched by code point: a surrogate pair, an emoji, is one character outside
 * the range.)
 */
export const STORABLE_TEXT = '^[^\\u0000\\uD800-\\uDFFF]*$';
const storableText = new RegExp(STORABLE_TEXT, 'u');

/** Whether a text passes `STORABLE_TEXT`, for fields checked outside a schema. */
export const storable = (text: string): boolean => storableText.test(text);

/** JSON schemas of the request and response bodies; they validate requests and make /openapi.json. */
export function messageSchema(limits: InputLimits) {
  return {
    type: 'object',
    required: ['role', 'content'],
    properties: {
      role: { type: 'string', enum: ['system', 'user', 'assistant'] },
      content: { type: 'string', maxLength: limits.messageChars, pattern: STORABLE_TEXT },
    },
  } as const;
}

export function messagesSchema(limits: InputLimits) {
  return {
    type: 'array',
    minItems: 1,
    maxItems: limits.messages,
    items: messageSchema(limits),
    description: 'The conversation, oldest first.',
  } as const;
}

const namespace = {
  type: 'string',
  maxLength: 128,
  pattern: STORABLE_TEXT,
  description: 'Extension: a scope inside the account. Entries stored in one namespace only match checks in the same one.',
} as const;

export function checkBodySchema(limits: InputLimits) {
  return {
    type: 'object',
    required: ['messages'],
    properties: {
      messages: messagesSchema(limits),
      similarity_threshold: { type: 'number', minimum: 0, maximum: 1, default: undefined },
      cache_types: {
        type: 'array',
        minItems: 1,
        maxItems: 2,
        uniqueItems: true,
        items: { type: 'string', enum: ['exact', 'semantic'] },
      },
      namespace,
      model: {
        type: 'string',
        minLength: 1,
        maxLength: 200,
        pattern: STORABLE_TEXT,
        description: 'Extension: only match entries stored for this model.',
      },
    },
  } as const;
}

export function storeBodySchema(limits: InputLimits) {
  return {
    type: 'object',
    required: ['messages', 'answer'],
    properties: {
      messages: messagesSchema(limits),
      answer: { type: 'string', minLength: 1, maxLength: limits.answerChars, pattern: STORABLE_TEXT },
      model: { type: 'string', minLength: 1, maxLength: 200, pattern: STORABLE_TEXT, description: 'Defaults to "unknown".' },
      tokens_used: {
        type: 'integer',
        minimum: 0,
        maximum: 100_000_000,
        description: 'Estimated from the answer (about 4 characters a token) when absent.',
      },
      namespace,
      ttl_seconds: {
        type: 'integer',
        minimum: 0,
        maximum: 315_360_000,
        description: 'Extension: lifetime of this entry in seconds; 0 keeps it until deleted.',
      },
    },
  } as const;
}

export const errorResponseSchema = {
  type: 'object',
  required: ['error', 'status', 'timestamp'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: { type: 'string' },
        message: { type: 'string' },
        details: {
          type: 'object',
          properties: { field: { type: 'string' }, expected: { type: 'string' }, received: { type: 'string' } },
        },
        retry_after: { type: 'integer' },
      },
    },
    status: { type: 'integer' },
    timestamp: { type: 'string', format: 'date-time' },
  },
} as const;

export const checkResponseSchema = {
  type: 'object',
  description: 'A hit (cache_hit true) or a miss (cache_hit false).',
  required: ['cache_hit', 'lookup_time_ms'],
  properties: {
    cache_hit: { type: 'boolean' },
    answer: { type: 'string' },
    cache_type: { type: 'string', enum: ['exact', 'semantic'] },
    lookup_time_ms: { type: 'number' },
    tokens_saved: { type: 'integer' },
    created_at: { type: 'string', format: 'date-time' },
    similarity_score: { type: ['number', 'null'] },
    metadata: {
      type: 'object',
      properties: {
        model: { type: 'string' },
        original_tokens: { type: 'integer' },
        usage_count: { type: 'integer' },
      },
    },
    entry_id: { type: 'integer', description: 'Extension: id of the matched entry.' },
    message: { type: 'string' },
    prompt_hash: { type: 'string' },
    suggested_action: { type: 'string' },
    search_results: {
      type: 'object',
      properties: {
        exact_checked: { type: 'boolean' },
        semantic_checked: { type: 'boolean' },
        closest_match_score: { type: 'number' },
      },
    },
  },
} as const;

export const storeResponseSchema = {
  type: 'object',
  required: ['stored', 'message', 'cache_types_stored', 'storage_time_ms'],
  properties: {
    stored: { type: 'boolean' },
    message: { type: 'string' },
    cache_types_stored: { type: 'array', items: { type: 'string', enum: ['exact', 'semantic'] } },
    storage_time_ms: { type: 'number' },
    entry_id: { type: 'integer', description: 'Extension: id of the stored entry.' },
    prompt_hash: { type: 'string', description: "Extension: the conversation's prompt_hash (as in a miss)." },
  },
} as const;

export const usageResponseSchema = {
  type: 'object',
  properties: {
    total_requests: { type: 'integer' },
    cache_hits: { type: 'integer' },
    cache_misses: { type: 'integer' },
    hit_rate_percentage: { type: 'number' },
    exact_hits: { type: 'integer' },
    semantic_hits: { type: 'integer' },
    average_lookup_time_ms: { type: 'number' },
    performance: {
      type: 'object',
      properties: {
        fast_responses: { type: 'integer' },
        smart_responses: { type: 'integer' },
        estimated_cost_savings: { type: 'string' },
      },
    },
    tokens_saved: { type: 'integer', description: 'Extension.' },
    stores: { type: 'integer', description: 'Extension: store requests in the period.' },
    period: {
      type: 'object',
      description: 'Extension: the period counted (from inclusive, to exclusive); null bounds mean unbounded.',
      properties: { from: { type: ['string', 'null'] }, to: { type: ['string', 'null'] } },
    },
  },
} as const;
