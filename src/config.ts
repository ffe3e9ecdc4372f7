import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';
import { DEFAULT_PLANS, type Plan, type PlanTable } from './limits/plans.ts';
import { DEFAULT_PRICES, type PriceTable } from './cache/pricing.ts';

/** Everything Reprise reads from its environment, parsed once at start-up. */
export interface Config {
  host: string;
  port: number;
  dataDir: string;
  databaseUrl: string | null;
  /** PostgreSQL schema of all tables (created if missing). */
  pgSchema: string;
  /** How long a PostgreSQL query waits for its answer before the request is answered 503. */
  pgQueryTimeoutMs: number;
  redisUrl: string | null;
  /** Prefix of every Redis key. */
  redisPrefix: string;
  logLevel: string;
  limits: InputLimits;
  /** Plans and prices by name, without a prototype (see `ownKeysOnly`). */
  plans: PlanTable;
  prices: PriceTable;
  defaultPricePerMillion: number;
  embedder: EmbedderConfig;
  /** Default lifetime of an entry in seconds; 0 keeps entries until deleted. */
  entryTtlSeconds: number;
  /** Failed authentication attempts allowed per client address per minute. */
  authFailuresPerMinute: number;
  /**
   * Which `X-Forwarded-For` hops to believe: none (false), the last `n` (the addresses the
   * nearest proxies saw), or those added by the listed proxy addresses.
   */
  trustProxy: false | number | string[];
  sqliteSynchronous: 'FULL' | 'NORMAL';
  /** Embedded store: entries of a deleted account removed in one transaction (a batch), the write lock left free between two. */
  deleteBatch: number;
  /**
   * How long a starting server waits for its semantic index before it listens; past that it
   * listens, serving exact hits and stores, and semantic checks are misses until the index is in.
   */
  indexWaitSeconds: number;
  /** How semantic candidates are scored: the calibrated hit model, or raw cosine. */
  scorer: 'calibrated' | 'cosine';
  /** When set, `GET /metrics` needs `Authorization: Bearer <token>`; open otherwise. */
  metricsToken: string | null;
}

export interface InputLimits {
  bodyBytes: number;
  /** How long a client may take to send a whole request (headers and body), in ms: 408 after. */
  requestTimeoutMs: number;
  messages: number;
  messageChars: number;
  answerChars: number;
}

export type EmbedderConfig =
  | { kind: 'use-lite'; workers: number; memoSize: number; priority: number }
  | { kind: 'http'; url: string; model: string; apiKey: string | null; dimensions: number | null }
  | { kind: 'none' };

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    reason: string,
  ) {
    super(`${variable}: ${reason}`);
    this.name = 'ConfigError';
  }
}

type Env = Readonly<Record<string, string | undefined>>;

function metricsToken(env: Env): string | null {
  const token = env.REPRISE_METRICS_TOKEN;
  if (token === undefined || token === '') return null;
  if (!/^[\x21-\x7e]{16,200}$/.test(token)) {
    throw new ConfigError('REPRISE_METRICS_TOKEN', 'expected 16 to 200 printable characters without spaces');
  }
  return token;
}

function str(env: Env, name: string, fallback: string): string {
  const v = env[name];
  return v === undefined || v === '' ? fallback : v;
}

function int(env: Env, name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^-?\d+$/.test(raw.trim())) throw new ConfigError(name, `expected an integer, got ${JSON.stringify(raw)}`);
  const n = Number(raw);
  if (n < min || n > max) throw new ConfigError(name, `expected an integer from ${min} to ${max}, got ${n}`);
  return n;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

function logLevel(env: Env): string {
  const level = str(env, 'LOG_LEVEL', 'info');
  if (!LOG_LEVELS.includes(level))
    throw new ConfigError('LOG_LEVEL', `expected one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(level)}`);
  return level;
}

/**
 * `REPRISE_TRUST_PROXY`: true means one proxy in front (the address it saw, the last entry of
 * `X-Forwarded-For`; entries before it are the client's to write); a number, that many
 * proxies; otherwise a comma-separated list of proxy addresses or CIDR ranges.
 */
function trustProxy(env: Env): false | number | string[] {
  const raw = env.REPRISE_TRUST_PROXY?.trim();
  if (raw === undefined || raw === '' || /^(0|false|no|off)$/i.test(raw)) return false;
  if (/^(true|yes|on)$/i.test(raw)) return 1;
  if (/^\d+$/.test(raw)) return Number(raw);
  const list = raw.split(',').map((s) => s.trim());
  // An address (IPv4 or IPv6), with a prefix length its family allows.
  const proxy = (s: string): boolean => {
    const [address = '', prefix, more] = s.split('/');
    const family = isIP(address);
    if (family === 0 || more !== undefined) return false;
    return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128));
  };
  if (!list.every(proxy))
    throw new ConfigError(
      'REPRISE_TRUST_PROXY',
      `expected true, false, a number of proxies, or proxy addresses separated by commas, got ${JSON.stringify(raw)}`,
    );
  return list;
}

function url(env: Env, name: string, protocols: readonly string[]): string | null {
  const raw = env[name];
  if (raw === undefined || raw === '') return null;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(name, 'not a valid URL');
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `expected a ${protocols.join(' or ')} URL, got ${parsed.protocol}`);
  }
  return raw;
}

interface FileConfig {
  prices?: Record<string, unknown>;
  default_price_per_million?: unknown;
  plans?: Record<string, unknown>;
}

function readFileConfig(file: string): FileConfig {
  let text: string;
  let config: Record<string, unknown>;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError('REPRISE_CONFIG', `cannot read ${file}: ${(err as Error).message}`);
  }
  try {
    // A byte order mark (some editors begin UTF-8 with one) is no part of the JSON.
    const parsed: unknown = JSON.parse(text.replace(/^\uFEFF/, ''));
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
    config = parsed as Record<string, unknown>;
  } catch (err) {
    throw new ConfigError('REPRISE_CONFIG', `${file} is not a JSON object: ${(err as Error).message}`);
  }
  // A misspelt section would otherwise be ignored, and its prices or plans lost without a word.
  const unknown = Object.keys(config).find((k) => !FILE_KEYS.includes(k));
  if (unknown !== undefined) {
    throw new ConfigError('REPRISE_CONFIG', `unknown key "${unknown}" in ${file}; expected ${FILE_KEYS.join(', ')}`);
  }
  for (const section of ['prices', 'plans'] as const) {
    const v = config[section];
    if (v !== undefined && (typeof v !== 'object' || v === null || Array.isArray(v))) {
      throw new ConfigError('REPRISE_CONFIG', `${section} in ${file} must be an object`);
    }
  }
  return config as FileConfig;
}

const FILE_KEYS = ['prices', 'default_price_per_million', 'plans'];

function positiveNumber(v: unknown, where: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) {
    throw new ConfigError('REPRISE_CONFIG', `${where} must be a number >= 0`);
  }
  return v;
}

/**
 * A copy of a name-keyed table without a prototype: a plan or model named `toString` or
 * `constructor` is then unknown, not what every object has, and a `__proto__` in the config
 * file is a name like any other.
 */
function ownKeysOnly<T>(table: Readonly<Record<string, T>>): Record<string, T> {
  return Object.assign(Object.create(null) as Record<string, T>, table);
}

function mergePrices(file: FileConfig): { prices: PriceTable; fallback: number } {
  const prices: Record<string, number> = ownKeysOnly(DEFAULT_PRICES);
  for (const [model, price] of Object.entries(file.prices ?? {})) {
    prices[model.toLowerCase()] = positiveNumber(price, `prices.${model}`);
  }
  const fallback =
    file.default_price_per_million === undefined ? 2 : positiveNumber(file.default_price_per_million, 'default_price_per_million');
  return { prices, fallback };
}

const PLAN_KEYS = ['requests_per_minute', 'burst', 'unlimited', 'max_entries', 'max_stored_bytes'];

/**
 * A storage limit of a plan in the file: a whole number >= 1, `"unlimited"` for none, or absent or
 * null for `fallback` (the built-in plan's, or the free plan's for a plan of another name).
 */
function storageLimit(v: unknown, where: string, fallback: number | null): number | null {
  if (v === undefined || v === null) return fallback;
  if (v === 'unlimited') return null;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) {
    throw new ConfigError(
      'REPRISE_CONFIG',
      `${where} must be a whole number >= 1, "unlimited", or null for the default; got ${JSON.stringify(v)}`,
    );
  }
  return v;
}

/**
 * A plan's rate limit in the file: a number >= 1, or absent or null for `fallback` (the built-in
 * plan's); a plan of another name has none to fall back on.
 */
function rateLimit(v: unknown, where: string, fallback: number | undefined): number {
  if (v === undefined || v === null) {
    if (fallback === undefined)
      throw new ConfigError('REPRISE_CONFIG', `${where} is required for a plan that is not built in (a number >= 1)`);
    return fallback;
  }
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 1) {
    throw new ConfigError('REPRISE_CONFIG', `${where} must be a number >= 1; got ${JSON.stringify(v)}`);
  }
  return v;
}

/**
 * The plans: the built-in ones, each overridden key by key by a plan of its name in the file (what
 * the file leaves out, or sets to null, stays the built-in plan's: a file can set a plan's storage
 * limits alone), and the file's plans of other names, which need their rate limit and otherwise
 * get the `free` plan's storage limits.
 */
function mergePlans(file: FileConfig): PlanTable {
  const plans: PlanTable = ownKeysOnly(DEFAULT_PLANS);
  for (const [name, raw] of Object.entries(file.plans ?? {})) {
    if (!/^[a-z][a-z0-9_-]{0,31}$/.test(name)) {
      throw new ConfigError(
        'REPRISE_CONFIG',
        `plan name ${JSON.stringify(name)} in plans: a plan name is a lower-case letter, then up to 31 lower-case letters, digits, _ or -`,
      );
    }
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
      throw new ConfigError('REPRISE_CONFIG', `plans.${name} must be an object; got ${JSON.stringify(raw)}`);
    }
    const spec = raw as Record<string, unknown>;
    const stray = Object.keys(spec).find((k) => !PLAN_KEYS.includes(k));
    if (stray !== undefined) {
      throw new ConfigError('REPRISE_CONFIG', `plans.${name}: unknown key "${stray}"; expected ${PLAN_KEYS.join(', ')}`);
    }
    const builtIn = Object.hasOwn(DEFAULT_PLANS, name) ? DEFAULT_PLANS[name] : undefined;
    const unlimited = spec.unlimited ?? builtIn?.unlimited ?? false;
    if (typeof unlimited !== 'boolean') {
      throw new ConfigError('REPRISE_CONFIG', `plans.${name}.unlimited must be true or false; got ${JSON.stringify(unlimited)}`);
    }
    // Storage limits left out are the built-in plan's, or the free plan's for a plan of another name.
    const storage = builtIn ?? (DEFAULT_PLANS.free as Plan);
    plans[name] = {
      requestsPerMinute: rateLimit(spec.requests_per_minute, `plans.${name}.requests_per_minute`, builtIn?.requestsPerMinute),
      burst: rateLimit(spec.burst, `plans.${name}.burst`, builtIn?.burst),
      unlimited,
      maxEntries: storageLimit(spec.max_entries, `plans.${name}.max_entries`, storage.maxEntries),
      maxStoredBytes: storageLimit(spec.max_stored_bytes, `plans.${name}.max_stored_bytes`, storage.maxStoredBytes),
    };
  }
  return plans;
}

function embedderConfig(env: Env): EmbedderConfig {
  const kind = str(env, 'REPRISE_EMBEDDER', 'use-lite');
  switch (kind) {
    case 'use-lite':
      return {
        kind,
        workers: int(env, 'REPRISE_EMBED_WORKERS', 0, 0, 64),
        memoSize: int(env, 'REPRISE_EMBED_MEMO', 10_000, 0, 10_000_000),
        priority: int(env, 'REPRISE_EMBED_PRIORITY', 19, 0, 19),
      };
    case 'http': {
      const u = url(env, 'REPRISE_EMBED_URL', ['http:', 'https:']);
      if (u === null) throw new ConfigError('REPRISE_EMBED_URL', 'required when REPRISE_EMBEDDER=http');
      const dims = int(env, 'REPRISE_EMBED_DIMENSIONS', 0, 0, 65_536);
      return {
        kind,
        url: u,
        model: str(env, 'REPRISE_EMBED_MODEL', 'text-embedding-3-small'),
        apiKey: env.REPRISE_EMBED_API_KEY ?? null,
        dimensions: dims === 0 ? null : dims,
      };
    }
    case 'none':
      return { kind };
    default:
      throw new ConfigError('REPRISE_EMBEDDER', `expected use-lite, http or none, got ${JSON.stringify(kind)}`);
  }
}

function pgSchema(env: Env): string {
  const v = str(env, 'REPRISE_PG_SCHEMA', 'public');
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(v))
    throw new ConfigError('REPRISE_PG_SCHEMA', 'use lower-case letters, digits and _ (a PostgreSQL identifier)');
  return v;
}

function scorerName(env: Env): 'calibrated' | 'cosine' {
  const v = str(env, 'REPRISE_SCORER', 'calibrated');
  if (v !== 'calibrated' && v !== 'cosine')
    throw new ConfigError('REPRISE_SCORER', `expected calibrated or cosine, got ${JSON.stringify(v)}`);
  return v;
}

/** Parses the environment (and the optional JSON file named by REPRISE_CONFIG). Throws ConfigError. */
export function loadConfig(env: Env = process.env): Config {
  const file = env.REPRISE_CONFIG ? readFileConfig(env.REPRISE_CONFIG) : {};
  const { prices, fallback } = mergePrices(file);
  const sync = str(env, 'REPRISE_SQLITE_SYNCHRONOUS', 'FULL').toUpperCase();
  if (sync !== 'FULL' && sync !== 'NORMAL') {
    throw new ConfigError('REPRISE_SQLITE_SYNCHRONOUS', `expected FULL or NORMAL, got ${JSON.stringify(sync)}`);
  }
  return {
    host: str(env, 'HOST', '127.0.0.1'),
    port: int(env, 'PORT', 8080, 0, 65_535),
    dataDir: path.resolve(str(env, 'REPRISE_DATA_DIR', './data')),
    databaseUrl: url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']),
    pgSchema: pgSchema(env),
    // PostgreSQL's timeouts and Node's timers hold up to 2^31 - 1 ms.
    pgQueryTimeoutMs: int(env, 'REPRISE_PG_QUERY_TIMEOUT_MS', 5000, 100, 2_147_483_647),
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    redisPrefix: str(env, 'REPRISE_REDIS_PREFIX', 'reprise:'),
    logLevel: logLevel(env),
    limits: {
      bodyBytes: int(env, 'REPRISE_MAX_BODY_BYTES', 1_048_576, 1024),
      requestTimeoutMs: int(env, 'REPRISE_REQUEST_TIMEOUT_MS', 30_000, 1000),
      messages: int(env, 'REPRISE_MAX_MESSAGES', 256, 1),
      messageChars: int(env, 'REPRISE_MAX_MESSAGE_CHARS', 100_000, 1),
      answerChars: int(env, 'REPRISE_MAX_ANSWER_CHARS', 200_000, 1),
    },
    plans: mergePlans(file),
    prices,
    defaultPricePerMillion: fallback,
    embedder: embedderConfig(env),
    // Ten years, as for `ttl_seconds` on a store and the dashboard's setting.
    entryTtlSeconds: int(env, 'REPRISE_ENTRY_TTL_SECONDS', 0, 0, 315_360_000),
    authFailuresPerMinute: int(env, 'REPRISE_AUTH_FAILURES_PER_MINUTE', 30, 1),
    trustProxy: trustProxy(env),
    sqliteSynchronous: sync,
    deleteBatch: int(env, 'REPRISE_DELETE_BATCH', 1000, 1, 1_000_000),
    indexWaitSeconds: int(env, 'REPRISE_INDEX_WAIT_SECONDS', 10, 0, 86_400),
    scorer: scorerName(env),
    metricsToken: metricsToken(env),
  };
}
