import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { authenticate, authenticateSync, presentedHash } from '../keys/keys.ts';
import type { Account, ApiKey } from '../store/interface.ts';
import type { BucketRule, LimitResult } from '../limits/interface.ts';
import { planOf } from '../limits/plans.ts';
import { limitedAddress } from '../util/address.ts';
import { ApiError } from './errors.ts';
import type { AppContext } from './context.ts';

export function setRateHeaders(reply: FastifyReply, r: LimitResult): void {
  reply.header('X-RateLimit-Limit', r.limit);
  reply.header('X-RateLimit-Remaining', r.remaining);
  reply.header('X-RateLimit-Reset', r.resetAt);
}

/** The secret of an `Authorization: Bearer <secret>` header (the scheme in any case); null when there is none. */
export function bearer(header: string | undefined): string | null {
  if (!header) return null;
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return m ? (m[1] as string) : null;
}

/**
 * Whether a request's Authorization headers after the first present another key than `secret`,
 * the first one's. Node keeps only the first header of a name that may not repeat: a request
 * with two keys (a client's, and one a proxy added on the way) was taken as whichever came first.
 */
function othersPresented(rawHeaders: readonly string[], secret: string): boolean {
  let seen = false;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (name.length !== 13 || name.toLowerCase() !== 'authorization') continue;
    if (seen && bearer(rawHeaders[i + 1]) !== secret) return true;
    seen = true;
  }
  return false;
}

/** The key presented on a connection: its Authorization header, the secret in it and its hash. */
interface Presented {
  header: string | undefined;
  secret: string | null;
  hash: string | null;
}

const PRESENTED = Symbol('reprise.presented');

/**
 * The key a request presents. A keep-alive connection sends the same header request after
 * request, so what it yields is remembered on the connection while the header stays the same:
 * the secret is parsed and hashed once per connection, not once per request.
 */
function presented(request: FastifyRequest): Presented {
  const header = request.headers.authorization;
  const socket = request.raw.socket as (Socket & { [PRESENTED]?: Presented }) | null;
  const known = socket?.[PRESENTED];
  if (known !== undefined && known.header === header) return known;
  const secret = bearer(header);
  const p: Presented = { header, secret, hash: secret === null ? null : presentedHash(secret) };
  if (socket) socket[PRESENTED] = p;
  return p;
}

const MALFORMED = 'Missing or malformed Authorization header; expected "Bearer <API_KEY>"';
const CONFLICTING = 'More than one Authorization header, with different keys; send one: "Bearer <API_KEY>"';
const INVALID = 'The API key is invalid, revoked or expired';

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
 *
 * The hook returns nothing when the store and the limiter answered in process (SQLite, the
 * in-memory limiter), and a promise otherwise; it throws or rejects with the refusal.
 */
export function authHook(ctx: AppContext) {
  const { plans, authFailuresPerMinute } = ctx.config;
  const failRule: BucketRule = {
    capacity: authFailuresPerMinute,
    refillPerSecond: authFailuresPerMinute / 60,
    limit: authFailuresPerMinute,
  };
  // One rule per plan name, built on first use (the plan table does not change while running).
  const rules = new Map<string, BucketRule>();
  const ruleOf = (planName: string): BucketRule => {
    let rule = rules.get(planName);
    if (rule === undefined) {
      const plan = planOf(plans, planName);
      rule = {
        capacity: plan.burst,
        refillPerSecond: plan.requestsPerMinute / 60,
        limit: plan.requestsPerMinute,
        unlimited: plan.unlimited,
      };
      rules.set(planName, rule);
    }
    return rule;
  };
  const limiter = ctx.limiter;
  const consume = (key: string, rule: BucketRule): LimitResult | Promise<LimitResult> =>
    limiter.consumeSync !== undefined ? limiter.consumeSync(key, rule) : limiter.consume(key, rule);

  const limited = (reply: FastifyReply, r: LimitResult): void => {
    setRateHeaders(reply, r);
    if (!r.allowed) {
      reply.header('Retry-After', r.retryAfter);
      throw refused(r);
    }
  };

  const failed = (reply: FastifyReply, why: string, r: LimitResult): never => {
    limited(reply, r);
    throw new ApiError('INVALID_API_KEY', why);
  };

  const admit = (
    request: FastifyRequest,
    reply: FastifyReply,
    why: string,
    found: { key: ApiKey; account: Account } | null,
  ): void | Promise<void> => {
    if (!found) {
      const r = consume(`authfail:${limitedAddress(request.ip)}`, failRule);
      if (r instanceof Promise) return r.then((x) => failed(reply, why, x));
      return failed(reply, why, r);
    }
    request.account = found.account;
    request.apiKey = found.key;
    ctx.cache.keyUsed(found.key.id);
    const r = consume(`acct:${found.account.id}`, ruleOf(found.account.plan));
    if (r instanceof Promise) return r.then((x) => limited(reply, x));
    limited(reply, r);
  };

  return function onRequest(request: FastifyRequest, reply: FastifyReply): void | Promise<void> {
    request.account = null;
    request.apiKey = null;
    const { secret, hash } = presented(request);
    if (secret === null) return admit(request, reply, MALFORMED, null);
    if (othersPresented(request.raw.rawHeaders, secret)) return admit(request, reply, CONFLICTING, null);
    if (hash === null) return admit(request, reply, INVALID, null);
    const found = authenticateSync(ctx.store, hash);
    if (found === undefined) return authenticate(ctx.store, hash).then((f) => admit(request, reply, INVALID, f));
    return admit(request, reply, INVALID, found);
  };
}
