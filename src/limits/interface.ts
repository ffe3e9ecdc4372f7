/** A token bucket: `capacity` tokens, refilled continuously at `refillPerSecond`. */
export interface BucketRule {
  capacity: number;
  refillPerSecond: number;
  /** Shown as X-RateLimit-Limit. */
  limit: number;
  /** Count but never refuse. */
  unlimited?: boolean;
}

/** A limiter's answer. It never throws for "no". */
export interface LimitResult {
  allowed: boolean;
  limit: number;
  /** Whole requests left now. */
  remaining: number;
  /** Unix seconds at which the bucket is full again. */
  resetAt: number;
  /** Seconds until one request is allowed; 0 when allowed. */
  retryAfter: number;
}

export interface RateLimiter {
  /** Takes `cost` tokens from the bucket `key` if it has them. */
  consume(key: string, rule: BucketRule, cost?: number): Promise<LimitResult>;
  /** The same without a promise, for limiters that decide in process (optional). */
  consumeSync?(key: string, rule: BucketRule, cost?: number): LimitResult;
  /**
   * For a shared limiter: whether its last decision was taken by the per-node fallback because
   * the shared store did not answer.
   */
  readonly degraded?: boolean;
  close(): Promise<void>;
}

/** The result for a bucket holding `tokens` after the decision, at `nowMs`. */
export function bucketResult(rule: BucketRule, tokens: number, allowed: boolean, nowMs: number): LimitResult {
  const missing = Math.max(0, rule.capacity - tokens);
  return {
    allowed,
    limit: rule.limit,
    remaining: Math.max(0, Math.floor(tokens)),
    resetAt: Math.ceil((nowMs + (missing / rule.refillPerSecond) * 1000) / 1000),
    retryAfter: allowed ? 0 : Math.max(1, Math.ceil((1 - tokens) / rule.refillPerSecond)),
  };
}
