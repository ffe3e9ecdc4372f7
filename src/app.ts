import { isUtf8 } from 'node:buffer';
import { randomUUID } from 'node:crypto';
import { maxHeaderSize, STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import Fastify, {
  errorCodes,
  LogController,
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import swagger from '@fastify/swagger';
import { authHook, setRateHeaders } from './api/auth.ts';
import type { AppContext } from './api/context.ts';
import { ApiError, describe, errorBody, type ErrorBody, type ErrorCode } from './api/errors.ts';
import { errorResponseSchema } from './api/schemas.ts';
import { schemaErrorToApiError, type SchemaError } from './api/validation.ts';
import { checkRoute } from './api/routes/check.ts';
import { storeRoute } from './api/routes/store.ts';
import { usageRoute } from './api/routes/usage.ts';
import { healthRoute } from './api/routes/health.ts';
import { entriesRoutes } from './api/routes/entries.ts';
import { dashboardRoutes } from './dashboard/routes.ts';
import type { BucketRule, LimitResult } from './limits/interface.ts';
import { MemoryRateLimiter } from './limits/memory.ts';
import { limitedAddress } from './util/address.ts';
import { Metrics } from './api/metrics.ts';
import { isSqliteDamaged, isSqliteUnavailable } from './store/sqlite.ts';
import { AccountGoneError } from './store/interface.ts';

export type { AppContext } from './api/context.ts';

/** Fastify's own error codes that map onto the spec's codes. */
const FASTIFY_CODES: Record<string, { code: ErrorCode; message: string }> = {
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 'PAYLOAD_TOO_LARGE', message: 'The request body is too large' },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    code: 'UNSUPPORTED_MEDIA_TYPE',
    message: 'Unsupported Content-Type; send application/json',
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { code: 'INVALID_INPUT', message: 'Content-Length does not match the body' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { code: 'INVALID_INPUT', message: 'The request body is empty; send a JSON object' },
  FST_ERR_CTP_INVALID_JSON_BODY: { code: 'INVALID_INPUT', message: 'The request body is not valid JSON' },
};

export interface BuildOptions {
  logger?: boolean | object;
  loggerInstance?: FastifyBaseLogger;
}

/** Public (unauthenticated) paths share a generous per-address bucket, so they carry the headers too. */
const PUBLIC_RULE: BucketRule = { capacity: 1000, refillPerSecond: 10, limit: 600 };

/**
 * A request's logger (its id bound as `reqId`), made when something is first logged through it.
 * Most requests log one line, when they complete, and pino's child costs more to make than that
 * line: `RequestLog` writes it through the parent with `reqId` first, the same line a child writes.
 */
class RequestLogger {
  private made: FastifyBaseLogger | undefined = undefined;

  constructor(
    readonly parent: FastifyBaseLogger,
    readonly reqId: string,
    private readonly opts: object,
  ) {}

  /** The child logger, made on first use. */
  get log(): FastifyBaseLogger {
    return (this.made ??= this.parent.child({ reqId: this.reqId }, this.opts));
  }

  /** Whether the child was made (something set or logged through it). */
  get isMade(): boolean {
    return this.made !== undefined;
  }

  get level(): string {
    return this.made === undefined ? this.parent.level : this.made.level;
  }

  set level(level: string) {
    this.log.level = level;
  }

  fatal(...args: unknown[]): void {
    (this.log.fatal as (...a: unknown[]) => void)(...args);
  }

  error(...args: unknown[]): void {
    (this.log.error as (...a: unknown[]) => void)(...args);
  }

  warn(...args: unknown[]): void {
    (this.log.warn as (...a: unknown[]) => void)(...args);
  }

  info(...args: unknown[]): void {
    (this.log.info as (...a: unknown[]) => void)(...args);
  }

  debug(...args: unknown[]): void {
    (this.log.debug as (...a: unknown[]) => void)(...args);
  }

  trace(...args: unknown[]): void {
    (this.log.trace as (...a: unknown[]) => void)(...args);
  }

  silent(...args: unknown[]): void {
    (this.log.silent as (...a: unknown[]) => void)(...args);
  }

  child(bindings: Record<string, unknown>, options?: object): FastifyBaseLogger {
    return this.log.child(bindings, options);
  }
}

/** Fastify's request log lines: none when a request arrives, one when it completes. */
class RequestLog extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const ms = Math.round(reply.elapsedTime * 100) / 100;
    const log = request.log as unknown;
    if (error) {
      request.log.warn(
        { method: request.method, url: request.url, status: reply.statusCode, ms, err: error },
        'request failed while answering',
      );
    } else if (log instanceof RequestLogger && !log.isMade) {
      log.parent.info({ reqId: log.reqId, method: request.method, url: request.url, status: reply.statusCode, ms }, 'request completed');
    } else {
      request.log.info({ method: request.method, url: request.url, status: reply.statusCode, ms }, 'request completed');
    }
  }
}

/** Makes request loggers lazily (`RequestLogger`) unless a route asks for a level or serializers of its own. */
function requestLogger(
  logger: FastifyBaseLogger,
  bindings: Record<string, unknown>,
  opts: NonNullable<Parameters<FastifyBaseLogger['child']>[1]>,
): FastifyBaseLogger {
  if (opts.level !== undefined || opts.serializers !== undefined || typeof bindings.reqId !== 'string') return logger.child(bindings, opts);
  return new RequestLogger(logger, bindings.reqId, opts) as unknown as FastifyBaseLogger;
}

/** Sets the public bucket's headers on `reply`; throws RATE_LIMIT_EXCEEDED when it is empty. */
function publicLimit(reply: FastifyReply, r: LimitResult): void {
  setRateHeaders(reply, r);
  if (!r.allowed) {
    reply.header('Retry-After', r.retryAfter);
    throw new ApiError('RATE_LIMIT_EXCEEDED', 'Too many requests from this address', undefined, r.retryAfter);
  }
}

/** Responses to requests that sent `Expect: 100-continue` and have not been sent 100 Continue yet. */
const awaitingContinue = new WeakSet<ServerResponse>();

/**
 * Connections whose request was refused before its body had all come (a wrong key, a body over
 * the limit), until the rest has: Node reads and drops it, and the connection takes the next
 * request then. A rest that never comes is a request past its time, which Node reports as for any
 * other (`answerClientError`): it was answered already, and the connection is only closed.
 */
const answeredEarly = new WeakSet<Socket>();

function noteAnsweredEarly(request: FastifyRequest): void {
  const socket = request.raw.socket as Socket | null;
  if (request.raw.complete || !socket || answeredEarly.has(socket)) return;
  answeredEarly.add(socket);
  request.raw.once('end', () => answeredEarly.delete(socket));
}

/** Readies `reply` to answer `apiError` (status, Retry-After, a log line for a fault) and returns its body. */
function errorReply(apiError: ApiError, cause: Error, request: FastifyRequest, reply: FastifyReply): ErrorBody {
  if (apiError.code === 'SERVICE_UNAVAILABLE' && isSqliteDamaged(cause)) {
    // The damage itself is logged once, with SQLite's error (AppContext.storeDamaged).
    request.log.warn({ request_id: request.id, store: 'damaged' }, 'request refused: it needs a damaged part of the database');
  } else if (apiError.code === 'SERVICE_UNAVAILABLE') {
    request.log.warn({ err: cause, request_id: request.id }, 'request refused: a dependency is unavailable or the server is closing');
  } else if (apiError.status >= 500) {
    request.log.error({ err: cause, request_id: request.id }, 'request failed');
  }
  reply.code(apiError.status);
  // Refused before its 100 Continue: the client may or may not send the body it held back, so
  // nothing more can be framed on the connection.
  if (awaitingContinue.has(reply.raw)) reply.header('Connection', 'close');
  else noteAnsweredEarly(request);
  if (apiError.code === 'RATE_LIMIT_EXCEEDED' && apiError.retryAfter !== undefined) {
    reply.header('Retry-After', apiError.retryAfter);
  }
  return errorBody(apiError);
}

export async function buildApp(ctx: AppContext, opts: BuildOptions = {}): Promise<FastifyInstance> {
  // Requests without a key are limited by each node on its own, also in a cluster: the limit keeps
  // one address from flooding a node. Shared by the nodes, a load balancer probing every node's
  // /healthz from one address would find all of them refusing it (429) once its probes of all nodes
  // together passed the limit, and take the whole cluster out of service; nor does a probe wait for
  // Redis. Keyed requests, sign-ins and failed authentications are limited across nodes.
  const limiter = new MemoryRateLimiter();
  // A number of proxies: believe that many hops of X-Forwarded-For, counted from this server.
  const trust = ctx.config.trustProxy;
  // The logger of the answers written before routing; set once the server is made.
  let serverLog: FastifyBaseLogger | null = null;
  const app = Fastify({
    ...(opts.loggerInstance ? { loggerInstance: opts.loggerInstance } : { logger: opts.logger ?? false }),
    // Only a real logger's children are worth making lazily; a disabled one's child is itself.
    ...(opts.loggerInstance || opts.logger ? { childLoggerFactory: requestLogger } : {}),
    bodyLimit: ctx.config.limits.bodyBytes,
    trustProxy: typeof trust === 'number' ? (_address: string, hop: number) => hop < trust : trust,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && /^[\w.:-]{1,128}$/.test(given) ? given : randomUUID();
    },
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false, useDefaults: false } },
    // A path parameter (an entry or key id) over the router's limit (100 characters by default) was
    // refused before routing, with no route to say why: a 500. No parameter is matched by a
    // pattern, so none needs a limit below what the request line can hold: the route reads it.
    routerOptions: { maxParamLength: maxHeaderSize },
    // Requests that reach a closing server (pipelined, or on a busy keep-alive connection) are
    // answered 503 by the hook below, in the spec's error shape rather than Fastify's.
    return503OnClosing: false,
    logController: new RequestLog(),
    // A whole request (headers and body) must arrive within this time; 408 after. Node looks for
    // late requests every `connectionsCheckingInterval` ms (30 s by default). The timeout is given
    // to the server as it is made too: Node refuses a headers timeout above its request timeout.
    requestTimeout: ctx.config.limits.requestTimeoutMs,
    http: {
      requestTimeout: ctx.config.limits.requestTimeoutMs,
      headersTimeout: ctx.config.limits.requestTimeoutMs,
      connectionsCheckingInterval: Math.min(30_000, Math.max(100, Math.round(ctx.config.limits.requestTimeoutMs / 4))),
    },
    // Requests the HTTP parser refuses (a malformed request line or header, headers over 16 KB, a
    // request too slow to arrive) never reach Fastify's hooks: answered here in the spec's shape.
    clientErrorHandler: (err, socket) => answerClientError(err, socket, limiter, serverLog),
    // Errors met before routing (a path that is not valid percent-encoding) skip the hooks and the
    // error handler: answered here in the same shape, with the same headers as a public path.
    frameworkErrors: (err, request, routedReply) => {
      // Typed for a route's reply schema; none applies before routing.
      const reply = routedReply as FastifyReply;
      reply.header('X-Request-Id', request.id);
      // A target in absolute form (`GET http://host/…`) is refused too when it is no URL (a port
      // out of range, a fragment), and not only for its percent-encoding.
      const absolute = request.raw.url?.startsWith('/') === false;
      const failure =
        err.code === 'FST_ERR_BAD_URL'
          ? new ApiError(
              'INVALID_INPUT',
              absolute ? 'The request target is not a valid absolute URL' : 'The URL path is not valid percent-encoding',
              {
                field: 'url',
                expected: absolute
                  ? 'an absolute URL without a fragment, its port from 0 to 65535 and each % followed by two hex digits of UTF-8'
                  : 'a path with each % followed by two hex digits of UTF-8',
                received: describe(request.raw.url),
              },
            )
          : new ApiError('INTERNAL_ERROR', 'Internal server error');
      Promise.resolve()
        .then(() => limiter.consume(`public:${limitedAddress(request.ip)}`, PUBLIC_RULE))
        .then(
          (r) => {
            publicLimit(reply, r);
            return failure;
          },
          () => failure,
        )
        .catch((refused: unknown) => (refused instanceof ApiError ? refused : failure))
        .then((apiError) => void reply.send(errorReply(apiError, err, request, reply)));
    },
  });
  serverLog = app.log;
  app.server.on('connect', (_req: unknown, socket: Socket) => answerConnect(socket, limiter, app.log));
  // Node answers an Expect other than 100-continue itself (417, no body) unless told otherwise:
  // such requests are handed to Fastify, whose request hook refuses them in the spec's shape.
  app.server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => app.server.emit('request', req, res));
  // Node answers `Expect: 100-continue` with 100 Continue at once unless told otherwise: a client
  // with a wrong key, or a body over the limit, would send its whole body before its refusal. Such
  // requests are handed to Fastify as they are; 100 Continue is sent once the key and limits have
  // passed and the Content-Length is within the limit (the preParsing hook below), as the body is
  // about to be read. A request refused before that gets its final status at once.
  app.server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    awaitingContinue.add(res);
    app.server.emit('request', req, res);
  });
  // Only JSON bodies are accepted; Fastify's text/plain parser would let other types through.
  // (A body of a type with no parser is 415, or, to no route, answered 404 or 405 unread.)
  app.removeContentTypeParser('text/plain');
  // Fastify's JSON parser refuses `__proto__` and `constructor.prototype` keys (they could
  // poison prototypes) with the same error as a syntax error; say which it was.
  const json = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const bytes = body as Buffer;
    // No route to read it (404, 405), or nothing sent to a method that takes no body (a DELETE
    // from a client that names the JSON type on every request): there is nothing to parse.
    if (request.is404 || (bytes.length === 0 && !BODY_METHODS.has(request.method))) {
      done(null, undefined);
      return;
    }
    const encoding = request.headers['content-encoding'];
    if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
      done(
        new ApiError('UNSUPPORTED_MEDIA_TYPE', 'Compressed request bodies are not accepted; send the JSON as it is', {
          field: 'Content-Encoding',
          expected: 'none, or identity',
          received: describe(encoding),
        }),
        undefined,
      );
      return;
    }
    // Bytes that are not UTF-8 decode as U+FFFD, and the entry would be stored and hashed under
    // text the client never sent. The bytes are checked only when a replacement character shows
    // (sent as such, or made by the decoding), so the common path decodes once and no more.
    const text = bytes.toString('utf8');
    if (text.includes('\uFFFD') && !isUtf8(bytes)) {
      done(
        new ApiError('INVALID_INPUT', 'The request body is not valid UTF-8', {
          field: 'body',
          expected: 'JSON encoded as UTF-8',
          received: 'bytes that are not UTF-8',
        }),
        undefined,
      );
      return;
    }
    json(request, text, (err: Error | null, value?: unknown) => {
      if (err && (err as FastifyError).code === 'FST_ERR_CTP_INVALID_JSON_BODY' && isJson(text)) {
        done(
          new ApiError('INVALID_INPUT', 'The request body has a "__proto__" or "constructor.prototype" key, which is not accepted', {
            field: 'body',
            expected: 'a JSON object without "__proto__" or "constructor.prototype" keys',
            received: 'such a key',
          }),
          undefined,
        );
      } else done(err, value);
    });
  });
  app.decorateRequest('account', null);
  app.decorateRequest('apiKey', null);

  // Bodies are plain JSON.stringify: the response schemas document, they do not filter.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));

  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Reprise',
        description: 'LLM response cache: exact and semantic caching of chat completions.',
        version: ctx.version,
      },
      components: {
        securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'An API key, rp_live_…' } },
      },
      security: [{ bearer: [] }],
    },
    // Shared schemas are named by their $id in components.schemas.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
  });
  app.addSchema(errorResponseSchema);

  const auth = authHook(ctx);
  let closing = false;
  // Node closes the idle connections once, as the close starts. One whose request was in flight
  // then is kept alive after its answer (a keep-alive pool, a proxy's) and would hold the close
  // until the client let it go, past the forced exit: connections are closed as they fall idle.
  // (A request pipelined behind the one in flight is still answered, 503, before its connection
  // falls idle.)
  let closeIdle: NodeJS.Timeout | undefined;
  app.addHook('preClose', (done) => {
    closing = true;
    closeIdle = setInterval(() => app.server.closeIdleConnections(), 20);
    closeIdle.unref();
    done();
  });
  app.addHook('onClose', (_app, done) => {
    clearInterval(closeIdle);
    done();
  });
  // A callback hook: when auth and limits are decided in process, no promise is made per request.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('X-Request-Id', request.id);
    if (closing) {
      reply.header('Connection', 'close');
      done(new ApiError('SERVICE_UNAVAILABLE', 'Reprise is shutting down; retry on another node or after it restarts') as FastifyError);
      return;
    }
    let pending: void | Promise<void> = undefined;
    try {
      // A path may spell /api/v1 with percent-escapes (`/api/%761/check`), and a request may give
      // the absolute form (`GET http://host/api/v1/usage`); the route it matched says.
      const url = request.url;
      if (
        url.startsWith('/api/v1/') ||
        url === '/api/v1' ||
        ((url.includes('%') || !url.startsWith('/')) && request.routeOptions.url?.startsWith('/api/v1/'))
      ) {
        pending = auth(request, reply);
      } else if (limiter.consumeSync !== undefined) {
        publicLimit(reply, limiter.consumeSync(`public:${limitedAddress(request.ip)}`, PUBLIC_RULE));
      } else {
        pending = limiter.consume(`public:${limitedAddress(request.ip)}`, PUBLIC_RULE).then((r) => publicLimit(reply, r));
      }
    } catch (err) {
      done(err as FastifyError);
      return;
    }
    // Refused once the caller's limit is taken, as any request is: an Expect that cannot be met,
    // and, to a route, a query value that is not valid percent-encoding of UTF-8 (`q=caf%E9`, in
    // Latin-1), which the query parser would keep as the literal text. Checked here, in the hook
    // every request runs anyway, rather than in a hook of its own.
    const refusal = unmetExpectation(request.headers.expect) ?? (request.is404 ? undefined : badQueryOf(request.url));
    if (pending === undefined) done(refusal);
    else
      pending.then(
        () => done(refusal),
        (err: FastifyError) => done(err),
      );
  });

  // See 'checkContinue' above.
  app.addHook('preParsing', (request, reply, payload, done) => {
    if (!awaitingContinue.has(reply.raw)) {
      done(null, payload);
      return;
    }
    const limit = request.routeOptions.bodyLimit ?? ctx.config.limits.bodyBytes;
    const length = Number(request.headers['content-length']);
    if (Number.isFinite(length) && length > limit) {
      done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
      return;
    }
    awaitingContinue.delete(reply.raw);
    reply.raw.writeContinue();
    done(null, payload);
  });

  // Known paths (patterns with parameters too, such as /api/v1/entries/:id) and their methods, for
  // 405 and the Allow header.
  const methodsByPath = new Map<string, Set<string>>();
  const patterns: { pattern: RegExp; methods: Set<string> }[] = [];
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    let set = methodsByPath.get(route.url);
    if (set === undefined) {
      set = new Set<string>();
      methodsByPath.set(route.url, set);
      if (/[:*]/.test(route.url)) patterns.push({ pattern: routePattern(route.url), methods: set });
    }
    for (const m of methods) set.add(String(m));
  });
  const methodsOf = (path: string): Set<string> | undefined => {
    const exact = methodsByPath.get(path);
    if (exact) return exact;
    const matching = patterns.filter((p) => p.pattern.test(path));
    return matching.length === 0 ? undefined : new Set(matching.flatMap((p) => [...p.methods]));
  };

  /** The answer to a request no route takes: 405 with Allow on a known path, else 404. */
  const unrouted = (request: FastifyRequest, reply: FastifyReply): ApiError => {
    const path = request.url.split('?')[0] ?? '';
    const methods = methodsOf(path);
    if (methods && !methods.has(request.method)) {
      reply.header('Allow', [...methods].join(', '));
      return new ApiError('METHOD_NOT_ALLOWED', `${request.method} is not allowed on ${path}; use ${[...methods].join(' or ')}`);
    }
    return new ApiError('NOT_FOUND', `No endpoint ${request.method} ${path}`);
  };

  app.setNotFoundHandler(async (request: FastifyRequest, reply: FastifyReply) => {
    throw unrouted(request, reply);
  });

  app.setErrorHandler(async (err: FastifyError, request, reply) => {
    // Fastify refuses a QUERY without Content-Type before the not-found handler runs; as no route
    // takes QUERY, the request is answered as any other method no route takes.
    const apiError =
      err.code === 'FST_ERR_ROUTE_MISSING_CONTENT_TYPE' && request.is404 ? unrouted(request, reply) : toApiError(err, request);
    if (isSqliteDamaged(err)) ctx.storeDamaged?.(err);
    // The rate-limit headers are on every response. A request refused before its key's bucket was
    // read (a closing server, a key lookup in a database that is down) gives those of its address,
    // as a path without a key does.
    if (!reply.hasHeader('X-RateLimit-Limit')) {
      setRateHeaders(reply, limiter.consumeSync(`public:${limitedAddress(request.ip)}`, PUBLIC_RULE));
    }
    return errorReply(apiError, err, request, reply);
  });

  const metrics = new Metrics();
  metrics.install(app, ctx.config.metricsToken);

  checkRoute(app, ctx, metrics);
  storeRoute(app, ctx, metrics);
  usageRoute(app, ctx);
  healthRoute(app, ctx);
  entriesRoutes(app, ctx);
  dashboardRoutes(app, ctx);

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  return app;
}

/** A route's URL (`/api/v1/entries/:id`, `/dashboard/*`) as a pattern of the paths it takes. */
function routePattern(url: string): RegExp {
  const parts = url.split(/(:[A-Za-z_]\w*|\*)/).map((part) => {
    if (part === '*') return '.*';
    if (part.startsWith(':')) return '[^/]+';
    return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  });
  return new RegExp(`^${parts.join('')}$`);
}

/** The refusal of a URL whose query has a part that is not valid percent-encoding of UTF-8; none when every part is. */
function badQueryOf(url: string): FastifyError | undefined {
  const start = url.indexOf('?');
  return start < 0 || !url.includes('%', start) ? undefined : badQuery(url.slice(start + 1));
}

function badQuery(query: string): FastifyError | undefined {
  for (const part of query.split('&')) {
    try {
      decodeURIComponent(part.replace(/\+/g, ' '));
    } catch {
      const name = part.split('=')[0] ?? '';
      let field = 'query';
      try {
        field = decodeURIComponent(name.replace(/\+/g, ' ')) || field;
      } catch {
        // The name itself is not valid: the query string is named.
      }
      return new ApiError('INVALID_INPUT', `The query string is not valid percent-encoding (${field})`, {
        field,
        expected: 'each % followed by two hex digits, of UTF-8',
        received: describe(part),
      }) as FastifyError;
    }
  }
  return undefined;
}

/** The refusal of an Expect header that asks for more than 100-continue, which is all Reprise meets. */
function unmetExpectation(expect: string | undefined): FastifyError | undefined {
  if (expect === undefined || expect.trim().toLowerCase() === '100-continue') return undefined;
  return new ApiError('EXPECTATION_FAILED', 'The expectation in the Expect header cannot be met; send 100-continue or none', {
    field: 'Expect',
    expected: '100-continue, or no Expect header',
    received: describe(expect),
  }) as FastifyError;
}

/** Methods whose requests carry a body by their nature; another method's empty body is none. */
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

function unsupportedMediaType(request: FastifyRequest): ApiError {
  return new ApiError('UNSUPPORTED_MEDIA_TYPE', 'Unsupported Content-Type; send application/json', {
    field: 'Content-Type',
    expected: 'application/json',
    received: String(request.headers['content-type'] ?? 'nothing'),
  });
}

/** The spec's error for a request the HTTP parser refused: too slow, headers too large, or malformed. */
function clientFailure(err: NodeJS.ErrnoException): ApiError {
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return new ApiError('REQUEST_TIMEOUT', 'The request did not arrive in time; send it whole, then wait for the answer');
  }
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    return new ApiError('HEADERS_TOO_LARGE', 'The request line and headers are larger than the server accepts (16 KB)');
  }
  return new ApiError('INVALID_INPUT', 'The request is not valid HTTP/1.1', {
    field: 'request',
    expected: 'a valid HTTP/1.1 request line, headers and body framing',
    received: describe(err.code ?? 'malformed'),
  });
}

/**
 * Answers a request the HTTP parser refused, with the caller's public bucket in the rate-limit
 * headers, then closes the connection (what follows on it cannot be framed). Nothing is sent on a
 * connection the client has already reset.
 */
function answerClientError(
  err: NodeJS.ErrnoException,
  socket: Socket,
  limiter: AppContext['limiter'],
  log: FastifyBaseLogger | null,
): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  // The request was answered before its body had all come, and the rest never came: one answer
  // to a request, not a 408 after the 401.
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT' && answeredEarly.has(socket)) {
    socket.destroy();
    return;
  }
  // As Node does: a response already under way on the connection is not broken into.
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  if (inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  answerOnSocket(clientFailure(err), socket, limiter, log);
}

/**
 * Answers a CONNECT request. Node hands it to the server's 'connect' listeners instead of to
 * Fastify, and closes the connection without a word when there are none.
 */
function answerConnect(socket: Socket, limiter: AppContext['limiter'], log: FastifyBaseLogger | null): void {
  answerOnSocket(new ApiError('METHOD_NOT_ALLOWED', 'CONNECT is not supported: Reprise is not a proxy'), socket, limiter, log);
}

/**
 * Writes `failure` in the spec's shape on a connection no reply object owns, then closes it. It
 * carries a request id and a Date as every other answer does, and the log has a line with that id.
 */
function answerOnSocket(failure: ApiError, socket: Socket, limiter: AppContext['limiter'], log: FastifyBaseLogger | null): void {
  const reqId = randomUUID();
  Promise.resolve()
    .then(() => limiter.consume(`public:${limitedAddress(socket.remoteAddress ?? 'unknown')}`, PUBLIC_RULE))
    .then(
      (r): LimitResult | null => r,
      () => null,
    )
    .then((r) => {
      if (!socket.writable) {
        socket.destroy();
        return;
      }
      const body = JSON.stringify(errorBody(failure));
      const head = [
        `HTTP/1.1 ${failure.status} ${STATUS_CODES[failure.status] ?? ''}`,
        'Content-Type: application/json; charset=utf-8',
        `Content-Length: ${Buffer.byteLength(body)}`,
        'Connection: close',
        `X-Request-Id: ${reqId}`,
        `Date: ${new Date().toUTCString()}`,
      ];
      if (r) head.push(`X-RateLimit-Limit: ${r.limit}`, `X-RateLimit-Remaining: ${r.remaining}`, `X-RateLimit-Reset: ${r.resetAt}`);
      log?.info({ reqId, status: failure.status, code: failure.code }, 'request refused before it could be routed');
      // Closed once written, whatever the client does with its side.
      socket.end(`${head.join('\r\n')}\r\n\r\n${body}`, () => socket.destroy());
    });
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

function toApiError(err: FastifyError, request: FastifyRequest): ApiError {
  if (err instanceof ApiError) return err;
  // A store whose key was good when it came, and whose account was deleted before it was written.
  if (err instanceof AccountGoneError) return new ApiError('INVALID_API_KEY', 'The API key is invalid, revoked or expired');
  if (err.validation) {
    const route = request.routeOptions.config.route ?? '';
    if (err.validationContext === 'querystring') {
      return schemaErrorToApiError(err.validation as unknown as SchemaError[], request.query, route);
    }
    return schemaErrorToApiError(err.validation as unknown as SchemaError[], request.body, route);
  }
  if (err.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' && request.routeOptions.config?.route === 'check') {
    return new ApiError('INVALID_MESSAGES', 'messages must be a non-empty array of {role, content} objects', {
      field: 'messages',
      expected: 'a non-empty array of messages',
      received: 'nothing',
    });
  }
  const known = err.code ? FASTIFY_CODES[err.code] : undefined;
  if (known) {
    if (known.code === 'PAYLOAD_TOO_LARGE') {
      return new ApiError(known.code, known.message, {
        field: 'body',
        expected: `at most ${request.routeOptions.bodyLimit ?? 0} bytes`,
        received: `${request.headers['content-length'] ?? 'more'} bytes`,
      });
    }
    if (known.code === 'UNSUPPORTED_MEDIA_TYPE') return unsupportedMediaType(request);
    if (known.code === 'INVALID_INPUT') {
      return new ApiError(known.code, known.message, {
        field: 'body',
        expected: 'a JSON object',
        received: err.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' ? 'nothing' : 'invalid JSON',
      });
    }
    return new ApiError(known.code, known.message);
  }
  if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
    return new ApiError('INVALID_INPUT', err.message);
  }
  if (isSqliteDamaged(err)) {
    return new ApiError(
      'SERVICE_UNAVAILABLE',
      "Reprise's database is damaged where this request needs it; the server log says more, and the operator must repair or restore it",
    );
  }
  if (err.statusCode === 503 || (err as { unavailable?: boolean }).unavailable === true || isSqliteUnavailable(err)) {
    return new ApiError('SERVICE_UNAVAILABLE', 'A dependency of Reprise is unavailable; retry shortly');
  }
  return new ApiError('INTERNAL_ERROR', 'Internal error; the request id identifies it in the server log');
}
