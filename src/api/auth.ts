import type { FastifyReply, FastifyRequest } from 'fastify';
import { authenticate } from '../keys/keys.ts';
import type { BucketRule, LimitResult } from '../limits/interface.ts';
import { ApiError } from './errors.ts';
import type { AppContext } from './context.ts';

export function setRateHeaders(reply: FastifyReply, r: LimitResult): void {
  reply.header('X-RateLimit-Limit', r.limit);
  reply.header('X-RateLimit-Remaining', r.remaining);
  reply.header('X-RateLimit-Reset', r.resetAt);
}

function bearer(header: string | undefined): string | null {
  if (!header) return null;
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return m ? (m[1] as string) : null;
}

function refused(r: LimitResult): ApiError {
  return new ApiError(
    'RATE_LIMIT_EXCEEDED',
    `Rate limit exceeded: ${r.limit} requests per minute. Retry in ${r.retryAfter} s.`,
    undefined,
    r.retryAfter,
  );
}

/**
 * Authenticates `/api/v1` requests and applies the account's plan limit. A failed
 * authentication takes a token from the caller's address bucket; when that is empty the
 * answer is 429 instead of 401, so keys cannot be guessed at speed.
 */
export function authHook(ctx: AppContext) {
  const { plans, authFailuresPerMinute } = ctx.config;
  const failRule: BucketRule = {
    capacity: authFailuresPerMinute,
    refillPerSecond: authFailuresPerMinute / 60,
    limit: authFailuresPerMinute,
  };
  const fallbackPlan = plans.free ?? { requestsPerMinute: 60, burst: 100, unlimited: false };

  return async function onRequest(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    request.account = null;
    request.apiKey = null;
    const secret = bearer(request.headers.authorization);
    const found = secret === null ? null : await authenticate(ctx.store, secret);
    if (!found) {
      const r = await ctx.limiter.consume(`authfail:${request.ip}`, failRule);
      setRateHeaders(reply, r);
      if (!r.allowed) {
        reply.header('Retry-After', r.retryAfter);
        throw refused(r);
      }
      const why =
        secret === null
          ? 'Missing or malformed Authorization header; expected "Bearer <API_KEY>"'
          : 'The API key is invalid, revoked or expired';
      throw new ApiError('INVALID_API_KEY', why);
    }
    request.account = found.account;
    request.apiKey = found.key;
    ctx.cache.keyUsed(found.key.id);
    const plan = plans[found.account.plan] ?? fallbackPlan;
    const r = await ctx.limiter.consume(`acct:${found.account.id}`, {
      capacity: plan.burst,
      refillPerSecond: plan.requestsPerMinute / 60,
      limit: plan.requestsPerMinute,
      unlimited: plan.unlimited,
    });
    setRateHeaders(reply, r);
    if (!r.allowed) {
      reply.header('Retry-After', r.retryAfter);
      throw refused(r);
    }
  };
}
