import { mkdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { setImmediate as nextPass, setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import type { Message } from '../cache/canonical.ts';
import { Lru } from '../util/lru.ts';
import { lockFile } from './data-dir-lock.ts';
import { bufferToVector, cutText, entryValues, newId, ORDER_SQL, PREVIEW_COLUMNS, RESTORED_ENTRY_SQL, vectorToBuffer } from './ids.ts';
import { limited, StorageQuotaError, storageRefusal, storedBytes, type StorageLimits, type StorageUse } from './quota.ts';
import {
  AccountGoneError,
  type Account,
  type AccountDeletion,
  type ApiKey,
  type ChangedVector,
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
  type RemovedVector,
  type Session,
  type Store,
  type UsageBucket,
  type UsageQuery,
  type UsageRow,
  type VectorRow,
  type VectorUpdate,
} from './interface.ts';

/**
 * The bytes an entry counts for (`storedBytes`) in SQL, of the row named by `row` (`NEW.`, `OLD.`,
 * or '' for the table's own). The text as a blob is its UTF-8 bytes; `length` of the text would
 * count characters. (Not `octet_length`: the sqlite3 shells of some systems predate it, and the
 * triggers run there too.)
 */
const sizeOf = (row: string): string => `length(CAST(${row}messages AS BLOB)) + length(CAST(${row}answer AS BLOB))`;

/**
 * The length of a text column in UTF-16 code units, as JavaScript counts it, in SQL: its
 * characters (`length`), plus one for each beyond U+FFFF (two code units each), which are those
 * whose UTF-8 starts with a byte from F0 to F4, a byte no other character's UTF-8 holds; those
 * are counted as the bytes `replace` takes out of the text's UTF-8. A text of ASCII alone (as
 * many bytes as characters) is not looked through for them. The text is not read into JavaScript.
 */
const utf16Length = (column: string): string => {
  let rest = `CAST(${column} AS BLOB)`;
  for (const lead of ['F0', 'F1', 'F2', 'F3', 'F4']) rest = `replace(${rest}, X'${lead}', '')`;
  return `(CASE WHEN octet_length(${column}) = length(${column}) THEN length(${column})
    ELSE length(${column}) + octet_length(${column}) - length(CAST(${rest} AS BLOB)) END)`;
};

const MIGRATIONS: readonly string[] = [
  `CREATE TABLE accounts (
     id TEXT PRIMARY KEY,
     name TEXT NOT NULL UNIQUE,
     plan TEXT NOT NULL,
     created_at TEXT NOT NULL,
     default_threshold REAL,
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
     id INTEGER PRIMARY KEY AUTOINCREMENT,
     account_id TEXT NOT NULL REFERENCES accounts(id),
     exact_hash TEXT NOT NULL,
     context_hash TEXT NOT NULL,
     prefix_hash TEXT NOT NULL,
     messages TEXT NOT NULL,
     query_text TEXT NOT NULL,
     prefix_text TEXT NOT NULL,
     answer TEXT NOT NULL,
     model TEXT NOT NULL,
     tokens INTEGER NOT NULL,
     embedder_id TEXT,
     vector BLOB,
     prefix_vector BLOB,
     created_at TEXT NOT NULL,
     expires_at TEXT,
     last_hit_at TEXT,
     usage_count INTEGER NOT NULL DEFAULT 0,
     UNIQUE (account_id, exact_hash)
   );
   CREATE INDEX entries_expiry ON entries(expires_at) WHERE expires_at IS NOT NULL;
   CREATE INDEX entries_account_created ON entries(account_id, id);
   CREATE TABLE usage (
     account_id TEXT NOT NULL,
     bucket TEXT NOT NULL,
     requests INTEGER NOT NULL DEFAULT 0,
     exact_hits INTEGER NOT NULL DEFAULT 0,
     semantic_hits INTEGER NOT NULL DEFAULT 0,
     lookup_ms_total REAL NOT NULL DEFAULT 0,
     tokens_saved INTEGER NOT NULL DEFAULT 0,
     cost_saved REAL NOT NULL DEFAULT 0,
     stores INTEGER NOT NULL DEFAULT 0,
     PRIMARY KEY (account_id, bucket)
   );`,
  `CREATE TABLE sessions (
     token_hash TEXT PRIMARY KEY,
     account_id TEXT NOT NULL REFERENCES accounts(id),
     csrf_token TEXT NOT NULL,
     created_at TEXT NOT NULL,
     expires_at TEXT NOT NULL
   );
   CREATE INDEX sessions_expiry ON sessions(expires_at);`,
  `ALTER TABLE entries ADD COLUMN lookup_ms_total REAL NOT NULL DEFAULT 0;`,
  `ALTER TABLE entries ADD COLUMN namespace TEXT;`,
  `ALTER TABLE entries ADD COLUMN public_id INTEGER;
   UPDATE entries SET public_id = (abs(random()) % 9007199254740991) + 1;
   CREATE UNIQUE INDEX entries_public_id ON entries(account_id, public_id);`,
  // A node of the version before public ids (during an upgrade) inserts rows without one.
  `CREATE TRIGGER entries_public_id_missing AFTER INSERT ON entries WHEN NEW.public_id IS NULL
   BEGIN
     UPDATE entries SET public_id = (abs(random()) % 9007199254740991) + 1 WHERE id = NEW.id;
   END;
   UPDATE entries SET public_id = (abs(random()) % 9007199254740991) + 1 WHERE public_id IS NULL;`,
  `CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);`,
  // Numbers every write of an entry's vector, and every removal of one from where it is searched
  // (a delete, an expiry, a move to another partition), in one sequence: a vector index snapshot
  // saved at number n is brought up to date after a crash from what came after n
  // (changedVectors, removedVectors). Triggers, so every writer of the file (a server of an earlier
  // version, the CLI) numbers its writes too. Existing rows keep their id as their number, which is
  // what a snapshot saved before this version took as its watermark: the highest id its index had
  // held, which may be that of an entry deleted since. So the sequence goes on from the highest id
  // ever given (AUTOINCREMENT's), not from the highest left: a write numbered at or below that
  // watermark would never be read into the index after a crash.
  `CREATE TABLE vector_seq (n INTEGER NOT NULL);
   INSERT INTO vector_seq (n) SELECT max(
     COALESCE((SELECT MAX(id) FROM entries), 0),
     COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'entries'), 0));
   ALTER TABLE entries ADD COLUMN vector_seq INTEGER;
   UPDATE entries SET vector_seq = id;
   CREATE INDEX entries_vector_seq ON entries(vector_seq);
   CREATE TABLE removed_vectors (
     seq INTEGER PRIMARY KEY,
     id INTEGER NOT NULL,
     account_id TEXT NOT NULL,
     context_hash TEXT NOT NULL
   );
   CREATE TRIGGER entries_vector_inserted AFTER INSERT ON entries
   BEGIN
     UPDATE vector_seq SET n = n + 1;
     UPDATE entries SET vector_seq = (SELECT n FROM vector_seq) WHERE id = NEW.id;
   END;
   CREATE TRIGGER entries_vector_updated AFTER UPDATE OF account_id, context_hash, embedder_id, vector, expires_at ON entries
   BEGIN
     UPDATE vector_seq SET n = n + 1;
     INSERT INTO removed_vectors (seq, id, account_id, context_hash)
       SELECT n, OLD.id, OLD.account_id, OLD.context_hash FROM vector_seq
       WHERE OLD.account_id <> NEW.account_id OR OLD.context_hash <> NEW.context_hash;
     UPDATE vector_seq SET n = n + 1;
     UPDATE entries SET vector_seq = (SELECT n FROM vector_seq) WHERE id = NEW.id;
   END;
   CREATE TRIGGER entries_vector_deleted AFTER DELETE ON entries
   BEGIN
     UPDATE vector_seq SET n = n + 1;
     INSERT INTO removed_vectors (seq, id, account_id, context_hash) SELECT n, OLD.id, OLD.account_id, OLD.context_hash FROM vector_seq;
   END;`,
  // What each account keeps, for its plan's storage limits: kept by triggers in the transaction of
  // every write of an entry (also one made with the sqlite3 shell), and counted here for the
  // entries already stored. Bytes: the messages' JSON and the answer, in UTF-8 (see quota.ts).
  `CREATE TABLE account_storage (
     account_id TEXT PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
     entries INTEGER NOT NULL DEFAULT 0,
     bytes INTEGER NOT NULL DEFAULT 0
   );
   INSERT INTO account_storage (account_id, entries, bytes)
     SELECT account_id, count(*), sum(${sizeOf('')}) FROM entries GROUP BY account_id;
   CREATE TRIGGER entries_storage_insert AFTER INSERT ON entries
   BEGIN
     INSERT INTO account_storage (account_id, entries, bytes) VALUES (NEW.account_id, 1, ${sizeOf('NEW.')})
       ON CONFLICT (account_id) DO UPDATE SET entries = entries + 1, bytes = bytes + excluded.bytes;
   END;
   CREATE TRIGGER entries_storage_delete AFTER DELETE ON entries
   BEGIN
     UPDATE account_storage SET entries = entries - 1, bytes = bytes - (${sizeOf('OLD.')}) WHERE account_id = OLD.account_id;
   END;
   CREATE TRIGGER entries_storage_update AFTER UPDATE OF account_id, messages, answer ON entries
   BEGIN
     UPDATE account_storage SET entries = entries - 1, bytes = bytes - (${sizeOf('OLD.')}) WHERE account_id = OLD.account_id;
     INSERT INTO account_storage (account_id, entries, bytes) VALUES (NEW.account_id, 1, ${sizeOf('NEW.')})
       ON CONFLICT (account_id) DO UPDATE SET entries = entries + 1, bytes = bytes + excluded.bytes;
   END;`,
  // Accounts deleted whose entries and usage are still being removed (see deleteAccount): the
  // account, its keys and sessions are gone already.
  `CREATE TABLE account_purges (account_id TEXT PRIMARY KEY, deleted_at TEXT NOT NULL);`,
];

interface AccountRow {
  id: string;
  name: string;
  plan: string;
  created_at: string;
  default_threshold: number | null;
  entry_ttl_seconds: number | null;
}

interface KeyRow {
  id: string;
  account_id: string;
  name: string | null;
  prefix: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

interface EntryRow {
  id: number;
  account_id: string;
  exact_hash: string;
  context_hash: string;
  prefix_hash: string;
  messages: string;
  query_text: string;
  prefix_text: string;
  answer: string;
  model: string;
  tokens: number;
  embedder_id: string | null;
  vector: Buffer | null;
  prefix_vector: Buffer | null;
  created_at: string;
  expires_at: string | null;
  last_hit_at: string | null;
  usage_count: number;
  lookup_ms_total: number;
  namespace: string | null;
  public_id: number;
}

interface UsageDbRow {
  bucket: string;
  requests: number;
  exact_hits: number;
  semantic_hits: number;
  lookup_ms_total: number;
  tokens_saved: number;
  cost_saved: number;
  stores: number;
}

const toAccount = (r: AccountRow): Account => ({
  id: r.id,
  name: r.name,
  plan: r.plan,
  createdAt: r.created_at,
  defaultThreshold: r.default_threshold,
  entryTtlSeconds: r.entry_ttl_seconds,
});

const toKey = (r: KeyRow): ApiKey => ({
  id: r.id,
  accountId: r.account_id,
  name: r.name,
  prefix: r.prefix,
  createdAt: r.created_at,
  lastUsedAt: r.last_used_at,
  revokedAt: r.revoked_at,
});

const toHead = (r: EntryRow): EntryHead => ({
  id: r.id,
  publicId: r.public_id,
  accountId: r.account_id,
  exactHash: r.exact_hash,
  contextHash: r.context_hash,
  prefixHash: r.prefix_hash,
  answer: r.answer,
  model: r.model,
  tokens: r.tokens,
  embedderId: r.embedder_id,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
  lastHitAt: r.last_hit_at,
  usageCount: r.usage_count,
  lookupMsTotal: r.lookup_ms_total,
});

type EntryMeta = Omit<Entry, 'messages' | 'queryText' | 'prefixText' | 'answer' | 'vector' | 'prefixVector'>;

/** The columns an entry and its preview both carry. */
const toEntryMeta = (r: Omit<EntryRow, 'messages' | 'query_text' | 'prefix_text' | 'answer' | 'vector' | 'prefix_vector'>): EntryMeta => ({
  id: r.id,
  publicId: r.public_id,
  accountId: r.account_id,
  exactHash: r.exact_hash,
  contextHash: r.context_hash,
  namespace: r.namespace,
  prefixHash: r.prefix_hash,
  model: r.model,
  tokens: r.tokens,
  embedderId: r.embedder_id,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
  lastHitAt: r.last_hit_at,
  usageCount: r.usage_count,
  lookupMsTotal: r.lookup_ms_total,
});

export const toEntry = (r: EntryRow): Entry => ({
  ...toEntryMeta(r),
  messages: JSON.parse(r.messages) as Message[],
  queryText: r.query_text,
  prefixText: r.prefix_text,
  answer: r.answer,
  vector: r.vector ? bufferToVector(r.vector) : null,
  prefixVector: r.prefix_vector ? bufferToVector(r.prefix_vector) : null,
});

interface PreviewRow extends Omit<EntryRow, 'messages' | 'query_text' | 'prefix_text' | 'answer' | 'vector' | 'prefix_vector'> {
  has_vector: number;
  query_preview: string;
  query_length: number;
  answer_preview: string;
  answer_length: number;
}

const toPreview = (r: PreviewRow, chars: number): EntryPreview => ({
  ...toEntryMeta(r),
  hasVector: r.has_vector === 1,
  queryPreview: cutText(r.query_preview, chars),
  queryLength: r.query_length,
  answerPreview: cutText(r.answer_preview, chars),
  answerLength: r.answer_length,
});

const toUsage = (r: UsageDbRow): UsageBucket => ({
  bucket: r.bucket,
  requests: r.requests,
  exactHits: r.exact_hits,
  semanticHits: r.semantic_hits,
  lookupMsTotal: r.lookup_ms_total,
  tokensSaved: r.tokens_saved,
  costSaved: r.cost_saved,
  stores: r.stores,
});

/**
 * SQLite's codes for a database that cannot be used now, as opposed to a fault in a request: the
 * disk is full or failing, the files were made read-only or removed, or another process has held
 * the write lock beyond the busy timeout. PostgreSQL's counterparts (disk full, connection lost)
 * are answered 503 in cluster mode; these are too, so a client retries.
 */
const UNAVAILABLE_CODES = /^SQLITE_(FULL|BUSY|LOCKED|IOERR|READONLY|CANTOPEN)(_|$)/;

/** Whether `err` is SQLite saying the database cannot be used now (see UNAVAILABLE_CODES). */
export function isSqliteUnavailable(err: unknown): boolean {
  return err instanceof Database.SqliteError && UNAVAILABLE_CODES.test(err.code);
}

/**
 * SQLite's codes for a database file that is damaged (pages overwritten on disk, a file that is no
 * SQLite database): what needs the damaged pages fails until an operator repairs or restores the
 * file; the rest is read and written as ever. Answered 503, as a store that cannot be used now.
 */
const DAMAGED_CODES = /^SQLITE_(CORRUPT|NOTADB)(_|$)/;

/** Whether `err` is SQLite saying the database file is damaged (see DAMAGED_CODES). */
export function isSqliteDamaged(err: unknown): boolean {
  return err instanceof Database.SqliteError && DAMAGED_CODES.test(err.code);
}

/**
 * Whether `err` is a write refused because another connection holds the write lock (or has
 * committed since this one's snapshot): nothing was written, and the same write can be tried again.
 */
const isLockBusy = (err: unknown): boolean => err instanceof Database.SqliteError && /^SQLITE_BUSY(_|$)/.test(err.code);

/** What tells a file from another put at its path: its device and inode. */
function fileId(file: string): { dev: number; ino: number } {
  const { dev, ino } = statSync(file);
  return { dev, ino };
}

/** How long a write waits, in all, for another process to release the write lock before it fails. */
const LOCK_WAIT_MS = 5000;
/**
 * Entries a search reads between two passes of the event loop. A search reads the texts of all
 * the account's entries (up to a megabyte or so each); read at once, an account of many long
 * entries held up every account's requests for seconds.
 */
const SEARCH_CHUNK = 25;
/** Ids read at a time when looking for vectors to make again (`staleVectorIds`). */
const STALE_WINDOW = 5000;

/** The longest pause before a write that found the lock held is tried again. */
const MAX_RETRY_PAUSE_MS = 50;
/** The pause before trying a write again that found the lock held: 1, 2, 4... ms, then every 50 ms. */
const retryPause = (tries: number): number => Math.min(MAX_RETRY_PAUSE_MS, 2 ** tries);

/** Entries of a deleted account removed in one transaction (`purgeDeletedAccounts`). */
const DELETE_BATCH = 1000;
/**
 * The pause after each batch of a deleted account's rows, at least: twice the longest pause of a
 * write waiting for the lock in another process, so that one waiting comes in before the next
 * batch. At least as long as the batch took, too: the batches hold the lock half the time at most.
 */
const PURGE_PAUSE_MS = 2 * MAX_RETRY_PAUSE_MS;

const fixedDeadline = (at: number) => () => at;

/** Longest answer kept in the exact-hit read cache (10,000 entries × 4,096 characters at most). */
const CACHED_ANSWER_CHARS = 4096;

interface PendingPut {
  entry: NewEntry;
  limits: StorageLimits | null;
  resolve: (e: Entry) => void;
  reject: (err: unknown) => void;
  /** When it stops waiting for the write lock (ms since the epoch). */
  deadline: number;
}

export interface SqliteOptions {
  /** FULL syncs every commit to disk; NORMAL survives a process crash but not a power loss. */
  synchronous?: 'FULL' | 'NORMAL';
  /** How long a write waits for another process's write lock before it fails (LOCK_WAIT_MS). */
  lockWaitMs?: number;
  /** Entries of a deleted account removed in one transaction (DELETE_BATCH). */
  deleteBatch?: number;
}

/**
 * The embedded store: one SQLite file in WAL mode. Concurrent stores are grouped into one
 * transaction (group commit), and every promise resolves only after its commit.
 *
 * better-sqlite3 runs on the event loop, so the connection does not wait inside SQLite for a write
 * lock held by another process (the CLI, `sqlite3` with a transaction open, a backup tool): that
 * would stop every request, reads and `/healthz` included. A write that finds the lock held fails
 * at once, and `write` tries it again on a timer until LOCK_WAIT_MS have passed. Reads in WAL mode
 * take no lock that a writer holds, so they are answered meanwhile. Opening (recovery of a WAL
 * left by a crash, migrations) still waits inside SQLite: nothing is served yet.
 */
export class SqliteStore implements Store {
  readonly kind = 'sqlite' as const;
  private readonly db: Database.Database;
  private pending: PendingPut[] = [];
  private flushScheduled = false;
  /** The batch of stores being committed (or waiting for the lock); stores that come meanwhile join it. */
  private flushing: Promise<void> | null = null;
  private readonly lockWaitMs: number;
  private readonly stmts;
  /**
   * Read caches for the hot path (key lookups, exact hits). They are emptied by this store's own
   * writes and whenever another connection (the CLI, another process) commits, which SQLite
   * reports through PRAGMA data_version.
   */
  private readonly keyCache = new Lru<string, { key: ApiKey; account: Account }>(10_000);
  private readonly entryCache = new Lru<string, EntryHead>(10_000);
  private readonly entriesByIds = new Map<number, Database.Statement>();
  private seenVersion = -1;
  private lastVersionCheck = -Infinity;
  /** The data version `committedElsewhere` saw last. */
  private watchedVersion = -1;
  private readonly synchronous: 'FULL' | 'NORMAL';
  private readonly deleteBatch: number;
  /** The file whose lock a process holds while it removes deleted accounts' rows; null in memory. */
  private readonly purgeLockFile: string | null;
  /** The database file as opened (its device and inode); null in memory. */
  private readonly file: { path: string; dev: number; ino: number } | null;

  constructor(file: string, opts: SqliteOptions = {}) {
    if (file !== ':memory:') mkdirSync(path.dirname(file), { recursive: true });
    this.db = new Database(file);
    this.file = file === ':memory:' ? null : { path: file, ...fileId(file) };
    this.purgeLockFile = file === ':memory:' ? null : `${file}.purge-lock`;
    this.deleteBatch = opts.deleteBatch ?? DELETE_BATCH;
    this.lockWaitMs = opts.lockWaitMs ?? LOCK_WAIT_MS;
    // Opening may wait inside SQLite (see the class comment); once open, it never does.
    this.db.pragma(`busy_timeout = ${this.lockWaitMs}`);
    this.db.pragma('journal_mode = WAL');
    this.synchronous = opts.synchronous ?? 'FULL';
    this.db.pragma(`synchronous = ${this.synchronous}`);
    this.db.function('lower_any', { deterministic: true }, (text: unknown) => (typeof text === 'string' ? text.toLowerCase() : text));
    this.db.pragma('foreign_keys = ON');
    this.migrate();
    this.db.pragma('busy_timeout = 0');
    const db = this.db;
    this.stmts = {
      insertAccount: db.prepare('INSERT INTO accounts (id, name, plan, created_at) VALUES (?, ?, ?, ?)'),
      accountById: db.prepare<[string], AccountRow>('SELECT * FROM accounts WHERE id = ?'),
      accountByName: db.prepare<[string], AccountRow>('SELECT * FROM accounts WHERE name = ?'),
      accountExists: db.prepare<[string], number>('SELECT 1 FROM accounts WHERE id = ?').pluck(),
      insertKey: db.prepare('INSERT INTO api_keys (id, account_id, name, prefix, secret_hash, created_at) VALUES (?, ?, ?, ?, ?, ?)'),
      keyByHash: db.prepare<[string], KeyRow>('SELECT * FROM api_keys WHERE secret_hash = ?'),
      keyById: db.prepare<[string], KeyRow>('SELECT * FROM api_keys WHERE id = ?'),
      upsertEntry: db.prepare<unknown[], EntryRow>(
        `INSERT INTO entries (account_id, exact_hash, context_hash, prefix_hash, messages, query_text, prefix_text,
           answer, model, tokens, embedder_id, vector, prefix_vector, created_at, expires_at, namespace, public_id)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (account_id, exact_hash) DO UPDATE SET
           context_hash = excluded.context_hash, prefix_hash = excluded.prefix_hash, namespace = excluded.namespace,
           public_id = COALESCE(entries.public_id, excluded.public_id),
           messages = excluded.messages, query_text = excluded.query_text, prefix_text = excluded.prefix_text,
           answer = excluded.answer, model = excluded.model, tokens = excluded.tokens,
           embedder_id = excluded.embedder_id, vector = excluded.vector, prefix_vector = excluded.prefix_vector,
           ${RESTORED_ENTRY_SQL}, expires_at = excluded.expires_at
         RETURNING *`,
      ),
      entryByHash: db.prepare<[string, string], EntryRow>(
        'SELECT id, public_id, account_id, exact_hash, context_hash, prefix_hash, answer, model, tokens, embedder_id, created_at, expires_at, last_hit_at, usage_count, lookup_ms_total FROM entries WHERE account_id = ? AND exact_hash = ?',
      ),
      entryById: db.prepare<[string, number, string], EntryRow>(
        'SELECT * FROM entries WHERE account_id = ? AND public_id = ? AND (expires_at IS NULL OR expires_at > ?)',
      ),
      dataVersion: db.prepare('PRAGMA data_version').pluck(),
      storage: db.prepare<[string], StorageUse>('SELECT entries, bytes FROM account_storage WHERE account_id = ?'),
      entrySize: db.prepare<[string, string], { bytes: number }>(
        `SELECT ${sizeOf('')} AS bytes FROM entries WHERE account_id = ? AND exact_hash = ?`,
      ),
      hit: db.prepare(
        'UPDATE entries SET usage_count = usage_count + ?, last_hit_at = ?, lookup_ms_total = lookup_ms_total + ? WHERE id = ? AND created_at = ?',
      ),
      addUsage: db.prepare(
        `INSERT INTO usage (account_id, bucket, requests, exact_hits, semantic_hits, lookup_ms_total, tokens_saved, cost_saved, stores)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (account_id, bucket) DO UPDATE SET
           requests = requests + excluded.requests, exact_hits = exact_hits + excluded.exact_hits,
           semantic_hits = semantic_hits + excluded.semantic_hits, lookup_ms_total = lookup_ms_total + excluded.lookup_ms_total,
           tokens_saved = tokens_saved + excluded.tokens_saved, cost_saved = cost_saved + excluded.cost_saved,
           stores = stores + excluded.stores`,
      ),
    };
  }

  /**
   * Empties the read caches if another connection has committed since the last look. SQLite is
   * asked at most every 2 ms, so a change made by another process (a key revoked with the CLI)
   * is seen within 2 ms.
   */
  private checkExternalWrites(): void {
    const now = performance.now();
    if (now - this.lastVersionCheck < 2) return;
    this.lastVersionCheck = now;
    const v = this.stmts.dataVersion.get() as number;
    if (v !== this.seenVersion) {
      this.seenVersion = v;
      this.keyCache.clear();
      this.entryCache.clear();
    }
  }

  /**
   * Whether another connection (the CLI, another process) has committed since the last call; true
   * at the first. For work that follows such a change outside any request (`runtime.ts`).
   */
  committedElsewhere(): boolean {
    const v = this.stmts.dataVersion.get() as number;
    const changed = v !== this.watchedVersion;
    this.watchedVersion = v;
    return changed;
  }

  /** Whether the last write failed for want of the database (disk full, read-only, lock held). */
  private failing = false;

  /**
   * Whether writes fail for want of the database: the last one did (disk full, read-only, lock
   * held), or the file at the database's path is no longer the one open. Reads go on.
   */
  get writesFailing(): boolean {
    return this.failing || this.fileReplaced();
  }

  /**
   * Whether the database file was removed, or replaced by another, while open (a data directory
   * emptied beside the server). SQLite goes on writing to the file it has open, which no later
   * start reads: what it acknowledged would be lost.
   */
  private fileReplaced(): boolean {
    if (!this.file) return false;
    const now = statSync(this.file.path, { throwIfNoEntry: false });
    return !now || now.dev !== this.file.dev || now.ino !== this.file.ino;
  }

  /**
   * Runs `attempt`, one whole write (a transaction or a single statement, with whatever must
   * happen at once after its commit, such as emptying a read cache), and, while another process
   * holds the write lock, runs it again on a timer with a growing pause, never waiting on the event
   * loop. A busy attempt wrote nothing. Gives up with SQLite's SQLITE_BUSY (answered 503) once
   * `deadline()` (ms since the epoch; LOCK_WAIT_MS from now unless given) has passed.
   */
  private async write<T>(attempt: () => T, deadline: () => number = fixedDeadline(Date.now() + this.lockWaitMs)): Promise<T> {
    if (this.fileReplaced()) {
      this.failing = true;
      throw new Database.SqliteError(
        `the database file ${this.file?.path} was removed or replaced while open; restart the server to open it again`,
        'SQLITE_READONLY_DBMOVED',
      );
    }
    for (let tries = 0; ; tries++) {
      try {
        const done = attempt();
        this.failing = false;
        return done;
      } catch (err) {
        const left = deadline() - Date.now();
        if (!isLockBusy(err) || left <= 0) {
          if (isSqliteUnavailable(err)) this.failing = true;
          throw err;
        }
        await sleep(Math.min(retryPause(tries), left));
      }
    }
  }

  private migrate(): void {
    this.db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)');
    const apply = this.db.transaction(() => {
      const row = this.db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as { v: number | null };
      const current = row.v ?? 0;
      for (let v = current + 1; v <= MIGRATIONS.length; v++) {
        this.db.exec(MIGRATIONS[v - 1] as string);
        this.db.prepare('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)').run(v, new Date().toISOString());
      }
    });
    apply.immediate();
  }

  async createAccount(name: string, plan: string): Promise<Account> {
    const id = newId('acc');
    await this.write(() => this.stmts.insertAccount.run(id, name, plan, new Date().toISOString()));
    return toAccount(this.stmts.accountById.get(id) as AccountRow);
  }

  async getAccount(id: string): Promise<Account | null> {
    const r = this.stmts.accountById.get(id);
    return r ? toAccount(r) : null;
  }

  async getAccountByName(name: string): Promise<Account | null> {
    const r = this.stmts.accountByName.get(name);
    return r ? toAccount(r) : null;
  }

  async listAccounts(): Promise<Account[]> {
    return (this.db.prepare('SELECT * FROM accounts ORDER BY created_at').all() as AccountRow[]).map(toAccount);
  }

  async updateAccount(id: string, patch: Partial<Pick<Account, 'plan' | 'defaultThreshold' | 'entryTtlSeconds'>>): Promise<Account | null> {
    const sets: string[] = [];
    const args: unknown[] = [];
    if (patch.plan !== undefined) (sets.push('plan = ?'), args.push(patch.plan));
    if (patch.defaultThreshold !== undefined) (sets.push('default_threshold = ?'), args.push(patch.defaultThreshold));
    if (patch.entryTtlSeconds !== undefined) (sets.push('entry_ttl_seconds = ?'), args.push(patch.entryTtlSeconds));
    if (sets.length > 0) {
      const stmt = this.db.prepare(`UPDATE accounts SET ${sets.join(', ')} WHERE id = ?`);
      await this.write(() => {
        stmt.run(...args, id);
        this.keyCache.clear();
      });
    }
    return this.getAccount(id);
  }

  async setPassword(accountId: string, passwordHash: string | null): Promise<void> {
    const set = this.db.transaction(() => {
      this.db.prepare('UPDATE accounts SET password_hash = ? WHERE id = ?').run(passwordHash, accountId);
      this.db.prepare('DELETE FROM sessions WHERE account_id = ?').run(accountId);
    });
    await this.write(() => {
      set.immediate();
      this.keyCache.clear();
    });
  }

  /**
   * Deletes the account for everyone at once, in one short transaction: the account, its keys,
   * dashboard sessions and storage counts go, and the account is listed in `account_purges`. Its
   * entries and usage stay in the file until `purgeDeletedAccounts` removes them, a batch at a
   * time: left without an account and keys, they are neither served nor counted (nor read into a
   * vector index: `scanVectors`). Removed in this transaction too, they held the write lock for
   * about 2 s per 50,000 entries: from about 250,000, past the 5 s a server's stores wait for it.
   */
  async deleteAccount(id: string): Promise<AccountDeletion | null> {
    const mark = this.db.transaction((): AccountDeletion | null => {
      const row = this.stmts.accountById.get(id);
      if (!row) return null;
      const run = (sql: string) => this.db.prepare(sql).run(id).changes;
      const count = (sql: string) => this.db.prepare(sql).pluck().get(id) as number;
      const deleted = {
        account: toAccount(row),
        sessions: run('DELETE FROM sessions WHERE account_id = ?'),
        keys: run('DELETE FROM api_keys WHERE account_id = ?'),
        entries: this.entryCount(id),
        usageBuckets: count('SELECT count(*) FROM usage WHERE account_id = ?'),
      };
      run('DELETE FROM account_storage WHERE account_id = ?');
      this.db.prepare('INSERT INTO account_purges (account_id, deleted_at) VALUES (?, ?)').run(id, new Date().toISOString());
      run('DELETE FROM accounts WHERE id = ?');
      return deleted;
    });
    return this.write(() =>
      this.secureDelete(() => {
        // The entries' rows still name the account (foreign key): they go after it, in batches.
        this.db.pragma('foreign_keys = OFF');
        try {
          const done = mark.immediate();
          this.keyCache.clear();
          this.entryCache.clear();
          return done;
        } finally {
          this.db.pragma('foreign_keys = ON');
        }
      }),
    );
  }

  /**
   * Runs `fn` with the space it frees overwritten with zeros, so that a deleted account's texts do
   * not linger in the file's free pages (SQLite only unlinks deleted rows otherwise).
   */
  private secureDelete<T>(fn: () => T): T {
    const secure = this.db.pragma('secure_delete', { simple: true }) as number;
    this.db.pragma('secure_delete = ON');
    try {
      return fn();
    } finally {
      this.db.pragma(`secure_delete = ${secure}`);
    }
  }

  purgeLeft(accountId: string): number | null {
    if (this.db.prepare('SELECT 1 FROM account_purges WHERE account_id = ?').get(accountId) === undefined) return null;
    return this.entryCount(accountId);
  }

  /** The entries an account has in the file, a deleted account's not yet removed included. */
  private entryCount(accountId: string): number {
    return this.db.prepare('SELECT count(*) FROM entries WHERE account_id = ?').pluck().get(accountId) as number;
  }

  /**
   * Removes the entries and usage of deleted accounts (`deleteAccount`), `deleteBatch` rows a
   * transaction, and the account's line in `account_purges` with the last. Between two batches the
   * write lock is left free for PURGE_PAUSE_MS at least (as long as the batch took, if longer), so
   * that a server's stores, waiting for it on a timer, come in. One process at a time (the lock of
   * a file beside the database, which goes with the process however it ends); null at once when
   * another holds it. The freed space is overwritten with zeros, and the WAL emptied at the end
   * when no reader holds it.
   */
  async purgeDeletedAccounts(opts: { onBatch?: (p: PurgeProgress) => void; signal?: AbortSignal } = {}): Promise<PurgeResult | null> {
    const lock = this.purgeLockFile === null ? { release: () => undefined } : lockFile(this.purgeLockFile);
    if (!lock) return null;
    const result: PurgeResult = { accounts: 0, entries: 0, usageBuckets: 0 };
    const next = this.db.prepare('SELECT account_id FROM account_purges ORDER BY deleted_at, account_id LIMIT 1').pluck();
    const deleteEntries = this.db.prepare(
      'DELETE FROM entries WHERE id IN (SELECT id FROM entries WHERE account_id = ? ORDER BY id LIMIT ?)',
    );
    const deleteUsage = this.db.prepare('DELETE FROM usage WHERE rowid IN (SELECT rowid FROM usage WHERE account_id = ? LIMIT ?)');
    const batch = this.db.transaction((accountId: string) => {
      const entries = deleteEntries.run(accountId, this.deleteBatch).changes;
      let room = this.deleteBatch - entries;
      const usage = room > 0 ? deleteUsage.run(accountId, room).changes : 0;
      room -= usage;
      // Nothing of it is left: no row is added for an account that is gone (see commitPuts, addUsage).
      if (room > 0) this.db.prepare('DELETE FROM account_purges WHERE account_id = ?').run(accountId);
      return { entries, usage, done: room > 0 };
    });
    try {
      for (let accountId = next.get() as string | undefined; accountId !== undefined; accountId = next.get() as string | undefined) {
        let left = this.entryCount(accountId);
        let removed = 0;
        for (;;) {
          if (opts.signal?.aborted) return result;
          const started = performance.now();
          const done = await this.write(() => this.secureDelete(() => batch.immediate(accountId)));
          const took = performance.now() - started;
          removed += done.entries;
          left = Math.max(0, left - done.entries);
          result.entries += done.entries;
          result.usageBuckets += done.usage;
          opts.onBatch?.({ accountId, entriesRemoved: removed, entriesLeft: left });
          if (done.done) break;
          await sleep(Math.max(PURGE_PAUSE_MS, took), undefined, { signal: opts.signal }).catch(() => undefined);
        }
        result.accounts++;
      }
    } finally {
      lock.release();
      // The WAL still holds the pages as they were before: copied into the file and emptied now if
      // no reader holds it (a running server's reads are short); otherwise by SQLite's next checkpoint.
      if (result.entries + result.usageBuckets > 0) {
        try {
          this.db.pragma('wal_checkpoint(TRUNCATE)');
        } catch {
          // Busy: SQLite checkpoints it later.
        }
      }
    }
    return result;
  }

  async getPasswordHash(accountId: string): Promise<string | null> {
    const r = this.db.prepare('SELECT password_hash FROM accounts WHERE id = ?').get(accountId) as
      { password_hash: string | null } | undefined;
    return r?.password_hash ?? null;
  }

  async createKey(key: { accountId: string; name: string | null; prefix: string; secretHash: string }): Promise<ApiKey> {
    const id = newId('key');
    await this.write(() => this.stmts.insertKey.run(id, key.accountId, key.name, key.prefix, key.secretHash, new Date().toISOString()));
    return toKey(this.stmts.keyById.get(id) as KeyRow);
  }

  async findKeyByHash(secretHash: string): Promise<{ key: ApiKey; account: Account } | null> {
    return this.findKeyByHashSync(secretHash);
  }

  findKeyByHashSync(secretHash: string): { key: ApiKey; account: Account } | null {
    this.checkExternalWrites();
    const cached = this.keyCache.get(secretHash);
    if (cached) return cached;
    const k = this.stmts.keyByHash.get(secretHash);
    if (!k) return null;
    const a = this.stmts.accountById.get(k.account_id);
    if (!a) return null;
    const found = { key: toKey(k), account: toAccount(a) };
    this.keyCache.set(secretHash, found);
    return found;
  }

  async getKey(id: string): Promise<ApiKey | null> {
    const r = this.stmts.keyById.get(id);
    return r ? toKey(r) : null;
  }

  async listKeys(accountId: string): Promise<ApiKey[]> {
    return (this.db.prepare('SELECT * FROM api_keys WHERE account_id = ? ORDER BY created_at, id').all(accountId) as KeyRow[]).map(toKey);
  }

  async revokeKey(id: string, accountId?: string): Promise<ApiKey | null> {
    const now = new Date().toISOString();
    await this.write(() => {
      if (accountId === undefined) {
        this.db.prepare('UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?').run(now, id);
      } else {
        this.db.prepare('UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? AND account_id = ?').run(now, id, accountId);
      }
      // At once after the commit: a request must not be let in by the key cached before it.
      this.keyCache.clear();
    });
    const r = this.stmts.keyById.get(id);
    if (!r || (accountId !== undefined && r.account_id !== accountId)) return null;
    return toKey(r);
  }

  async touchKeys(lastUsed: ReadonlyMap<string, string>): Promise<void> {
    const stmt = this.db.prepare('UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)');
    await this.counterTransaction(() => {
      for (const [id, at] of lastUsed) stmt.run(at, id, at);
    });
  }

  /**
   * Commits a batch of counters (usage, hit counts, key last-use times) without waiting for the
   * disk (`synchronous = NORMAL` for this commit): like every WAL commit it survives the process
   * being killed, and only a power loss or OS crash could lose it, as the counters of the second
   * before it were only in memory anyway. The event loop is not held for an fsync three times a
   * second; entries and keys are still synced on every commit. The next synced commit syncs it too.
   * Each attempt (see `write`) sets and restores the setting around its own commit, so no store's
   * commit in between runs without the sync.
   */
  private counterTransaction(writeRows: () => void, after?: () => void): Promise<void> {
    const tx = this.db.transaction(writeRows);
    const relax = this.synchronous !== 'NORMAL';
    return this.write(() => {
      if (relax) this.db.pragma('synchronous = NORMAL');
      try {
        tx.immediate();
      } finally {
        if (relax) this.db.pragma(`synchronous = ${this.synchronous}`);
      }
      after?.();
    });
  }

  putEntry(entry: NewEntry, limits: StorageLimits | null = null): Promise<Entry> {
    return new Promise((resolve, reject) => {
      this.pending.push({ entry, limits, resolve, reject, deadline: Date.now() + this.lockWaitMs });
      this.scheduleFlush();
    });
  }

  private scheduleFlush(): void {
    // A batch waiting for the lock takes the stores that come meanwhile at its next attempt.
    if (this.flushScheduled || this.flushing) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      if (!this.flushing) void this.startFlush();
    });
  }

  private startFlush(): Promise<void> {
    const flushing = this.flushPuts().finally(() => {
      this.flushing = null;
      if (this.pending.length > 0) this.scheduleFlush();
    });
    this.flushing = flushing;
    return flushing;
  }

  /**
   * Commits the pending stores in one transaction. While another process holds the write lock it
   * is tried again (see `write`): the stores that came since join it, and a store that has waited
   * LOCK_WAIT_MS is refused with the lock's error. Each resolves only after the commit.
   */
  private async flushPuts(): Promise<void> {
    // Taken now, not at the first attempt: a write refused before any attempt refuses them too.
    let batch: PendingPut[] = this.pending;
    this.pending = [];
    let busy: unknown = null;
    // Whether stores were refused for the lock, and none committed since.
    let refused = false;
    const attempt = (): void => {
      if (busy !== null) {
        const now = Date.now();
        for (const p of batch) if (p.deadline <= now) p.reject(busy);
        refused ||= batch.some((p) => p.deadline <= now);
        batch = batch.filter((p) => p.deadline > now);
      }
      batch = batch.concat(this.pending);
      this.pending = [];
      if (batch.length === 0) return;
      let results: (Entry | AccountGoneError | StorageQuotaError)[];
      try {
        results = this.commitPuts(batch);
      } catch (err) {
        busy = err;
        throw err;
      }
      refused = false;
      const done = batch;
      batch = [];
      done.forEach((p, i) => {
        const r = results[i] as Entry | AccountGoneError | StorageQuotaError;
        if (r instanceof AccountGoneError || r instanceof StorageQuotaError) p.reject(r);
        else p.resolve(r);
      });
    };
    const deadline = () => Math.max(...batch.map((p) => p.deadline), ...this.pending.map((p) => p.deadline));
    try {
      await this.write(attempt, deadline);
      if (refused) this.failing = true;
    } catch (err) {
      for (const p of batch) p.reject(err);
    }
  }

  /**
   * Writes a batch of stores in one transaction. A store refused alone (its error in place of its
   * entry) leaves the others of the batch to be written: one for an account deleted meanwhile (by
   * the CLI, after its request was let in), or one that would take its account past a limit. The
   * limits are checked inside the transaction, which this connection alone writes: exact, also for
   * several stores of one account in the batch.
   */
  private commitPuts(puts: readonly { entry: NewEntry; limits: StorageLimits | null }[]): (Entry | AccountGoneError | StorageQuotaError)[] {
    const results: (Entry | AccountGoneError | StorageQuotaError)[] = [];
    const entries = puts.map((p) => p.entry);
    this.db
      .transaction(() => {
        const live = new Map<string, boolean>();
        for (const { entry: e, limits } of puts) {
          let known = live.get(e.accountId);
          if (known === undefined) live.set(e.accountId, (known = this.stmts.accountExists.get(e.accountId) !== undefined));
          if (!known) {
            results.push(new AccountGoneError(e.accountId));
            continue;
          }
          const messages = JSON.stringify(e.messages);
          if (limited(limits)) {
            const use = this.stmts.storage.get(e.accountId) ?? { entries: 0, bytes: 0 };
            const before = this.stmts.entrySize.get(e.accountId, e.exactHash);
            const added = { entries: before ? 0 : 1, bytes: storedBytes(messages, e.answer) - (before?.bytes ?? 0) };
            const refusal = storageRefusal(limits, { entries: use.entries + added.entries, bytes: use.bytes + added.bytes }, added);
            if (refusal) {
              results.push(refusal);
              continue;
            }
          }
          const row = this.stmts.upsertEntry.get(...entryValues(e, messages)) as EntryRow;
          results.push(toEntry(row));
        }
      })
      .immediate();
    // At once after the commit: heads read while the batch waited for the lock are the old ones.
    for (const e of entries) this.entryCache.delete(`${e.accountId}\u0000${e.exactHash}`);
    return results;
  }

  async getStorage(accountId: string): Promise<StorageUse> {
    const r = this.stmts.storage.get(accountId);
    return { entries: r?.entries ?? 0, bytes: r?.bytes ?? 0 };
  }

  async getEntryByHash(accountId: string, exactHash: string): Promise<EntryHead | null> {
    return this.getEntryByHashSync(accountId, exactHash);
  }

  getEntryByHashSync(accountId: string, exactHash: string): EntryHead | null {
    this.checkExternalWrites();
    const ck = `${accountId}\u0000${exactHash}`;
    const cached = this.entryCache.get(ck);
    if (cached) return cached;
    const r = this.stmts.entryByHash.get(accountId, exactHash);
    if (!r) return null;
    const head = toHead(r);
    // Bounded in bytes too: long answers are read from SQLite each time.
    if (head.answer.length <= CACHED_ANSWER_CHARS) this.entryCache.set(ck, head);
    return head;
  }

  async getEntry(accountId: string, publicId: number): Promise<Entry | null> {
    const r = this.stmts.entryById.get(accountId, publicId, new Date().toISOString());
    return r ? toEntry(r) : null;
  }

  async getEntries(ids: readonly number[]): Promise<Entry[]> {
    if (ids.length === 0) return [];
    let stmt = this.entriesByIds.get(ids.length);
    if (!stmt) {
      stmt = this.db.prepare(`SELECT * FROM entries WHERE id IN (${ids.map(() => '?').join(',')})`);
      // Searches ask for a handful of candidates: one prepared statement per small count.
      if (ids.length <= 32) this.entriesByIds.set(ids.length, stmt);
    }
    return (stmt.all(...ids) as EntryRow[]).map(toEntry);
  }

  async listEntries(accountId: string, opts: EntryListOptions): Promise<EntryPage> {
    const { rows, total } = await this.listRows<EntryRow>(accountId, opts, '*');
    return { entries: rows.map(toEntry), total };
  }

  async listEntryPreviews(accountId: string, opts: EntryListOptions, chars: number): Promise<EntryPreviewPage> {
    // `substr` counts characters: `chars` of them are `chars` UTF-16 code units at least, cut to
    // that in JavaScript.
    const n = Math.max(0, Math.floor(chars));
    const columns = `${PREVIEW_COLUMNS}, vector IS NOT NULL AS has_vector,
      substr(query_text, 1, ${n}) AS query_preview, ${utf16Length('query_text')} AS query_length,
      substr(answer, 1, ${n}) AS answer_preview, ${utf16Length('answer')} AS answer_length`;
    const { rows, total } = await this.listRows<PreviewRow>(accountId, opts, columns);
    return { entries: rows.map((r) => toPreview(r, n)), total };
  }

  /** A page of an account's live entries, of the columns named (see `listEntries`). */
  private async listRows<R>(accountId: string, opts: EntryListOptions, columns: string): Promise<{ rows: R[]; total: number }> {
    // Expired entries are gone for the account already, before the sweep deletes them.
    const where = ['account_id = ?', '(expires_at IS NULL OR expires_at > ?)'];
    const args: unknown[] = [accountId, new Date().toISOString()];
    // An empty namespace is none, as on check and store.
    if (opts.namespace === '') where.push('namespace IS NULL');
    else if (opts.namespace !== undefined) {
      where.push('namespace = ?');
      args.push(opts.namespace);
    }
    const order = ORDER_SQL[opts.order ?? 'recent'];
    // Other columns than the row's own are computed for the page's rows alone, once they are
    // chosen, not for every row sorted.
    const select = (whereSql: string) =>
      columns === '*'
        ? `SELECT * FROM entries WHERE ${whereSql} ORDER BY ${order} LIMIT ? OFFSET ?`
        : `SELECT ${columns} FROM (SELECT id FROM entries WHERE ${whereSql} ORDER BY ${order} LIMIT ? OFFSET ?) AS page
             JOIN entries USING (id) ORDER BY ${order}`;
    if (opts.q) {
      // SQLite's LIKE ignores the case of ASCII letters only: a search with other letters compares
      // both sides lower-cased by JavaScript ("CAFÉ" finds "café"), at a function call per row.
      const ascii = /^[\x00-\x7f]*$/.test(opts.q);
      const col = (c: string) => (ascii ? c : `lower_any(${c})`);
      const matches = `(${col('query_text')} LIKE ? ESCAPE '\\' OR ${col('answer')} LIKE ? ESCAPE '\\' OR ${col('model')} LIKE ? ESCAPE '\\')`;
      const like = `%${(ascii ? opts.q : opts.q.toLowerCase()).replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
      // The matching ids, SEARCH_CHUNK entries at a time (newest first), then the page among them.
      const chunk = this.db.prepare<unknown[], { id: number; hit: number }>(
        `SELECT id, ${matches} AS hit FROM entries WHERE ${where.join(' AND ')} AND id < ? ORDER BY id DESC LIMIT ${SEARCH_CHUNK}`,
      );
      const ids: number[] = [];
      for (let before = Number.MAX_SAFE_INTEGER; ;) {
        const rows = chunk.all(like, like, like, ...args, before);
        for (const r of rows) if (r.hit) ids.push(r.id);
        if (rows.length < SEARCH_CHUNK) break;
        before = (rows[rows.length - 1] as { id: number }).id;
        await nextPass();
      }
      const rows = this.db
        .prepare(select('account_id = ? AND id IN (SELECT value FROM json_each(?))'))
        .all(accountId, JSON.stringify(ids), opts.perPage, (opts.page - 1) * opts.perPage) as R[];
      return { rows, total: ids.length };
    }
    const sqlWhere = where.join(' AND ');
    const total = (this.db.prepare(`SELECT COUNT(*) AS n FROM entries WHERE ${sqlWhere}`).get(...args) as { n: number }).n;
    const rows = this.db.prepare(select(sqlWhere)).all(...args, opts.perPage, (opts.page - 1) * opts.perPage) as R[];
    return { rows, total };
  }

  async deleteEntry(accountId: string, publicId: number): Promise<DeletedEntry | null> {
    const stmt = this.db.prepare(
      'DELETE FROM entries WHERE account_id = ? AND public_id = ? AND (expires_at IS NULL OR expires_at > ?) RETURNING id, context_hash',
    );
    const r = await this.write(() => {
      const row = stmt.get(accountId, publicId, new Date().toISOString()) as { id: number; context_hash: string } | undefined;
      this.entryCache.clear();
      return row;
    });
    return r ? { id: r.id, accountId, contextHash: r.context_hash } : null;
  }

  async recordHits(hits: ReadonlyMap<number, HitDelta>): Promise<void> {
    await this.counterTransaction(
      () => {
        for (const [id, h] of hits) this.stmts.hit.run(h.count, h.at, h.lookupMs, id, h.createdAt);
      },
      () => this.entryCache.clear(),
    );
  }

  async deleteExpired(now: string, limit: number, accountId?: string): Promise<DeletedEntry[]> {
    const ofAccount = accountId === undefined ? '' : 'AND account_id = ?';
    const stmt = this.db.prepare(
      `DELETE FROM entries WHERE id IN (SELECT id FROM entries WHERE expires_at IS NOT NULL AND expires_at <= ? ${ofAccount} LIMIT ?)
       RETURNING id, account_id, context_hash`,
    );
    const args = accountId === undefined ? [now, limit] : [now, accountId, limit];
    const rows = await this.write(() => {
      const deleted = stmt.all(...args) as { id: number; account_id: string; context_hash: string }[];
      this.entryCache.clear();
      return deleted;
    });
    return rows.map((r) => ({ id: r.id, accountId: r.account_id, contextHash: r.context_hash }));
  }

  async scanVectors(afterId: number, limit: number): Promise<VectorRow[]> {
    const rows = this.db
      .prepare(
        `SELECT id, account_id, context_hash, embedder_id, vector, expires_at FROM entries WHERE id > ? AND vector IS NOT NULL
           AND account_id NOT IN (SELECT account_id FROM account_purges) ORDER BY id LIMIT ?`,
      )
      .all(afterId, limit) as Pick<EntryRow, 'id' | 'account_id' | 'context_hash' | 'embedder_id' | 'vector' | 'expires_at'>[];
    return rows.map((r) => ({
      id: r.id,
      accountId: r.account_id,
      contextHash: r.context_hash,
      embedderId: r.embedder_id ?? '',
      vector: bufferToVector(r.vector as Buffer),
      expiresAt: r.expires_at,
    }));
  }

  vectorSeq(): number {
    return this.db.prepare('SELECT n FROM vector_seq').pluck().get() as number;
  }

  async changedVectors(afterSeq: number, limit: number): Promise<ChangedVector[]> {
    const rows = this.db
      .prepare(
        `SELECT id, account_id, context_hash, embedder_id, vector, expires_at, vector_seq FROM entries
         WHERE vector_seq > ? ORDER BY vector_seq LIMIT ?`,
      )
      .all(afterSeq, limit) as (Pick<EntryRow, 'id' | 'account_id' | 'context_hash' | 'embedder_id' | 'vector' | 'expires_at'> & {
      vector_seq: number;
    })[];
    return rows.map((r) => ({
      seq: r.vector_seq,
      id: r.id,
      accountId: r.account_id,
      contextHash: r.context_hash,
      embedderId: r.embedder_id ?? '',
      vector: r.vector ? bufferToVector(r.vector) : null,
      expiresAt: r.expires_at,
    }));
  }

  async removedVectors(afterSeq: number, limit: number): Promise<RemovedVector[]> {
    const rows = this.db
      .prepare('SELECT seq, id, account_id, context_hash FROM removed_vectors WHERE seq > ? ORDER BY seq LIMIT ?')
      .all(afterSeq, limit) as { seq: number; id: number; account_id: string; context_hash: string }[];
    return rows.map((r) => ({ seq: r.seq, id: r.id, accountId: r.account_id, contextHash: r.context_hash }));
  }

  removedVectorCount(): number {
    return this.db.prepare('SELECT count(*) FROM removed_vectors').pluck().get() as number;
  }

  async forgetRemovedVectors(upToSeq: number): Promise<void> {
    const stmt = this.db.prepare('DELETE FROM removed_vectors WHERE seq <= ?');
    await this.write(() => stmt.run(upToSeq));
  }

  async staleVectorIds(current: string, embedderId: string, prefix: string, afterId: number, limit: number): Promise<number[]> {
    // Read a window of ids at a time, letting requests through between windows: a table with
    // nothing to make again is read whole, which in one query held the event loop for about a
    // second per million entries.
    const stmt = this.db.prepare(
      `SELECT id FROM entries WHERE id > ? AND id <= ? AND (vector IS NOT NULL OR embedder_id = ? || 'pending') AND embedder_id <> ?
         AND (embedder_id = ? OR substr(embedder_id, 1, ?) = ?) AND account_id NOT IN (SELECT account_id FROM account_purges)
         ORDER BY id LIMIT ?`,
    );
    const last = (this.db.prepare('SELECT max(id) FROM entries').pluck().get() as number | null) ?? 0;
    for (let from = afterId; from < last; from += STALE_WINDOW) {
      const rows = stmt.all(from, from + STALE_WINDOW, prefix, current, embedderId, prefix.length, prefix, limit) as { id: number }[];
      if (rows.length > 0) return rows.map((r) => r.id);
      await nextPass();
    }
    return [];
  }

  async replaceVectors(updates: readonly VectorUpdate[]): Promise<number[]> {
    if (updates.length === 0) return [];
    const stmt = this.db.prepare('UPDATE entries SET embedder_id = ?, vector = ?, prefix_vector = ? WHERE id = ? AND embedder_id = ?');
    const replace = this.db.transaction(() => {
      const written: number[] = [];
      for (const u of updates) {
        const prefix = u.prefixVector ? vectorToBuffer(u.prefixVector) : null;
        if (stmt.run(u.embedderId, vectorToBuffer(u.vector), prefix, u.id, u.from).changes > 0) written.push(u.id);
      }
      return written;
    });
    return this.write(() => {
      const written = replace.immediate();
      // Cached heads carry the vector id.
      if (written.length > 0) this.entryCache.clear();
      return written;
    });
  }

  async addUsage(rows: readonly UsageRow[]): Promise<void> {
    await this.counterTransaction(() => {
      for (const u of rows) {
        // Counted before its account was deleted (by the CLI, while the counts were in memory):
        // written, they would bring back usage of an account that is gone.
        if (this.stmts.accountExists.get(u.accountId) === undefined) continue;
        this.stmts.addUsage.run(
          u.accountId,
          u.bucket,
          u.requests,
          u.exactHits,
          u.semanticHits,
          u.lookupMsTotal,
          u.tokensSaved,
          u.costSaved,
          u.stores,
        );
      }
    });
  }

  async getUsage(accountId: string, query: UsageQuery): Promise<UsageBucket[]> {
    const rows = this.db
      .prepare('SELECT * FROM usage WHERE account_id = ? AND bucket >= ? AND bucket < ? ORDER BY bucket')
      .all(accountId, query.from ?? '', query.to ?? '9999') as UsageDbRow[];
    return rows.map(toUsage);
  }

  async createSession(x: Session): Promise<void> {
    const create = this.db.transaction(() => {
      this.db.prepare('DELETE FROM sessions WHERE expires_at <= ?').run(new Date().toISOString());
      this.db
        .prepare('INSERT INTO sessions (token_hash, account_id, csrf_token, created_at, expires_at) VALUES (?, ?, ?, ?, ?)')
        .run(x.tokenHash, x.accountId, x.csrfToken, x.createdAt, x.expiresAt);
    });
    await this.write(() => create.immediate());
  }

  async getSession(tokenHash: string, now: string): Promise<Session | null> {
    const r = this.db.prepare('SELECT * FROM sessions WHERE token_hash = ? AND expires_at > ?').get(tokenHash, now) as
      { token_hash: string; account_id: string; csrf_token: string; created_at: string; expires_at: string } | undefined;
    return r
      ? { tokenHash: r.token_hash, accountId: r.account_id, csrfToken: r.csrf_token, createdAt: r.created_at, expiresAt: r.expires_at }
      : null;
  }

  async deleteSession(tokenHash: string): Promise<void> {
    const stmt = this.db.prepare('DELETE FROM sessions WHERE token_hash = ?');
    await this.write(() => stmt.run(tokenHash));
  }

  /**
   * The token of the vector index snapshot saved from this database's contents, or null: a
   * snapshot is loaded only beside the database it was made from (see runtime.ts).
   */
  snapshotToken(): string | null {
    const r = this.db.prepare("SELECT value FROM meta WHERE key = 'snapshot_token'").get() as { value: string } | undefined;
    return r?.value ?? null;
  }

  /**
   * Ties the snapshot just saved, which holds every vector up to `seq` (vectorSeq), to this
   * database, and forgets the removals it already reflects.
   */
  async setSnapshotToken(token: string, seq: number): Promise<void> {
    const set = this.db.prepare(
      "INSERT INTO meta (key, value) VALUES ('snapshot_token', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    );
    const forget = this.db.prepare('DELETE FROM removed_vectors WHERE seq <= ?');
    const both = this.db.transaction(() => {
      set.run(token);
      forget.run(seq);
    });
    await this.write(() => both.immediate());
  }

  async close(): Promise<void> {
    // Stores taken before the close are committed (or refused) first.
    while (this.flushing || this.pending.length > 0) await (this.flushing ?? this.startFlush());
    this.db.close();
  }
}
