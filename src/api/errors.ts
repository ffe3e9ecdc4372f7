/** Every error code Reprise answers with, and its HTTP status. The one list of codes. */
export const ERROR_STATUS = {
  INVALID_INPUT: 400,
  INVALID_MESSAGES: 400,
  INVALID_API_KEY: 401,
  UNAUTHORIZED: 401,
  INVALID_CREDENTIALS: 401,
  FORBIDDEN: 403,
  STORAGE_QUOTA_EXCEEDED: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  REQUEST_TIMEOUT: 408,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  EXPECTATION_FAILED: 417,
  HEADERS_TOO_LARGE: 431,
  RATE_LIMIT_EXCEEDED: 429,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface ErrorDetails {
  field: string;
  expected: string;
  received: string;
}

/** The details of STORAGE_QUOTA_EXCEEDED: the limit reached, its value, what is kept and what the store would add. */
export interface QuotaDetails {
  limit: 'max_entries' | 'max_stored_bytes';
  allowed: number;
  current: number;
  adding: number;
}

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetails | QuotaDetails,
    readonly retryAfter?: number,
  ) {
    super(message);
    this.name = 'ApiError';
    this.status = ERROR_STATUS[code];
  }
}

export interface ErrorBody {
  error: { code: ErrorCode; message: string; details?: ErrorDetails | QuotaDetails; retry_after?: number };
  status: number;
  timestamp: string;
}

/** The spec's error body. */
export function errorBody(err: ApiError): ErrorBody {
  const error: ErrorBody['error'] = { code: err.code, message: err.message };
  if (err.details) error.details = err.details;
  if (err.retryAfter !== undefined) error.retry_after = err.retryAfter;
  return { error, status: err.status, timestamp: new Date().toISOString() };
}

/** A short description of a received value for `details.received`. */
export function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (Array.isArray(value)) return value.length === 0 ? 'empty array' : `array of ${value.length}`;
  if (typeof value === 'string') {
    if (value.length > 40) return `string of ${value.length} characters`;
    return `string ${JSON.stringify(value)}`;
  }
  if (typeof value === 'number' || typeof value === 'boolean') return `${typeof value} ${String(value)}`;
  return typeof value;
}

export function invalid(field: string, expected: string, received: unknown, message?: string): ApiError {
  return new ApiError('INVALID_INPUT', message ?? `${field} must be ${expected}`, {
    field,
    expected,
    received: describe(received),
  });
}
