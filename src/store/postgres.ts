import pg from 'pg';
import { AUTH_CHANNEL, KeyCache } from './pg-key-cache.ts';
import type { Message } from '../cache/canonical.ts';
import { bufferToVector, cutText, entryValues, newId, ORDER_SQL, PREVIEW_COLUMNS, RESTORED_ENTRY_SQL, vectorToBuffer } from './ids.ts';
import { limited, storageRefusal, type StorageLimits, type StorageUse } from './quota.ts';
import {
  AccountGoneError,
  type Account,
  type AccountDeletion,
  type ApiKey,
  type DeletedEntry,
  type Entry,
  type EntryHead,
  type EntryListOptions,
  type EntryPage,
  type EntryPreview,
  type EntryPreviewPage,
  type HitDelta,
  type NewEntry,
  type PurgeProgress,
  type PurgeResult,
  type Session,
  type Store,
  type UsageBucket,
  type UsageQuery,
  type UsageRow,
  type VectorRow,
  type VectorUpdate,
} from './interface.ts';

/** A store error caused by the database being unreachable: answered 503, retried by clients. */
export class StoreUnavailableError extends Error {
  readonly unavailable = true;
  constructor(cause: unknown) {
    super(`database unavailable: ${(cause as Error).message ?? String(cause)}`, { cause });
    this.name = 'StoreUnavailableError';
  }
}

/** Connection-level failures (as opposed to a bad query): SQLSTATE classes 08, 57P, 53 and socket errors. */
function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string') return err instanceof Error && /Connection terminated|connect|timeout/i.test(err.message);
  return /^(08|57P|53)/.test(code) || ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH'].includes(code);
}

/**
 * A database that takes no writes now: a standby (after a failover, DATABASE_URL still names the
 * old primary) or one set read-only. Not a bad query: the same write succeeds once it takes them,
 * so it is answered 503, for the client to retry, not 500.
 */
function refusesWrites(err: unknown): boolean {
  return (err as { code?: unknown }).code === '25006';
}

/**
 * A query that waited too long for a lock (`lock_timeout`, see the constructor): a transaction of
 * another node holds it, one of a node cut off in its middle that PostgreSQL has not ended yet.
 * The same query succeeds once it is let go, so it is answered 503, for the client to retry.
 */
function waitedForLock(err: unknown): boolean {
  return (err as { code?: unknown }).code === '55P03';
}

/** Errors of a database that cannot serve the request now, answered 503 (`StoreUnavailableError`). */
function isUnavailable(err: unknown): boolean {
  return isConnectionError(err) || refusesWrites(err) || waitedForLock(err);
}

/** The bytes an entry counts for (`storedBytes`) in SQL, of the row named by `row` (`NEW.`, `OLD.`, or '' for the table's own). */
const sizeOf = (row: string): string => `octet_length(${row}messages) + octet_length(${row}answer)`;

const MIGRATIONS: readonly string[] = [
  `CREATE TABLE accounts (
     id TEXT PRIMARY KEY,
     name TEXT NOT NULL UNIQUE,
     plan TEXT NOT NULL,
     created_at TEXT NOT NULL,
     default_threshold DOUBLE PRECISION,
     entry_ttl_seconds INTEGER,
     password_hash TEXT
   );
   CREATE TABLE api_keys (
     id TEXT PRIMARY KEY,
     account_id TEXT NOT NULL REFERENCES accounts(id),
     name TEXT,
     prefix TEXT NOT NULL,
     secret_hash TEXT NOT NULL UNIQUE,
     created_at TEXT NOT NULL,
     last_used_at TEXT,
     revoked_at TEXT
   );
   CREATE INDEX api_keys_account ON api_keys(account_id);
   CREATE TABLE entries (
     id BIGSERIAL PRIMARY KEY,
     account_id TEXT NOT NULL REFERENCES accounts(id),
     exact_hash TEXT NOT NULL,
     context_hash TEXT NOT NULL,
     prefix_hash TEXT NOT NULL,
     messages TEXT NOT NULL,
     query_text TEXT NOT NULL,
     prefix_text TEXT NOT NULL,
     answer TEXT NOT NULL,
     model TEXT NOT NULL,
     tokens BIGINT NOT NULL,
     embedder_id TEXT,
     vector BYTEA,
     prefix_vector BYTEA,
     created_at TEXT NOT NULL,
     expires_at TEXT,
     last_hit_at TEXT,
     usage_count BIGINT NOT NULL DEFAULT 0,
     UNIQUE (account_id, exact_hash)
   );
   CREATE INDEX entries_expiry ON entries(expires_at) WHERE expires_at IS NOT NULL;
   CREATE INDEX entries_account_id ON entries(account_id, id);
   CREATE TABLE usage (
     account_id TEXT NOT NULL,
     bucket TEXT NOT NULL,
     requests BIGINT NOT NULL DEFAULT 0,
     exact_hits BIGINT NOT NULL DEFAULT 0,
     semantic_hits BIGINT NOT NULL DEFAULT 0,
     lookup_ms_total DOUBLE PRECISION NOT NULL DEFAULT 0,
     tokens_saved BIGINT NOT NULL DEFAULT 0,
     cost_saved DOUBLE PRECISION NOT NULL DEFAULT 0,
     stores BIGINT NOT NULL DEFAULT 0,
     PRIMARY KEY (account_id, bucket)
   );
   CREATE TABLE entry_changes (
     seq BIGSERIAL PRIMARY KEY,
     entry_id BIGINT NOT NULL,
     op TEXT NOT NULL,
     account_id TEXT NOT NULL,
     context_hash TEXT NOT NULL,
     at TIMESTAMPTZ NOT NULL DEFAULT now()
   );`,
  `CREATE TABLE sessions (
     token_hash TEXT PRIMARY KEY,
     account_id TEXT NOT NULL REFERENCES accounts(id),
     csrf_token TEXT NOT NULL,
     created_at TEXT NOT NULL,
     expires_at TEXT NOT NULL
   );
   CREATE INDEX sessions_expiry ON sessions(expires_at);`,
  `ALTER TABLE entries ADD COLUMN lookup_ms_total DOUBLE PRECISION NOT NULL DEFAULT 0;`,
  // Every change to what a key lookup returns bumps the version and is announced, so nodes can
  // remember key lookups (see KeyCache); also when made by hand in psql.
  `CREATE TABLE auth_version (id INTEGER PRIMARY KEY CHECK (id = 1), v BIGINT NOT NULL);
   INSERT INTO auth_version (id, v) VALUES (1, 0);
   CREATE FUNCTION auth_changed() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     EXECUTE format('UPDATE %I.auth_version SET v = v + 1 WHERE id = 1', TG_TABLE_SCHEMA);
     PERFORM pg_notify('${AUTH_CHANNEL}', TG_TABLE_SCHEMA);
     RETURN NULL;
   END $$;
   CREATE TRIGGER api_keys_auth_changed AFTER UPDATE OF account_id, secret_hash, revoked_at OR DELETE ON api_keys
     FOR EACH STATEMENT EXECUTE FUNCTION auth_changed();
   CREATE TRIGGER accounts_auth_changed AFTER UPDATE OF name, plan, created_at, default_threshold, entry_ttl_seconds OR DELETE ON accounts
     FOR EACH STATEMENT EXECUTE FUNCTION auth_changed();`,
  `ALTER TABLE entries ADD COLUMN namespace TEXT;`,
  `ALTER TABLE entries ADD COLUMN public_id BIGINT;
   UPDATE entries SET public_id = floor(random() * 9007199254740990)::bigint + 1;
   CREATE UNIQUE INDEX entries_public_id ON entries(account_id, public_id);`,
  // A node of the version before public ids (during a rolling upgrade) inserts rows without one.
  `ALTER TABLE entries ALTER COLUMN public_id SET DEFAULT floor(random() * 9007199254740990)::bigint + 1;
   UPDATE entries SET public_id = DEFAULT WHERE public_id IS NULL;`,
  // What each account keeps, for its plan's storage limits: kept by a trigger in the transaction of
  // every write of an entry (also one made by hand, or by a node of the version before during an
  // upgrade), and counted here for the entries already stored. Writes of entries wait while they
  // are counted, so that none is missed between the count and the trigger. Bytes: the messages'
  // JSON and the answer, in UTF-8 (see quota.ts).
  `LOCK TABLE entries IN SHARE ROW EXCLUSIVE MODE;
   CREATE TABLE account_storage (
     account_id TEXT PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
     entries BIGINT NOT NULL DEFAULT 0,
     bytes BIGINT NOT NULL DEFAULT 0
   );
   INSERT INTO account_storage (account_id, entries, bytes)
     SELECT account_id, count(*), sum(${sizeOf('')}) FROM entries GROUP BY account_id;
   CREATE FUNCTION entries_storage() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     IF TG_OP = 'UPDATE' AND OLD.account_id = NEW.account_id THEN
       EXECUTE format('UPDATE %I.account_storage SET bytes = bytes + $2 WHERE account_id = $1', TG_TABLE_SCHEMA)
         USING NEW.account_id, (${sizeOf('NEW.')}) - (${sizeOf('OLD.')});
       RETURN NULL;
     END IF;
     IF TG_OP <> 'INSERT' THEN
       EXECUTE format('UPDATE %I.account_storage SET entries = entries - 1, bytes = bytes - $2 WHERE account_id = $1', TG_TABLE_SCHEMA)
         USING OLD.account_id, ${sizeOf('OLD.')};
     END IF;
     IF TG_OP <> 'DELETE' THEN
       EXECUTE format('INSERT INTO %I.account_storage AS s (account_id, entries, bytes) VALUES ($1, 1, $2)
                       ON CONFLICT (account_id) DO UPDATE SET entries = s.entries + 1, bytes = s.bytes + excluded.bytes', TG_TABLE_SCHEMA)
         USING NEW.account_id, ${sizeOf('NEW.')};
     END IF;
     RETURN NULL;
   END $$;
   CREATE TRIGGER entries_storage AFTER INSERT OR DELETE OR UPDATE OF account_id, messages, answer ON entries
     FOR EACH ROW EXECUTE FUNCTION entries_storage();`,
  // The vector index snapshots nodes saved at shutdown, each in its own data directory: the change
  // number it reflects. A node loads its snapshot only when its token is here (saved beside this
  // very database, not one restored from a backup made before) and the change log still holds
  // every change after its number.
  `CREATE TABLE index_snapshots (
     token TEXT PRIMARY KEY,
     seq BIGINT NOT NULL,
     saved_at TIMESTAMPTZ NOT NULL DEFAULT now()
   );`,
  // An account deleted is marked so (with its keys, sessions, usage and counts deleted) in one
  // short transaction, and its entries removed afterwards, a batch at a time (`deleteAccount`,
  // `purgeDeletedAccounts`); its row goes with the last batch. Its name is free from the mark on.
  `ALTER TABLE accounts ADD COLUMN IF NOT EXISTS deleted_at TEXT;
   ALTER TABLE accounts DROP CONSTRAINT IF EXISTS accounts_name_key;
   CREATE UNIQUE INDEX IF NOT EXISTS accounts_live_name ON accounts(name) WHERE deleted_at IS NULL;
   CREATE INDEX IF NOT EXISTS accounts_deleted ON accounts(deleted_at) WHERE deleted_at IS NOT NULL;
   DROP TRIGGER IF EXISTS accounts_auth_changed ON accounts;
   CREATE TRIGGER accounts_auth_changed AFTER UPDATE OF name, plan, created_at, default_threshold, entry_ttl_seconds, deleted_at OR DELETE ON accounts
     FOR EACH STATEMENT EXECUTE FUNCTION auth_changed();`,
];

/** An entry's insert, followed by what to do when the account has one of its exact hash. */
const INSERT_ENTRY_SQL = `INSERT INTO entries (account_id, exact_hash, context_hash, prefix_hash, messages, query_text, prefix_text,
    answer, model, tokens, embedder_id, vector, prefix_vector, created_at, expires_at, namespace, public_id)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`;

/** A store of an exact hash the account has replaces that entry, keeping its ids (`putEntry`). */
const UPSERT_ENTRY_SQL = `ON CONFLICT (account_id, exact_hash) DO UPDATE SET
    context_hash = excluded.context_hash, prefix_hash = excluded.prefix_hash, namespace = excluded.namespace,
    public_id = COALESCE(entries.public_id, excluded.public_id),
    messages = excluded.messages, query_text = excluded.query_text, prefix_text = excluded.prefix_text,
    answer = excluded.answer, model = excluded.model, tokens = excluded.tokens,
    embedder_id = excluded.embedder_id, vector = excluded.vector, prefix_vector = excluded.prefix_vector,
    ${RESTORED_ENTRY_SQL}, expires_at = excluded.expires_at
  RETURNING *`;

/** The channel on which entry changes are announced (payload: the change sequence). */
export const CHANGES_CHANNEL = 'reprise_entry_changes';
/** Entry changes older than this are removed by the expiry sweep, oldest first. */
export const CHANGES_KEPT_DAYS = 7;

export interface EntryChange {
  seq: number;
  entryId: number;
  op: 'put' | 'delete';
  accountId: string;
  contextHash: string;
}

/**
 * A change as nodes read it: with the entry's embedder id (of a put whose entry is still there;
 * one stored while its embedder failed has no vector yet) and its current vector, if any.
 */
export type ChangeRow = EntryChange & { embedderId: string | null; vector: VectorRow | null };

interface Row {
  [k: string]: unknown;
}

/**
 * Rows of a batch in one order, the same on every node. Two nodes writing counts to the same rows
 * at the same moment each in the order it first counted them would lock them in opposite orders
 * and deadlock: PostgreSQL waits a second (`deadlock_timeout`) before failing one of the batches.
 */
function inLockOrder<T>(items: readonly T[], key: (item: T) => string | number): T[] {
  return [...items].sort((a, b) => {
    const ka = key(a);
    const kb = key(b);
    return ka < kb ? -1 : ka > kb ? 1 : 0;
  });
}

/**
 * The accounts among those `ids` (a query of account ids) that exist and are not deleted, locked
 * against their deletion until the transaction ends. A deletion (`deleteAccount`) locks its
 * account for the moment it takes to mark it deleted; its entries are removed after that, while
 * it is marked (`purgeDeletedAccounts`). A node's batch of counters, which holds every account's
 * counts of its last second, leaves out the counts of an account marked or being marked (it is
 * gone) and keeps those of the others, without waiting. Nothing the service does but a deletion
 * locks an account's row so: stores and changes of settings do not (a change of its name by hand
 * in psql would, for as long as its transaction).
 */
const liveAccounts = (ids: string): string =>
  `SELECT id FROM accounts WHERE id IN (${ids}) AND deleted_at IS NULL FOR KEY SHARE SKIP LOCKED`;

const num = (v: unknown): number => (typeof v === 'string' ? Number(v) : (v as number));
const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));

const toAccount = (r: Row): Account => ({
  id: String(r.id),
  name: String(r.name),
  plan: String(r.plan),
  createdAt: String(r.created_at),
  defaultThreshold: r.default_threshold === null ? null : num(r.default_threshold),
  entryTtlSeconds: r.entry_ttl_seconds === null ? null : num(r.entry_ttl_seconds),
});

const toKey = (r: Row): ApiKey => ({
  id: String(r.id),
  accountId: String(r.account_id),
  name: strOrNull(r.name),
  prefix: String(r.prefix),
  createdAt: String(r.created_at),
  lastUsedAt: strOrNull(r.last_used_at),
  revokedAt: strOrNull(r.revoked_at),
});

/** The columns an entry and its preview both carry. */
const toEntryMeta = (r: Row): Omit<Entry, 'messages' | 'queryText' | 'prefixText' | 'answer' | 'vector' | 'prefixVector'> => ({
  id: num(r.id),
  publicId: num(r.public_id),
  accountId: String(r.account_id),
  exactHash: String(r.exact_hash),
  contextHash: String(r.context_hash),
  namespace: strOrNull(r.namespace),
  prefixHash: String(r.prefix_hash),
  model: String(r.model),
  tokens: num(r.tokens),
  embedderId: strOrNull(r.embedder_id),
  createdAt: String(r.created_at),
  expiresAt: strOrNull(r.expires_at),
  lastHitAt: strOrNull(r.last_hit_at),
  usageCount: num(r.usage_count),
  lookupMsTotal: num(r.lookup_ms_total ?? 0),
});

const toEntry = (r: Row): Entry => ({
  ...toEntryMeta(r),
  messages: JSON.parse(String(r.messages)) as Message[],
  queryText: String(r.query_text),
  prefixText: String(r.prefix_text),
  answer: String(r.answer),
  vector: r.vector ? bufferToVector(r.vector as Buffer) : null,
  prefixVector: r.prefix_vector ? bufferToVector(r.prefix_vector as Buffer) : null,
});

const toPreview = (r: Row, chars: number): EntryPreview => ({
  ...toEntryMeta(r),
  hasVector: r.has_vector === true,
  queryPreview: cutText(String(r.query_preview), chars),
  queryLength: num(r.query_length),
  answerPreview: cutText(String(r.answer_preview), chars),
  answerLength: num(r.answer_length),
});

/**
 * The length of a text column of the page's rows in UTF-16 code units, as JavaScript counts it,
 * in SQL (with `utf16Lengths`, named `as`): its characters, plus one for each beyond U+FFFF (two
 * code units each), looked for only in a text not of ASCII alone (more bytes than characters),
 * and counted only in one that has their first bytes in UTF-8 (F0 to F4, which no other
 * character's UTF-8 holds). The text is read once for all that, not for each function.
 */
const utf16Length = (column: string, as: string): string =>
  `(${as}.chars + CASE WHEN octet_length(${as}.bytes) = ${as}.chars THEN 0
     WHEN ${['f0', 'f1', 'f2', 'f3', 'f4'].map((b) => `position('\\x${b}'::bytea IN ${as}.bytes) > 0`).join(' OR ')}
     THEN char_length(regexp_replace(${column}, '[^\\U00010000-\\U0010FFFF]+', '', 'g')) ELSE 0 END)`;

/** The characters and the UTF-8 of a text column, read once per row (see `utf16Length`). */
const utf16Lengths = (column: string, as: string): string =>
  `CROSS JOIN LATERAL (SELECT char_length(${column}) AS chars, convert_to(${column}, 'UTF8') AS bytes OFFSET 0) AS ${as}`;

const toUsage = (r: Row): UsageBucket => ({
  bucket: String(r.bucket),
  requests: num(r.requests),
  exactHits: num(r.exact_hits),
  semanticHits: num(r.semantic_hits),
  lookupMsTotal: num(r.lookup_ms_total),
  tokensSaved: num(r.tokens_saved),
  costSaved: num(r.cost_saved),
  stores: num(r.stores),
});

export interface PostgresOptions {
  /** Schema for all tables (created if missing); default `public`. */
  schema?: string;
  max?: number;
  /**
   * How long a query may wait for its answer before it fails as the database being unavailable
   * (503), in ms; default 5,000. A server that stops answering on open connections (hung, or cut
   * off by a network that drops packets) would otherwise hold every request that reads it.
   */
  queryTimeoutMs?: number;
  /** Entries of a deleted account removed a transaction (`purgeDeletedAccounts`); default 1,000. */
  deleteBatch?: number;
}

/** How often a node reads PostgreSQL's clock (`now`). */
const CLOCK_READ_MS = 10_000;

/** Migrations and an account's deletion may rewrite large tables: they wait this long for an answer. */
const LONG_QUERY_TIMEOUT_MS = 3_600_000;

/**
 * The cluster store: PostgreSQL as the source of truth for every node. Writes to entries also
 * append to `entry_changes` in the same transaction and NOTIFY, so other nodes keep their
 * vector indexes in step.
 */
export class PostgresStore implements Store {
  readonly kind = 'postgres' as const;
  readonly pool: pg.Pool;
  /** Connections whose commits do not wait for the WAL flush: for counters only. */
  private readonly counters: pg.Pool;
  readonly schema: string;
  /** The schema as a quoted identifier: a reserved word ("user", "order") is a name like any other. */
  private get quoted(): string {
    return `"${this.schema}"`;
  }
  private readonly keys: KeyCache<{ key: ApiKey; account: Account }>;
  private readonly deleteBatch: number;
  /** PostgreSQL's clock less this node's, in ms, as last read (`readClock`). */
  private clockOffsetMs = 0;
  private clockTimer: NodeJS.Timeout | null = null;

  private constructor(url: string, opts: PostgresOptions) {
    this.schema = opts.schema ?? 'public';
    this.deleteBatch = opts.deleteBatch ?? 1000;
    if (!/^[a-z_][a-z0-9_]{0,62}$/.test(this.schema)) throw new Error(`invalid schema name ${this.schema}`);
    // Connections are kept alive at the TCP level, so a peer that vanished is noticed on idle ones.
    const queryTimeout = opts.queryTimeoutMs ?? 5000;
    const common = { connectionString: url, connectionTimeoutMillis: 3000, query_timeout: queryTimeout, keepAlive: true };
    // A transaction left open by a node cut off in its middle is ended by PostgreSQL after as long as
    // a query may take: a store holds the lock of its account's storage counts until it commits,
    // and the account's other stores, on every node, wait for it. (The node's transactions never
    // wait for anything but their own queries.) A wait for a lock is given up sooner, after four
    // fifths of that: the stores such a node had sent, queued behind its open one, are let go before
    // PostgreSQL ends it, instead of each taking the lock in turn and holding it, idle, as long again.
    const lockTimeout = Math.max(1, Math.round(queryTimeout * 0.8));
    const session = `-c search_path=${this.quoted} -c idle_in_transaction_session_timeout=${queryTimeout} -c lock_timeout=${lockTimeout}`;
    this.pool = new pg.Pool({ ...common, max: opts.max ?? 10, options: session });
    this.counters = new pg.Pool({ ...common, max: 2, options: `${session} -c synchronous_commit=off` });
    // An idle client losing its connection must not crash the process; the pool replaces it.
    this.pool.on('error', () => undefined);
    this.counters.on('error', () => undefined);
    this.keys = new KeyCache(url, this.schema, async () => String((await this.q('SELECT v FROM auth_version WHERE id = 1'))[0]?.v));
  }

  static async open(url: string, opts: PostgresOptions = {}): Promise<PostgresStore> {
    const store = new PostgresStore(url, opts);
    await store.migrate();
    await store.readClock();
    store.clockTimer = setInterval(() => void store.readClock().catch(() => undefined), CLOCK_READ_MS);
    store.clockTimer.unref();
    return store;
  }

  /**
   * The time by PostgreSQL's clock, in ms since the epoch, for every time the nodes compare with
   * each other's: when an entry was stored and when it expires, and whether it has. By each node's
   * own clock, a node two hours behind stored entries that the others took for expired two hours
   * ago, and served the others' entries two hours past their end. Read from this node's clock and
   * its difference from PostgreSQL's, measured at open and every CLOCK_READ_MS.
   */
  readonly now = (): number => Date.now() + this.clockOffsetMs;

  private isoNow(): string {
    return new Date(this.now()).toISOString();
  }

  private async readClock(): Promise<void> {
    const sent = Date.now();
    const rows = await this.q('SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms');
    const received = Date.now();
    this.clockOffsetMs = Math.round(num(rows[0]?.ms) - (sent + received) / 2);
  }

  /**
   * Whether `schema` holds Reprise's tables (a node or `reprise keys create` has opened it), read
   * without making anything: opening the store makes the schema and its tables when they are missing.
   */
  static async initialised(url: string, schema = 'public'): Promise<boolean> {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
    await client.connect();
    try {
      const { rowCount } = await client.query(
        `SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'schema_migrations'`,
        [schema],
      );
      return rowCount === 1;
    } finally {
      await client.end();
    }
  }

  /** Applies pending migrations under an advisory lock, so nodes starting together are safe. */
  private async migrate(): Promise<void> {
    await this.withClient(async (client) => {
      await client.query('BEGIN');
      // Another node's migrations are waited for as long as they may take, and so are the locks
      // the migrations take.
      await client.query('SET LOCAL lock_timeout = 0');
      await client.query({
        text: 'SELECT pg_advisory_xact_lock(hashtext($1))',
        values: [`reprise-migrate:${this.schema}`],
        query_timeout: LONG_QUERY_TIMEOUT_MS,
      } as pg.QueryConfig);
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${this.quoted}`);
      await client.query(
        'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())',
      );
      const { rows } = await client.query('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations');
      for (let v = num(rows[0]?.v) + 1; v <= MIGRATIONS.length; v++) {
        await client.query({ text: MIGRATIONS[v - 1] as string, query_timeout: LONG_QUERY_TIMEOUT_MS } as pg.QueryConfig);
        await client.query('INSERT INTO schema_migrations (version) VALUES ($1)', [v]);
      }
      await client.query('COMMIT');
    });
  }

  private async q(sql: string, args: unknown[] = []): Promise<Row[]> {
    try {
      return (await this.pool.query(sql, args)).rows as Row[];
    } catch (err) {
      throw isUnavailable(err) ? new StoreUnavailableError(err) : err;
    }
  }

  /**
   * Counters (usage, hit counts) are committed without waiting for the WAL flush: losing the
   * last few milliseconds of counts in a database crash is acceptable, a disk sync per request
   * is not. Entries and keys are never written this way.
   */
  private async counterQuery(sql: string, args: unknown[]): Promise<void> {
    try {
      await this.counters.query(sql, args);
    } catch (err) {
      throw isUnavailable(err) ? new StoreUnavailableError(err) : err;
    }
  }

  private async tx<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return this.withClient(async (client) => {
      await client.query('BEGIN');
      const out = await fn(client);
      await client.query('COMMIT');
      return out;
    });
  }

  /**
   * Runs `fn` on a client of its own, rolling back what it left open when it fails. While a client
   * is checked out, the pool does not listen for its errors: a connection ended by the server
   * between two queries (a restart, `pg_terminate_backend`) would be an unhandled 'error' event
   * and end the process. The listener here takes it; the client is then discarded, not reused.
   */
  private async withClient<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw new StoreUnavailableError(err);
    }
    let lost: Error | undefined;
    const onError = (err: Error) => {
      lost = err;
    };
    client.on('error', onError);
    try {
      return await fn(client);
    } catch (err) {
      if (lost === undefined && isConnectionError(err)) lost = err as Error;
      if (lost === undefined) await client.query('ROLLBACK').catch(() => undefined);
      // One already said so (by a transaction run within this one's, as `alone` runs them) is not said twice.
      if (err instanceof StoreUnavailableError) throw err;
      throw lost !== undefined || refusesWrites(err) || waitedForLock(err) ? new StoreUnavailableError(err) : err;
    } finally {
      client.off('error', onError);
      client.release(lost);
    }
  }

  async createAccount(name: string, plan: string): Promise<Account> {
    const rows = await this.q('INSERT INTO accounts (id, name, plan, created_at) VALUES ($1, $2, $3, $4) RETURNING *', [
      newId('acc'),
      name,
      plan,
      this.isoNow(),
    ]);
    return toAccount(rows[0] as Row);
  }

  async getAccount(id: string): Promise<Account | null> {
    const rows = await this.q('SELECT * FROM accounts WHERE id = $1 AND deleted_at IS NULL', [id]);
    return rows[0] ? toAccount(rows[0]) : null;
  }

  async getAccountByName(name: string): Promise<Account | null> {
    const rows = await this.q('SELECT * FROM accounts WHERE name = $1 AND deleted_at IS NULL', [name]);
    return rows[0] ? toAccount(rows[0]) : null;
  }

  async listAccounts(): Promise<Account[]> {
    return (await this.q('SELECT * FROM accounts WHERE deleted_at IS NULL ORDER BY created_at, id')).map(toAccount);
  }

  async updateAccount(id: string, patch: Partial<Pick<Account, 'plan' | 'defaultThreshold' | 'entryTtlSeconds'>>): Promise<Account | null> {
    const sets: string[] = [];
    const args: unknown[] = [];
    const add = (col: string, v: unknown) => {
      args.push(v);
      sets.push(`${col} = $${args.length}`);
    };
    if (patch.plan !== undefined) add('plan', patch.plan);
    if (patch.defaultThreshold !== undefined) add('default_threshold', patch.defaultThreshold);
    if (patch.entryTtlSeconds !== undefined) add('entry_ttl_seconds', patch.entryTtlSeconds);
    if (sets.length > 0) {
      args.push(id);
      await this.q(`UPDATE accounts SET ${sets.join(', ')} WHERE id = $${args.length} AND deleted_at IS NULL`, args);
      this.keys.invalidate();
    }
    return this.getAccount(id);
  }

  async setPassword(accountId: string, passwordHash: string | null): Promise<void> {
    await this.tx(async (c) => {
      await c.query('UPDATE accounts SET password_hash = $1 WHERE id = $2', [passwordHash, accountId]);
      await c.query('DELETE FROM sessions WHERE account_id = $1', [accountId]);
    });
  }

  /**
   * Deletes the account for everyone at once, in one short transaction: its keys, dashboard
   * sessions and storage counts go, and the account is marked deleted (its name free); its entries
   * and usage stay until `purgeDeletedAccounts` removes them, a batch at a time, and its row with
   * the last. Marked, it is gone: its keys are refused on every node (the change of its keys is
   * announced as any is), it is in no list, its counters are dropped, and a store for it is refused
   * (`AccountGoneError`, `lockLiveAccount`). Its entries removed in this transaction (100,000 take
   * seconds) held it all that time: its own stores, on every node, waited for it and were answered
   * 503 once they had waited as long as a lock is waited for.
   */
  async deleteAccount(id: string): Promise<AccountDeletion | null> {
    const deleted = await this.tx(async (c) => {
      // Locked first: the stores of the account under way (each holds its row, `lockLiveAccount`)
      // commit before it is marked, and those that come meanwhile wait for the mark, then find it
      // gone. A node's batch of counters under way holds it too, for a moment. Those waits are not
      // given up (lock_timeout): a node cut off with one open is ended by PostgreSQL.
      await c.query('SET LOCAL lock_timeout = 0');
      const { rows } = await c.query({
        text: 'SELECT * FROM accounts WHERE id = $1 AND deleted_at IS NULL FOR UPDATE',
        values: [id],
        query_timeout: LONG_QUERY_TIMEOUT_MS,
      } as pg.QueryConfig);
      const row = rows[0] as Row | undefined;
      if (!row) return null;
      const run = async (sql: string, args: unknown[] = [id]) =>
        (await c.query({ text: sql, values: args, query_timeout: LONG_QUERY_TIMEOUT_MS } as pg.QueryConfig)).rowCount ?? 0;
      const entries = (await c.query('SELECT count(*) AS n FROM entries WHERE account_id = $1', [id])).rows[0] as Row;
      const usage = (await c.query('SELECT count(*) AS n FROM usage WHERE account_id = $1', [id])).rows[0] as Row;
      const sessions = await run('DELETE FROM sessions WHERE account_id = $1');
      const keys = await run('DELETE FROM api_keys WHERE account_id = $1');
      // Its entries' deletes update no counts from now on (a trigger), which would otherwise take
      // time in the square of the entries of a batch.
      await run('DELETE FROM account_storage WHERE account_id = $1');
      await run('UPDATE accounts SET deleted_at = $2 WHERE id = $1', [id, this.isoNow()]);
      return { account: toAccount(row), keys, sessions, entries: num(entries.n), usageBuckets: num(usage.n) };
    });
    if (deleted) this.keys.invalidate();
    return deleted;
  }

  /**
   * Removes the entries of accounts marked deleted (`deleteAccount`), oldest deletion first,
   * `deleteBatch` a transaction, each announced in the change log as any delete is (every node
   * takes its vector out of its index); the account's row goes with its last batch. One node (or
   * CLI) of the cluster at a time (`alone`); null at once when another is at it. Interrupted (a
   * crash, a kill, the database lost), it leaves whole batches: the next run goes on from there.
   */
  async purgeDeletedAccounts(opts: { onBatch?: (p: PurgeProgress) => void; signal?: AbortSignal } = {}): Promise<PurgeResult | null> {
    return this.alone('purge-deleted-accounts', async () => {
      const result: PurgeResult = { accounts: 0, entries: 0, usageBuckets: 0 };
      for (;;) {
        if (opts.signal?.aborted) return result;
        const next = (await this.q('SELECT id FROM accounts WHERE deleted_at IS NOT NULL ORDER BY deleted_at, id LIMIT 1'))[0];
        if (!next) return result;
        const accountId = String(next.id);
        let left = num((await this.q('SELECT count(*) AS n FROM entries WHERE account_id = $1', [accountId]))[0]?.n ?? 0);
        let removed = 0;
        for (;;) {
          if (opts.signal?.aborted) return result;
          const done = await this.tx(async (c) => {
            // An entry another transaction holds (a node's hit counts) is waited for, however long.
            await c.query('SET LOCAL lock_timeout = 0');
            const logged = await c.query({
              text: `WITH gone AS (DELETE FROM entries WHERE id IN (SELECT id FROM entries WHERE account_id = $1 ORDER BY id LIMIT $2)
                                   RETURNING id, context_hash),
                          logged AS (INSERT INTO entry_changes (entry_id, op, account_id, context_hash)
                                     SELECT id, 'delete', $1, context_hash FROM gone ORDER BY id RETURNING seq)
                     SELECT count(*) AS n, max(seq) AS last FROM logged`,
              values: [accountId, this.deleteBatch],
              query_timeout: LONG_QUERY_TIMEOUT_MS,
            } as pg.QueryConfig);
            const { n, last } = logged.rows[0] as Row;
            if (num(n) > 0) await c.query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, String(last)]);
            const finished = num(n) < this.deleteBatch;
            let usage = 0;
            if (finished) {
              usage = (await c.query('DELETE FROM usage WHERE account_id = $1', [accountId])).rowCount ?? 0;
              // A key or session made for it as it was marked (read before, written after) goes with it.
              await c.query('DELETE FROM sessions WHERE account_id = $1', [accountId]);
              await c.query('DELETE FROM api_keys WHERE account_id = $1', [accountId]);
              await c.query('DELETE FROM accounts WHERE id = $1', [accountId]);
            }
            return { entries: num(n), usage, finished };
          });
          removed += done.entries;
          left = Math.max(0, left - done.entries);
          result.entries += done.entries;
          result.usageBuckets += done.usage;
          opts.onBatch?.({ accountId, entriesRemoved: removed, entriesLeft: done.finished ? 0 : left });
          if (done.finished) break;
        }
        result.accounts++;
      }
    });
  }

  /** The entries of an account marked deleted still to remove, or null when none is left of it. */
  async purgeLeft(accountId: string): Promise<number | null> {
    const marked = await this.q('SELECT 1 FROM accounts WHERE id = $1 AND deleted_at IS NOT NULL', [accountId]);
    if (marked.length === 0) return null;
    return num((await this.q('SELECT count(*) AS n FROM entries WHERE account_id = $1', [accountId]))[0]?.n ?? 0);
  }

  async getPasswordHash(accountId: string): Promise<string | null> {
    const rows = await this.q('SELECT password_hash FROM accounts WHERE id = $1 AND deleted_at IS NULL', [accountId]);
    return strOrNull(rows[0]?.password_hash);
  }

  async createKey(key: { accountId: string; name: string | null; prefix: string; secretHash: string }): Promise<ApiKey> {
    const rows = await this.q(
      'INSERT INTO api_keys (id, account_id, name, prefix, secret_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING *',
      [newId('key'), key.accountId, key.name, key.prefix, key.secretHash, this.isoNow()],
    );
    return toKey(rows[0] as Row);
  }

  async findKeyByHash(secretHash: string): Promise<{ key: ApiKey; account: Account } | null> {
    const cached = this.keys.get(secretHash);
    if (cached) return cached;
    const token = this.keys.token();
    const rows = await this.q(
      `SELECT k.*, a.name AS a_name, a.plan AS a_plan, a.created_at AS a_created_at,
              a.default_threshold AS a_default_threshold, a.entry_ttl_seconds AS a_entry_ttl_seconds
         FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.secret_hash = $1 AND a.deleted_at IS NULL`,
      [secretHash],
    );
    const r = rows[0];
    if (!r) return null;
    const found = {
      key: toKey(r),
      account: toAccount({
        id: r.account_id,
        name: r.a_name,
        plan: r.a_plan,
        created_at: r.a_created_at,
        default_threshold: r.a_default_threshold,
        entry_ttl_seconds: r.a_entry_ttl_seconds,
      }),
    };
    this.keys.set(secretHash, found, token);
    return found;
  }

  async getKey(id: string): Promise<ApiKey | null> {
    const rows = await this.q('SELECT * FROM api_keys WHERE id = $1', [id]);
    return rows[0] ? toKey(rows[0]) : null;
  }

  async listKeys(accountId: string): Promise<ApiKey[]> {
    return (await this.q('SELECT * FROM api_keys WHERE account_id = $1 ORDER BY created_at, id', [accountId])).map(toKey);
  }

  async revokeKey(id: string, accountId?: string): Promise<ApiKey | null> {
    const rows = await this.q(
      `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE id = $1 AND ($3::text IS NULL OR account_id = $3) RETURNING *`,
      [id, this.isoNow(), accountId ?? null],
    );
    this.keys.invalidate();
    return rows[0] ? toKey(rows[0]) : null;
  }

  async touchKeys(lastUsed: ReadonlyMap<string, string>): Promise<void> {
    if (lastUsed.size === 0) return;
    const ids = inLockOrder([...lastUsed.keys()], (id) => id);
    // A key of an account being deleted is waited for only a moment: the deletion deletes the
    // keys last, just before it commits (see deleteAccount).
    await this.counterQuery(
      `UPDATE api_keys k SET last_used_at = u.at FROM unnest($1::text[], $2::text[]) AS u(id, at)
        WHERE k.id = u.id AND (k.last_used_at IS NULL OR k.last_used_at < u.at)`,
      [ids, ids.map((id) => lastUsed.get(id) ?? '')],
    );
  }

  async putEntry(e: NewEntry, limits: StorageLimits | null = null): Promise<Entry> {
    try {
      return await this.upsertEntry(e, limits);
    } catch (err) {
      // A store let in before its account was deleted fails the foreign key check of its account.
      if ((err as { code?: unknown }).code === '23503') throw new AccountGoneError(e.accountId, { cause: err });
      throw err;
    }
  }

  private async upsertEntry(e: NewEntry, limits: StorageLimits | null): Promise<Entry> {
    const values = entryValues(e);
    if (!limited(limits)) {
      return this.tx(async (c) => {
        await this.lockLiveAccount(c, e.accountId);
        return this.putWritten(c, (await c.query(`${INSERT_ENTRY_SQL} ${UPSERT_ENTRY_SQL}`, values)).rows[0] as Row);
      });
    }
    // An entry of this hash inserted by another writer between the look and the insert: looked at again.
    for (let tries = 0; tries < 10; tries++) {
      const stored = await this.tx(async (c) => {
        await this.lockLiveAccount(c, e.accountId);
        return this.putWithin(c, e.accountId, e.exactHash, values, limits);
      });
      if (stored !== null) return stored;
    }
    throw new Error('an entry stored again and again by other writers while this store was checked against its limits');
  }

  /**
   * Holds the account's row (shared, as the foreign key check of an entry's insert would) until
   * the store's transaction ends, or throws `AccountGoneError` when it is marked deleted: a store
   * under way when the account is deleted commits before the deletion marks it (which waits for
   * it), and one that comes after is refused, never acknowledged and then removed with its entries.
   * A node that had the account's key in memory, not yet told of the deletion, sends it here.
   */
  private async lockLiveAccount(c: pg.PoolClient, accountId: string): Promise<void> {
    const { rowCount } = await c.query('SELECT 1 FROM accounts WHERE id = $1 AND deleted_at IS NULL FOR KEY SHARE', [accountId]);
    if (rowCount === 0) throw new AccountGoneError(accountId);
  }

  /**
   * One attempt at a store checked against `limits`, in transaction `c`; null (nothing written)
   * when another writer inserted an entry of the same hash after the look, for the caller to try
   * again. Every writer of entries locks an entry before its account's row of `account_storage`
   * (the trigger updates that row after the entry is written), this one too, so none waits for
   * another in the opposite order. The entry replaced is locked while it is measured; the account's
   * use is read once the trigger has counted this store, under the lock the trigger took, so that
   * of two stores racing for the last room, on any nodes, the second reads the first's count.
   */
  private async putWithin(
    c: pg.PoolClient,
    accountId: string,
    exactHash: string,
    values: unknown[],
    limits: StorageLimits,
  ): Promise<Entry | null> {
    const before = (
      await c.query(`SELECT ${sizeOf('')} AS bytes FROM entries WHERE account_id = $1 AND exact_hash = $2 FOR UPDATE`, [
        accountId,
        exactHash,
      ])
    ).rows[0] as Row | undefined;
    const { rows } = await c.query(
      `${INSERT_ENTRY_SQL} ${before ? UPSERT_ENTRY_SQL : 'ON CONFLICT (account_id, exact_hash) DO NOTHING RETURNING *'}, ${sizeOf('')} AS stored_bytes`,
      values,
    );
    const row = rows[0] as Row | undefined;
    if (!row) return null;
    const added = { entries: before ? 0 : 1, bytes: num(row.stored_bytes) - (before ? num(before.bytes) : 0) };
    const use = (await c.query('SELECT entries, bytes FROM account_storage WHERE account_id = $1', [accountId])).rows[0] as Row | undefined;
    const refusal = storageRefusal(limits, { entries: num(use?.entries ?? 0), bytes: num(use?.bytes ?? 0) }, added);
    // Thrown: the transaction is rolled back, the entry as it was.
    if (refusal) throw refusal;
    return this.putWritten(c, row);
  }

  /** The entry a store wrote, once its change is logged for the other nodes. */
  private async putWritten(c: pg.PoolClient, row: Row): Promise<Entry> {
    const entry = toEntry(row);
    await this.recordChange(c, [{ entryId: entry.id, op: 'put', accountId: entry.accountId, contextHash: entry.contextHash }]);
    return entry;
  }

  async getStorage(accountId: string): Promise<StorageUse> {
    const r = (await this.q('SELECT entries, bytes FROM account_storage WHERE account_id = $1', [accountId]))[0];
    return { entries: num(r?.entries ?? 0), bytes: num(r?.bytes ?? 0) };
  }

  private async recordChange(c: pg.PoolClient, changes: Omit<EntryChange, 'seq'>[]): Promise<void> {
    if (changes.length === 0) return;
    const { rows } = await c.query(
      `INSERT INTO entry_changes (entry_id, op, account_id, context_hash)
       SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[]) RETURNING seq`,
      [changes.map((x) => x.entryId), changes.map((x) => x.op), changes.map((x) => x.accountId), changes.map((x) => x.contextHash)],
    );
    const last = rows[rows.length - 1] as Row;
    await c.query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, String(last.seq)]);
  }

  async getEntryByHash(accountId: string, exactHash: string): Promise<EntryHead | null> {
    const rows = await this.q(
      'SELECT id, public_id, account_id, exact_hash, context_hash, prefix_hash, answer, model, tokens, embedder_id, created_at, expires_at, last_hit_at, usage_count, lookup_ms_total FROM entries WHERE account_id = $1 AND exact_hash = $2',
      [accountId, exactHash],
    );
    const r = rows[0];
    if (!r) return null;
    const {
      messages: _m,
      vector: _v,
      prefixVector: _p,
      queryText: _q,
      prefixText: _t,
      ...head
    } = toEntry({ ...r, messages: '[]', query_text: '', prefix_text: '' });
    return head;
  }

  async getEntry(accountId: string, publicId: number): Promise<Entry | null> {
    const rows = await this.q(
      'SELECT * FROM entries WHERE account_id = $1 AND public_id = $2 AND (expires_at IS NULL OR expires_at > $3)',
      [accountId, publicId, this.isoNow()],
    );
    return rows[0] ? toEntry(rows[0]) : null;
  }

  async getEntries(ids: readonly number[]): Promise<Entry[]> {
    if (ids.length === 0) return [];
    return (await this.q('SELECT * FROM entries WHERE id = ANY($1::bigint[])', [ids])).map(toEntry);
  }

  async listEntries(accountId: string, opts: EntryListOptions): Promise<EntryPage> {
    const { rows, total } = await this.listRows(accountId, opts, '*');
    return { entries: rows.map(toEntry), total };
  }

  async listEntryPreviews(accountId: string, opts: EntryListOptions, chars: number): Promise<EntryPreviewPage> {
    // `left` counts characters: `chars` of them are `chars` UTF-16 code units at least, cut to
    // that in JavaScript.
    const n = Math.max(0, Math.floor(chars));
    const columns = `${PREVIEW_COLUMNS}, vector IS NOT NULL AS has_vector,
      left(query_text, ${n}) AS query_preview, ${utf16Length('query_text', 'q')} AS query_length,
      left(answer, ${n}) AS answer_preview, ${utf16Length('answer', 'a')} AS answer_length`;
    const { rows, total } = await this.listRows(
      accountId,
      opts,
      columns,
      `${utf16Lengths('query_text', 'q')} ${utf16Lengths('answer', 'a')}`,
    );
    return { entries: rows.map((r) => toPreview(r, n)), total };
  }

  /** A page of an account's live entries, of the columns named (see `listEntries`). */
  private async listRows(accountId: string, opts: EntryListOptions, columns: string, joins = ''): Promise<{ rows: Row[]; total: number }> {
    // Expired entries are gone for the account already, before the sweep deletes them.
    const args: unknown[] = [accountId, this.isoNow()];
    let where = 'account_id = $1 AND (expires_at IS NULL OR expires_at > $2)';
    // An empty namespace is none, as on check and store.
    if (opts.namespace === '') where += ' AND namespace IS NULL';
    else if (opts.namespace !== undefined) {
      args.push(opts.namespace);
      where += ` AND namespace = $${args.length}`;
    }
    if (opts.q) {
      args.push(`%${opts.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
      where += ` AND (query_text ILIKE $${args.length} OR answer ILIKE $${args.length} OR model ILIKE $${args.length})`;
    }
    const order = ORDER_SQL[opts.order ?? 'recent'];
    const total = num((await this.q(`SELECT COUNT(*) AS n FROM entries WHERE ${where}`, args))[0]?.n);
    const page = `WHERE ${where} ORDER BY ${order} LIMIT $${args.length + 1} OFFSET $${args.length + 2}`;
    // Other columns than the row's own are computed for the page's rows alone, once they are
    // chosen, not for every row sorted.
    const rows = await this.q(
      columns === '*'
        ? `SELECT * FROM entries ${page}`
        : `SELECT ${columns} FROM (SELECT id FROM entries ${page}) AS page JOIN entries USING (id) ${joins} ORDER BY ${order}`,
      [...args, opts.perPage, (opts.page - 1) * opts.perPage],
    );
    return { rows, total };
  }

  async deleteEntry(accountId: string, publicId: number): Promise<DeletedEntry | null> {
    return this.tx(async (c) => {
      const { rows } = await c.query(
        'DELETE FROM entries WHERE account_id = $1 AND public_id = $2 AND (expires_at IS NULL OR expires_at > $3) RETURNING id, context_hash',
        [accountId, publicId, this.isoNow()],
      );
      const r = rows[0] as Row | undefined;
      if (!r) return null;
      const gone = { id: num(r.id), accountId, contextHash: String(r.context_hash) };
      await this.recordChange(c, [{ entryId: gone.id, op: 'delete', accountId, contextHash: gone.contextHash }]);
      return gone;
    });
  }

  async recordHits(hits: ReadonlyMap<number, HitDelta>): Promise<void> {
    if (hits.size === 0) return;
    const ids = inLockOrder([...hits.keys()], (id) => id);
    // The entries of an account being deleted are left alone: the deletion holds them.
    await this.counterQuery(
      `WITH h AS (SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::float8[], $5::text[]) AS h(id, n, at, ms, created)),
            live AS MATERIALIZED (${liveAccounts('SELECT e.account_id FROM entries e JOIN h ON e.id = h.id')})
       UPDATE entries e SET usage_count = e.usage_count + h.n, last_hit_at = GREATEST(COALESCE(e.last_hit_at, ''), h.at),
              lookup_ms_total = e.lookup_ms_total + h.ms
         FROM h, live
        WHERE e.id = h.id AND e.created_at = h.created AND e.account_id = live.id`,
      [
        ids,
        ids.map((id) => hits.get(id)?.count ?? 0),
        ids.map((id) => hits.get(id)?.at ?? ''),
        ids.map((id) => hits.get(id)?.lookupMs ?? 0),
        ids.map((id) => hits.get(id)?.createdAt ?? ''),
      ],
    );
  }

  async deleteExpired(now: string, limit: number, accountId?: string): Promise<DeletedEntry[]> {
    return this.tx(async (c) => {
      // The entries first (those no other writer holds), then their accounts' rows of
      // account_storage in one order, which the delete's trigger updates: every writer locks an
      // entry before its account's row, and two sweeps (two nodes) lock the rows of the same
      // accounts in the same order, so none waits for another in the opposite order. The entries
      // of an account being deleted are left to its deletion (as in `liveAccounts`): it holds its
      // row of account_storage from its start, and a sweep that took some of them waited for it
      // until it failed (lock_timeout), with every other account's expired entries of its batch;
      // meanwhile the deletion, come to the entries the sweep held, waited for the sweep (a
      // deadlock, which PostgreSQL ends by failing one of the two: the deletion, too).
      const doomed = (
        await c.query(
          `SELECT e.id, e.account_id FROM entries e JOIN accounts a ON a.id = e.account_id
            WHERE e.expires_at IS NOT NULL AND e.expires_at <= $1 AND ($3::text IS NULL OR e.account_id = $3) AND a.deleted_at IS NULL
            LIMIT $2 FOR UPDATE OF e SKIP LOCKED FOR KEY SHARE OF a SKIP LOCKED`,
          [now, limit, accountId ?? null],
        )
      ).rows as Row[];
      if (doomed.length === 0) return [];
      await c.query('SELECT 1 FROM account_storage WHERE account_id = ANY($1::text[]) ORDER BY account_id FOR UPDATE', [
        [...new Set(doomed.map((r) => String(r.account_id)))],
      ]);
      const { rows } = await c.query('DELETE FROM entries WHERE id = ANY($1::bigint[]) RETURNING id, account_id, context_hash', [
        doomed.map((r) => num(r.id)),
      ]);
      const gone = (rows as Row[]).map((r) => ({ id: num(r.id), accountId: String(r.account_id), contextHash: String(r.context_hash) }));
      await this.recordChange(
        c,
        gone.map((g) => ({ entryId: g.id, op: 'delete' as const, accountId: g.accountId, contextHash: g.contextHash })),
      );
      return gone;
    });
  }

  async pruneChanges(limit: number): Promise<number> {
    // The change log is read by nodes catching up; a week back is far more than any needs. The
    // latest change is kept, so that a starting node knows where numbers were pruned (`changeBounds`).
    const { rowCount } = await this.pool.query(
      `DELETE FROM entry_changes WHERE seq IN (SELECT seq FROM entry_changes ORDER BY seq LIMIT $1)
         AND at < now() - make_interval(days => $2) AND seq < (SELECT max(seq) FROM entry_changes)`,
      [limit, CHANGES_KEPT_DAYS],
    );
    return rowCount ?? 0;
  }

  async scanVectors(afterId: number, limit: number): Promise<VectorRow[]> {
    const rows = await this.q(
      `SELECT e.id, e.account_id, e.context_hash, e.embedder_id, e.vector, e.expires_at FROM entries e
        WHERE e.id > $1 AND e.vector IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = e.account_id AND a.deleted_at IS NOT NULL)
        ORDER BY e.id LIMIT $2`,
      [afterId, limit],
    );
    return rows.map((r) => ({
      id: num(r.id),
      accountId: String(r.account_id),
      contextHash: String(r.context_hash),
      embedderId: String(r.embedder_id ?? ''),
      vector: bufferToVector(r.vector as Buffer),
      expiresAt: strOrNull(r.expires_at),
    }));
  }

  /**
   * Runs `fn` while this node holds the cluster-wide lock `name` (a session advisory lock, on a
   * connection of its own), or returns null at once when another node holds it. A node that stops
   * lets go of it with its connection.
   */
  async alone<T>(name: string, fn: () => Promise<T>): Promise<T | null> {
    const lock = `reprise:${this.schema}:${name}`;
    return this.withClient(async (client) => {
      const { rows } = await client.query('SELECT pg_try_advisory_lock(hashtext($1)) AS held', [lock]);
      if ((rows[0] as Row | undefined)?.held !== true) return null;
      try {
        return await fn();
      } finally {
        await client.query('SELECT pg_advisory_unlock(hashtext($1))', [lock]).catch(() => undefined);
      }
    });
  }

  async staleVectorIds(current: string, embedderId: string, prefix: string, afterId: number, limit: number): Promise<number[]> {
    const rows = await this.q(
      `SELECT id FROM entries WHERE id > $1 AND (vector IS NOT NULL OR embedder_id = $5 || 'pending') AND embedder_id <> $2
         AND (embedder_id = $3 OR left(embedder_id, $4) = $5) ORDER BY id LIMIT $6`,
      [afterId, current, embedderId, prefix.length, prefix, limit],
    );
    return rows.map((r) => num(r.id));
  }

  async replaceVectors(updates: readonly VectorUpdate[]): Promise<number[]> {
    if (updates.length === 0) return [];
    return this.tx(async (c) => {
      const { rows } = await c.query(
        `UPDATE entries e SET embedder_id = u.embedder_id, vector = u.vector, prefix_vector = u.prefix_vector
           FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bytea[], $5::bytea[]) AS u(id, from_id, embedder_id, vector, prefix_vector)
          WHERE e.id = u.id AND e.embedder_id = u.from_id
          RETURNING e.id, e.account_id, e.context_hash`,
        [
          updates.map((u) => u.id),
          updates.map((u) => u.from),
          updates.map((u) => u.embedderId),
          updates.map((u) => vectorToBuffer(u.vector)),
          updates.map((u) => (u.prefixVector ? vectorToBuffer(u.prefixVector) : null)),
        ],
      );
      // Other nodes take the new vectors into their indexes as for any entry stored.
      await this.recordChange(
        c,
        rows.map((r) => ({ entryId: num(r.id), op: 'put' as const, accountId: String(r.account_id), contextHash: String(r.context_hash) })),
      );
      return rows.map((r) => num(r.id));
    });
  }

  /** Changes after `seq`, oldest first, with the vectors of entries still present. */
  async changesSince(seq: number, limit = 1000): Promise<ChangeRow[]> {
    return this.changesWhere('c.seq > $1 ORDER BY c.seq LIMIT $2', [seq, limit]);
  }

  /** The changes of these sequence numbers that are committed. */
  async changesAt(seqs: readonly number[]): Promise<ChangeRow[]> {
    return this.changesWhere('c.seq = ANY($1::bigint[]) ORDER BY c.seq', [seqs]);
  }

  /** Changes, each with the current vector of its entry when it is a put. */
  private async changesWhere(where: string, args: unknown[]): Promise<ChangeRow[]> {
    const rows = await this.q(
      `SELECT c.seq, c.entry_id, c.op, c.account_id, c.context_hash, e.embedder_id, e.vector, e.expires_at
         FROM entry_changes c LEFT JOIN entries e ON e.id = c.entry_id AND c.op = 'put'
        WHERE ${where}`,
      args,
    );
    return rows.map((r) => ({
      seq: num(r.seq),
      entryId: num(r.entry_id),
      op: r.op === 'delete' ? 'delete' : 'put',
      accountId: String(r.account_id),
      contextHash: String(r.context_hash),
      embedderId: strOrNull(r.embedder_id),
      vector: r.vector
        ? {
            id: num(r.entry_id),
            accountId: String(r.account_id),
            contextHash: String(r.context_hash),
            embedderId: String(r.embedder_id ?? ''),
            vector: bufferToVector(r.vector as Buffer),
            expiresAt: strOrNull(r.expires_at),
          }
        : null,
    }));
  }

  /** The latest change sequence; an index loaded now is in step up to here. */
  async lastChange(): Promise<number> {
    return num((await this.q('SELECT COALESCE(MAX(seq), 0) AS s FROM entry_changes'))[0]?.s);
  }

  /**
   * The oldest and the latest sequence numbers of the change log (0 and 0 when it is empty): the
   * numbers below the oldest were pruned, not taken by writes still to commit.
   */
  /**
   * The change number a node's index snapshot reflects, or null when this database has no record
   * of it (see the index_snapshots table).
   */
  async snapshotSeq(token: string): Promise<number | null> {
    const row = (await this.q('SELECT seq FROM index_snapshots WHERE token = $1', [token]))[0];
    return row ? num(row.seq) : null;
  }

  /**
   * Records a node's index snapshot (before it is written: a record whose files are not on disk
   * is never matched), and forgets those of any node saved before the change log's oldest change:
   * too old to be brought up to date.
   */
  async recordSnapshot(token: string, seq: number): Promise<void> {
    await this.tx(async (c) => {
      await c.query('INSERT INTO index_snapshots (token, seq) VALUES ($1, $2)', [token, seq]);
      await c.query('DELETE FROM index_snapshots WHERE seq < (SELECT MIN(seq) - 1 FROM entry_changes)');
    });
  }

  /** Forgets the record of a node's index snapshot, once another has replaced it on disk. */
  async forgetSnapshot(token: string): Promise<void> {
    await this.q('DELETE FROM index_snapshots WHERE token = $1', [token]);
  }

  async changeBounds(): Promise<{ first: number; last: number }> {
    const row = (await this.q('SELECT COALESCE(MIN(seq), 0) AS f, COALESCE(MAX(seq), 0) AS l FROM entry_changes'))[0];
    return { first: num(row?.f), last: num(row?.l) };
  }

  async addUsage(batch: readonly UsageRow[]): Promise<void> {
    if (batch.length === 0) return;
    const rows = inLockOrder(batch, (r) => `${r.accountId}\u0000${r.bucket}`);
    // Only for accounts that exist, locked against their deletion (`deleteAccount`) until this
    // commits: counts of requests let in before an account was deleted, written after, would
    // bring back its usage. Those of an account being deleted are dropped (`liveAccounts`). The
    // rows are written in the order given.
    await this.counterQuery(
      `INSERT INTO usage (account_id, bucket, requests, exact_hits, semantic_hits, lookup_ms_total, tokens_saved, cost_saved, stores)
       SELECT u.account_id, u.bucket, u.requests, u.exact_hits, u.semantic_hits, u.lookup_ms_total, u.tokens_saved, u.cost_saved, u.stores
         FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::float8[], $7::bigint[], $8::float8[], $9::bigint[])
              WITH ORDINALITY AS u(account_id, bucket, requests, exact_hits, semantic_hits, lookup_ms_total, tokens_saved, cost_saved, stores, ord)
         JOIN accounts a ON a.id = u.account_id
        ORDER BY u.ord
          FOR KEY SHARE OF a SKIP LOCKED
       ON CONFLICT (account_id, bucket) DO UPDATE SET
         requests = usage.requests + excluded.requests, exact_hits = usage.exact_hits + excluded.exact_hits,
         semantic_hits = usage.semantic_hits + excluded.semantic_hits, lookup_ms_total = usage.lookup_ms_total + excluded.lookup_ms_total,
         tokens_saved = usage.tokens_saved + excluded.tokens_saved, cost_saved = usage.cost_saved + excluded.cost_saved,
         stores = usage.stores + excluded.stores`,
      [
        rows.map((r) => r.accountId),
        rows.map((r) => r.bucket),
        rows.map((r) => r.requests),
        rows.map((r) => r.exactHits),
        rows.map((r) => r.semanticHits),
        rows.map((r) => r.lookupMsTotal),
        rows.map((r) => r.tokensSaved),
        rows.map((r) => r.costSaved),
        rows.map((r) => r.stores),
      ],
    );
  }

  async getUsage(accountId: string, query: UsageQuery): Promise<UsageBucket[]> {
    const rows = await this.q('SELECT * FROM usage WHERE account_id = $1 AND bucket >= $2 AND bucket < $3 ORDER BY bucket', [
      accountId,
      query.from ?? '',
      query.to ?? '9999',
    ]);
    return rows.map(toUsage);
  }

  async createSession(x: Session): Promise<void> {
    await this.q('DELETE FROM sessions WHERE expires_at <= $1', [this.isoNow()]);
    await this.q('INSERT INTO sessions (token_hash, account_id, csrf_token, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)', [
      x.tokenHash,
      x.accountId,
      x.csrfToken,
      x.createdAt,
      x.expiresAt,
    ]);
  }

  async getSession(tokenHash: string, now: string): Promise<Session | null> {
    const r = (await this.q('SELECT * FROM sessions WHERE token_hash = $1 AND expires_at > $2', [tokenHash, now]))[0];
    return r
      ? {
          tokenHash: String(r.token_hash),
          accountId: String(r.account_id),
          csrfToken: String(r.csrf_token),
          createdAt: String(r.created_at),
          expiresAt: String(r.expires_at),
        }
      : null;
  }

  async deleteSession(tokenHash: string): Promise<void> {
    await this.q('DELETE FROM sessions WHERE token_hash = $1', [tokenHash]);
  }

  async close(): Promise<void> {
    if (this.clockTimer) clearInterval(this.clockTimer);
    await this.keys.close();
    await this.counters.end();
    await this.pool.end();
  }
}
