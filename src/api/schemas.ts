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
      similarity_threshold: {
        type: 'number',
        minimum: 0,
        maximum: 1,
        description: "A semantic candidate is a hit at or above it. Default: the account's default threshold, else 0.85.",
      },
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

/** The spec's error body, shared (`app.addSchema`) so the document names it once: components.schemas.Error. */
export const errorResponseSchema = {
  $id: 'Error',
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
          description:
            "For invalid input: field, expected, received. For STORAGE_QUOTA_EXCEEDED: limit (max_entries or max_stored_bytes), allowed (the plan's limit), current (what the account keeps) and adding (what the store would add: 1 entry, or its bytes).",
          properties: {
            field: { type: 'string' },
            expected: { type: 'string' },
            received: { type: 'string' },
            limit: { type: 'string', enum: ['max_entries', 'max_stored_bytes'] },
            allowed: { type: 'integer' },
            current: { type: 'integer' },
            adding: { type: 'integer' },
          },
        },
        retry_after: { type: 'integer' },
      },
    },
    status: { type: 'integer' },
    timestamp: { type: 'string', format: 'date-time' },
  },
} as const;

/** Headers on every response: the request id, and the caller's rate-limit bucket. */
const responseHeaders = {
  'X-Request-Id': {
    type: 'string',
    description: 'The request id: the X-Request-Id sent (1 to 128 of A-Z a-z 0-9 _ . : -), else a generated UUID.',
  },
  'X-RateLimit-Limit': { type: 'integer', description: 'Requests allowed per minute.' },
  'X-RateLimit-Remaining': { type: 'integer', description: 'Whole requests left now.' },
  'X-RateLimit-Reset': { type: 'integer', description: 'Unix time in seconds at which the bucket is full again.' },
} as const;

/** What each error status answers, by code. */
const ERROR_RESPONSES = {
  400: 'INVALID_INPUT (INVALID_MESSAGES for the messages of a check): the request is invalid (a field, a query value that is not valid percent-encoding, or not valid HTTP); details name the field.',
  401: 'INVALID_API_KEY: the Authorization header is missing or malformed, or its key is invalid, revoked or expired.',
  403: 'STORAGE_QUOTA_EXCEEDED: the store would take the account past a storage limit of its plan (details name it); nothing stored was removed. Delete entries (DELETE /api/v1/entries/{id}) or move to a larger plan; retrying does not help.',
  404: 'NOT_FOUND: the account has no such entry.',
  405: "METHOD_NOT_ALLOWED: the path was asked with a method it does not take (neither this operation's nor another documented on the path); the Allow header lists the methods it takes.",
  408: 'REQUEST_TIMEOUT: the request (headers and body) did not arrive in time (REPRISE_REQUEST_TIMEOUT_MS).',
  413: 'PAYLOAD_TOO_LARGE: the body is larger than the server accepts.',
  415: 'UNSUPPORTED_MEDIA_TYPE: the body is not application/json, or is compressed (Content-Encoding).',
  417: 'EXPECTATION_FAILED: the Expect header asks for more than 100-continue.',
  431: 'HEADERS_TOO_LARGE: the request headers are larger than the server accepts.',
  429: 'RATE_LIMIT_EXCEEDED: too many requests (or failed keys) from this account or address; retry after Retry-After seconds.',
  500: 'INTERNAL_ERROR: an unexpected failure; the request id names it in the server log.',
  503: 'SERVICE_UNAVAILABLE: a dependency is unavailable or the server is closing; retry shortly.',
} as const;

export type ErrorStatus = keyof typeof ERROR_RESPONSES;

/**
 * Errors any operation can answer: a request that is not valid HTTP or whose query is not valid
 * percent-encoding, its path asked with another method, or a request that arrives too slowly,
 * expects more than 100-continue, or has too many headers.
 */
const EVERY_OPERATION: readonly ErrorStatus[] = [400, 405, 408, 417, 431];

/** On a 405: the methods the path takes. */
const allowHeader = {
  Allow: {
    type: 'string',
    description: 'The methods the path takes, comma-separated: those documented on it, and HEAD beside GET (e.g. "GET, HEAD, DELETE").',
  },
} as const;

/**
 * The responses of an operation for the document: `ok` as 200 and the spec's error body for each
 * of `errors` (and 400, 405, 408, 417 and 431, which any path can answer), all with the request-id and
 * rate-limit headers (and Retry-After on 429, Allow on 405). (A request refused before its limit
 * is taken, a 500 or 503, may lack the rate-limit headers.)
 */
export function responses(ok: object, errors: readonly ErrorStatus[]): Record<string, object> {
  const out: Record<string, object> = { 200: { 'x-response-description': 'Success', ...ok, headers: responseHeaders } };
  // Any request can be too slow to arrive or carry too many headers, whatever its operation, and
  // any path can be asked with a method it does not take.
  for (const status of [...errors, ...EVERY_OPERATION.filter((s) => !errors.includes(s))]) {
    const headers =
      status === 429
        ? { ...responseHeaders, 'Retry-After': { type: 'integer', description: 'Seconds to wait, as error.retry_after.' } }
        : status === 405
          ? { ...responseHeaders, ...allowHeader }
          : responseHeaders;
    out[status] = { $ref: 'Error#', description: ERROR_RESPONSES[status], headers };
  }
  return out;
}

/** A whole number in a query string, which its handler parses and range-checks (the document shows the pattern). */
export const WHOLE_NUMBER = '^\\d{1,9}$';

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
    entry_id: {
      type: 'integer',
      description: 'Extension: id of the matched entry (random, unique in the account; GET /api/v1/entries/{id}).',
    },
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
    entry_id: {
      type: 'integer',
      description: 'Extension: id of the stored entry (random, unique in the account; kept when the conversation is stored again).',
    },
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
    stores: {
      type: 'integer',
      description: 'Extension: stores taken in the period (not those refused, for a storage limit or otherwise).',
    },
    storage: {
      type: 'object',
      description:
        "Extension: what the account keeps now (whatever the period) and its plan's storage limits (null: none). An entry counts until it is deleted, or removed once expired (within a minute). Bytes: each entry's messages as stored (their JSON) and answer, in UTF-8.",
      properties: {
        entries: { type: 'integer' },
        stored_bytes: { type: 'integer' },
        max_entries: { type: ['integer', 'null'] },
        max_stored_bytes: { type: ['integer', 'null'] },
      },
    },
    period: {
      type: 'object',
      description: 'Extension: the period counted (from inclusive, to exclusive); null bounds mean unbounded.',
      properties: { from: { type: ['string', 'null'] }, to: { type: ['string', 'null'] } },
    },
    granularity: { type: 'string', enum: ['hour', 'day'], description: 'Extension: present with `series`.' },
    series: {
      type: 'array',
      description: 'Extension, with `granularity`: the same figures per hour or per UTC day, oldest first.',
      items: {
        type: 'object',
        properties: {
          start: { type: 'string' },
          total_requests: { type: 'integer' },
          cache_hits: { type: 'integer' },
          cache_misses: { type: 'integer' },
          exact_hits: { type: 'integer' },
          semantic_hits: { type: 'integer' },
          hit_rate_percentage: { type: 'number' },
          average_lookup_time_ms: { type: 'number' },
          tokens_saved: { type: 'integer' },
          estimated_cost_savings: { type: 'string' },
          estimated_cost_savings_usd: { type: 'number' },
          stores: { type: 'integer' },
        },
      },
    },
  },
} as const;

const entrySummaryProperties = {
  id: { type: 'integer' },
  question: { type: 'string', description: 'The final message (after the user turn before it, for a follow-up).' },
  answer: { type: 'string' },
  model: { type: 'string' },
  namespace: { type: ['string', 'null'], description: 'The namespace the entry was stored in; null when none.' },
  tokens: { type: 'integer' },
  usage_count: { type: 'integer' },
  average_lookup_ms: { type: ['number', 'null'] },
  created_at: { type: 'string' },
  last_hit_at: { type: ['string', 'null'] },
  expires_at: { type: ['string', 'null'] },
  cache_types: { type: 'array', items: { type: 'string', enum: ['exact', 'semantic'] } },
} as const;

/** Extension: `GET /api/v1/entries`. */
export const entryListResponseSchema = {
  type: 'object',
  required: ['data', 'pagination'],
  properties: {
    data: { type: 'array', items: { type: 'object', properties: entrySummaryProperties } },
    pagination: {
      type: 'object',
      properties: {
        page: { type: 'integer' },
        per_page: { type: 'integer' },
        total: { type: 'integer' },
        total_pages: { type: 'integer' },
      },
    },
  },
} as const;

/** Extension: `GET /api/v1/entries/{id}`. */
export const entryDetailResponseSchema = {
  type: 'object',
  properties: {
    ...entrySummaryProperties,
    messages: {
      type: 'array',
      items: { type: 'object', properties: { role: { type: 'string' }, content: { type: 'string' } } },
    },
    prompt_hash: { type: 'string' },
  },
} as const;

/** Extension: `DELETE /api/v1/entries/{id}`. */
export const entryDeletedResponseSchema = {
  type: 'object',
  properties: { deleted: { type: 'boolean' }, id: { type: 'integer' } },
} as const;

/** `GET /healthz`, for load balancers: no key; 503 SERVICE_UNAVAILABLE when not ready. */
export const healthzResponseSchema = {
  type: 'object',
  required: ['status', 'checks'],
  properties: {
    status: { type: 'string', enum: ['ok'] },
    checks: { type: 'object', additionalProperties: { type: 'string' }, description: 'Each dependency and its state.' },
  },
} as const;

/** `GET /api/v1/health`: the spec's generic envelope. */
export const healthResponseSchema = {
  type: 'object',
  required: ['status', 'data', 'message', 'timestamp'],
  properties: {
    status: { type: 'string' },
    data: {
      type: 'object',
      properties: {
        healthy: { type: 'boolean' },
        version: { type: 'string' },
        account: { type: 'object', properties: { id: { type: 'string' }, name: { type: 'string' }, plan: { type: 'string' } } },
        cache_types: { type: 'array', items: { type: 'string', enum: ['exact', 'semantic'] } },
        checks: { type: 'object', additionalProperties: { type: 'string' } },
      },
    },
    message: { type: 'string' },
    timestamp: { type: 'string' },
  },
} as const;
