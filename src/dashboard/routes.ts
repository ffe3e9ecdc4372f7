import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { setRateHeaders } from '../api/auth.ts';
import type { AppContext } from '../api/context.ts';
import { ApiError, invalid } from '../api/errors.ts';
import { storable } from '../api/schemas.ts';
import { entryDetail, entryListQuerySchema, listEntryPreviews, parseEntryId, type EntryListQuery } from '../api/routes/entries.ts';
import { usageBody, usageQuerySchema, type UsageQuery } from '../api/routes/usage.ts';
import { createKey } from '../keys/keys.ts';
import type { LimitResult } from '../limits/interface.ts';
import type { Account, Session } from '../store/interface.ts';
import { verifyPassword } from './passwords.ts';
import { limitedAddress } from '../util/address.ts';

const COOKIE = 'reprise_session';
const SESSION_HOURS = 12;
/** The header naming the account of the session that a signed-in call was answered for. */
const ACCOUNT_HEADER = 'X-Reprise-Account';
/** How much of a question and of an answer the dashboard's list of entries carries. */
const PREVIEW_CHARS = 200;
const LOGIN_RULE = { capacity: 10, refillPerSecond: 10 / 60, limit: 10 };
/**
 * Failed sign-ins to one account name, from all addresses together: 50, then one every 72 s
 * (50 an hour). Guesses spread over many addresses stay this slow. The price is that someone
 * who fails on purpose can keep the account's owner out of the dashboard (not the API) for
 * as long as they keep failing; names that match no account are limited alike, so the answer
 * never tells whether an account exists.
 */
const ACCOUNT_LOGIN_RULE = { capacity: 50, refillPerSecond: 50 / 3600, limit: 50 };

const require = createRequire(import.meta.url);

interface Asset {
  type: string;
  body: Buffer;
}

/** The dashboard's files: its own pages and uPlot from npm, read once at start. */
function loadAssets(): Map<string, Asset> {
  const here = new URL('./static/', import.meta.url);
  const file = (name: string) => readFileSync(new URL(name, here));
  const uplot = (name: string) => readFileSync(require.resolve(`uplot/dist/${name}`));
  return new Map<string, Asset>([
    ['/dashboard', { type: 'text/html; charset=utf-8', body: file('index.html') }],
    ['/dashboard/app.js', { type: 'text/javascript; charset=utf-8', body: file('app.js') }],
    ['/dashboard/app.css', { type: 'text/css; charset=utf-8', body: file('app.css') }],
    ['/dashboard/uplot.js', { type: 'text/javascript; charset=utf-8', body: uplot('uPlot.iife.min.js') }],
    ['/dashboard/uplot.css', { type: 'text/css; charset=utf-8', body: uplot('uPlot.min.css') }],
  ]);
}

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** The host of an Origin header; none for `null` (sandboxed pages) or anything not a URL. */
function originHost(origin: string): string | null {
  try {
    return new URL(origin).host;
  } catch {
    return null;
  }
}

function cookieValue(header: string | undefined, name: string): string | null {
  for (const part of (header ?? '').split(';')) {
    const [k, ...v] = part.trim().split('=');
    if (k !== name) continue;
    try {
      return decodeURIComponent(v.join('='));
    } catch {
      return null; // not valid percent-encoding: no session of ours
    }
  }
  return null;
}

declare module 'fastify' {
  interface FastifyRequest {
    session: Session | null;
  }
}

/** What an account holder may set on the settings tab. */
const SETTINGS = ['default_threshold', 'entry_ttl_seconds'] as const;

/**
 * The dashboard at /dashboard: static pages and a JSON API under /dashboard/api for the signed-in
 * account holder. Sessions are random tokens in an HttpOnly, SameSite=Strict cookie (Secure over
 * HTTPS), stored as hashes; every change needs the session's CSRF token in X-CSRF-Token.
 */
export function dashboardRoutes(app: FastifyInstance, ctx: AppContext): void {
  const assets = loadAssets();
  app.decorateRequest('session', null);

  // The page's address as typed with a slash, or as a link with one, leads to the page.
  app.get('/dashboard/', { schema: { hide: true } }, async (_request, reply) => reply.redirect('/dashboard', 301));
  for (const [url, asset] of assets) {
    app.get(url, { schema: { hide: true } }, async (_request, reply) => {
      reply.header('Content-Type', asset.type);
      reply.header('Cache-Control', url === '/dashboard' ? 'no-store' : 'public, max-age=300');
      reply.header('X-Frame-Options', 'DENY');
      reply.header(
        'Content-Security-Policy',
        "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
      );
      return asset.body;
    });
  }

  const secureCookie = (request: FastifyRequest) => request.protocol === 'https';
  const setCookie = (request: FastifyRequest, reply: FastifyReply, value: string, maxAge: number) => {
    const attrs = [`${COOKIE}=${value}`, 'Path=/dashboard', 'HttpOnly', 'SameSite=Strict', `Max-Age=${maxAge}`];
    if (secureCookie(request)) attrs.push('Secure');
    reply.header('Set-Cookie', attrs.join('; '));
  };

  /**
   * The signed-in account; for changes, also checks the CSRF token and the Origin, which must be
   * this host: the Host header, or the X-Forwarded-Host of a trusted proxy (REPRISE_TRUST_PROXY).
   */
  async function signedIn(request: FastifyRequest, reply: FastifyReply): Promise<Account> {
    const token = cookieValue(request.headers.cookie, COOKIE);
    const session = token ? await ctx.store.getSession(sha256(token), new Date().toISOString()) : null;
    const account = session ? await ctx.store.getAccount(session.accountId) : null;
    if (!session || !account) throw new ApiError('UNAUTHORIZED', 'Sign in to use the dashboard');
    // Whose session answers, refusals included: a page still showing another account (signed in
    // since in another tab of the browser) sees that this answer is not for it.
    reply.header(ACCOUNT_HEADER, account.id);
    // A HEAD is a GET without the body (Fastify answers it with the GET route): it changes nothing.
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      const origin = request.headers.origin;
      if (request.headers['x-csrf-token'] !== session.csrfToken || (origin !== undefined && originHost(origin) !== request.host)) {
        throw new ApiError('FORBIDDEN', 'Missing or wrong CSRF token');
      }
    }
    request.session = session;
    return account;
  }

  const me = (account: Account, session: Session) => ({
    account: {
      id: account.id,
      name: account.name,
      plan: account.plan,
      default_threshold: account.defaultThreshold ?? 0.85,
      entry_ttl_seconds: account.entryTtlSeconds ?? 0,
    },
    csrf_token: session.csrfToken,
  });

  app.post<{ Body: { account?: unknown; password?: unknown } }>(
    '/dashboard/api/login',
    { schema: { hide: true } },
    async (request, reply) => {
      const { account: name, password } = request.body ?? {};
      if (typeof name !== 'string' || name.length === 0 || name.length > 100 || !storable(name))
        throw invalid('account', 'an account name', name);
      if (typeof password !== 'string' || password.length === 0 || password.length > 1000)
        throw invalid('password', 'a password', undefined);
      // Every attempt takes its token before the password is checked, so attempts made at the
      // same moment cannot all pass a look at the bucket before any of them is charged.
      const addressKey = `login:${limitedAddress(request.ip)}`;
      // A 429 with its Retry-After (the error handler sets the header from `retryAfter`).
      const tooMany = (why: string, retryAfter: number) => new ApiError('RATE_LIMIT_EXCEEDED', why, undefined, Math.max(1, retryAfter));
      const gate = await ctx.limiter.consume(addressKey, LOGIN_RULE);
      // A refused sign-in (401 or 429) has the rate-limit headers of the limit that counts it, as
      // a refused API key has the failed-authentication limit's: not the page's 600 a minute.
      const refusedBy = (r: LimitResult): void => setRateHeaders(reply, r);
      if (!gate.allowed) {
        refusedBy(gate);
        throw tooMany('Too many sign-in attempts; wait and try again', gate.retryAfter);
      }
      const accountKey = `login-account:${name}`;
      const accountGate = await ctx.limiter.consume(accountKey, ACCOUNT_LOGIN_RULE);
      if (!accountGate.allowed) {
        // Not this address's doing: its attempt is given back.
        await ctx.limiter.consume(addressKey, LOGIN_RULE, -1);
        refusedBy(accountGate);
        throw tooMany('Too many failed sign-ins to this account; wait and try again', accountGate.retryAfter);
      }
      const account = await ctx.store.getAccountByName(name);
      const ok = await verifyPassword(password, account ? await ctx.store.getPasswordHash(account.id) : null);
      if (!ok || !account) {
        refusedBy(gate);
        throw new ApiError('INVALID_CREDENTIALS', 'Wrong account name or password');
      }
      // Only failed attempts count: a successful one gives its tokens back.
      await ctx.limiter.consume(addressKey, LOGIN_RULE, -1);
      await ctx.limiter.consume(accountKey, ACCOUNT_LOGIN_RULE, -1);
      const token = randomBytes(32).toString('base64url');
      const now = Date.now();
      const session: Session = {
        tokenHash: sha256(token),
        accountId: account.id,
        csrfToken: randomBytes(24).toString('base64url'),
        createdAt: new Date(now).toISOString(),
        expiresAt: new Date(now + SESSION_HOURS * 3_600_000).toISOString(),
      };
      await ctx.store.createSession(session);
      setCookie(request, reply, token, SESSION_HOURS * 3600);
      reply.header(ACCOUNT_HEADER, account.id);
      return me(account, session);
    },
  );

  app.post('/dashboard/api/logout', { schema: { hide: true } }, async (request, reply) => {
    await signedIn(request, reply);
    if (request.session) await ctx.store.deleteSession(request.session.tokenHash);
    setCookie(request, reply, '', 0);
    return { signed_out: true };
  });

  app.get('/dashboard/api/me', { schema: { hide: true } }, async (request, reply) =>
    me(await signedIn(request, reply), request.session as Session),
  );

  app.get('/dashboard/api/keys', { schema: { hide: true } }, async (request, reply) => {
    const account = await signedIn(request, reply);
    return {
      data: (await ctx.store.listKeys(account.id)).map((k) => ({
        id: k.id,
        name: k.name,
        prefix: k.prefix,
        created_at: k.createdAt,
        last_used_at: k.lastUsedAt,
        status: k.revokedAt ? 'revoked' : 'active',
        revoked_at: k.revokedAt,
      })),
    };
  });

  app.post<{ Body: { name?: unknown } }>('/dashboard/api/keys', { schema: { hide: true } }, async (request, reply) => {
    const account = await signedIn(request, reply);
    const name = request.body?.name;
    if (name !== undefined && name !== null && (typeof name !== 'string' || name.length > 100 || !storable(name)))
      throw invalid('name', 'a string of at most 100 characters, without NUL', name);
    const created = await createKey(ctx.store, account, typeof name === 'string' && name.trim() ? name.trim() : null);
    return {
      key: created.secret,
      id: created.key.id,
      prefix: created.key.prefix,
      name: created.key.name,
      created_at: created.key.createdAt,
    };
  });

  app.post<{ Params: { id: string } }>('/dashboard/api/keys/:id/revoke', { schema: { hide: true } }, async (request, reply) => {
    const account = await signedIn(request, reply);
    // No key id has a NUL (PostgreSQL refuses one in text outright).
    const key = request.params.id.includes('\u0000') ? null : await ctx.store.revokeKey(request.params.id, account.id);
    if (!key) throw new ApiError('NOT_FOUND', `No key ${request.params.id}`);
    return { id: key.id, status: 'revoked', revoked_at: key.revokedAt };
  });

  // The same query strings as the API's, checked the same way.
  app.get<{ Querystring: UsageQuery }>(
    '/dashboard/api/usage',
    { config: { route: 'usage' }, schema: { hide: true, querystring: usageQuerySchema } },
    async (request, reply) => usageBody(ctx, await signedIn(request, reply), request.query),
  );

  app.get<{ Querystring: EntryListQuery }>(
    '/dashboard/api/entries',
    { config: { route: 'entries' }, schema: { hide: true, querystring: entryListQuerySchema } },
    async (request, reply) => {
      // The list carries the start of each text and its length (in UTF-16 code units), not a
      // whole answer of up to 100,000 characters per entry, and the store reads no more than
      // that; an entry opened is read whole from /entries/:id.
      return listEntryPreviews(ctx, (await signedIn(request, reply)).id, request.query, PREVIEW_CHARS);
    },
  );

  app.get<{ Params: { id: string } }>('/dashboard/api/entries/:id', { schema: { hide: true } }, async (request, reply) => {
    const account = await signedIn(request, reply);
    const entry = await ctx.store.getEntry(account.id, parseEntryId(request.params.id));
    if (!entry) throw new ApiError('NOT_FOUND', `No entry ${request.params.id}`);
    return entryDetail(entry, ctx.cache.pendingHits(entry.id));
  });

  app.delete<{ Params: { id: string } }>('/dashboard/api/entries/:id', { schema: { hide: true } }, async (request, reply) => {
    const account = await signedIn(request, reply);
    const id = parseEntryId(request.params.id);
    if (!(await ctx.cache.deleteEntry(account, id))) throw new ApiError('NOT_FOUND', `No entry ${request.params.id}`);
    return { deleted: true, id };
  });

  app.put<{ Body: unknown }>('/dashboard/api/settings', { schema: { hide: true } }, async (request, reply) => {
    const account = await signedIn(request, reply);
    const body = request.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw invalid('body', `a JSON object with ${SETTINGS.join(' and/or ')}`, body);
    }
    const given = body as Record<string, unknown>;
    // A misspelt setting would otherwise be answered 200 with nothing changed.
    const unknown = Object.keys(given).find((k) => !(SETTINGS as readonly string[]).includes(k));
    if (unknown !== undefined) {
      const message = `${unknown} is not a setting; the settings are ${SETTINGS.join(' and ')}`;
      throw invalid(unknown, SETTINGS.join(' or '), given[unknown], message);
    }
    const { default_threshold: t, entry_ttl_seconds: ttl } = given;
    if (t !== undefined && (typeof t !== 'number' || !(t >= 0 && t <= 1))) throw invalid('default_threshold', 'a number from 0 to 1', t);
    if (ttl !== undefined && (typeof ttl !== 'number' || !Number.isInteger(ttl) || ttl < 0 || ttl > 315_360_000)) {
      throw invalid('entry_ttl_seconds', 'an integer from 0 (no expiry) to 315360000', ttl);
    }
    const updated = await ctx.store.updateAccount(account.id, {
      ...(t !== undefined ? { defaultThreshold: t as number } : {}),
      ...(ttl !== undefined ? { entryTtlSeconds: ttl === 0 ? null : (ttl as number) } : {}),
    });
    return me(updated ?? account, request.session as Session);
  });
}
