import type { Message } from '../cache/canonical.ts';
import type { StorageLimits, StorageUse } from './quota.ts';

export interface Account {
  id: string;
  name: string;
  plan: string;
  createdAt: string;
  /** Default `similarity_threshold` for checks that do not send one; null = 0.85. */
  defaultThreshold: number | null;
  /** Lifetime of new entries in seconds; null = the server default. */
  entryTtlSeconds: number | null;
}

export interface ApiKey {
  id: string;
  accountId: string;
  name: string | null;
  /** The first characters of the secret, safe to show. */
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

/** What a store call writes. `vector` and `prefixVector` are unit vectors of `embedderId`. */
export interface NewEntry {
  accountId: string;
  /** The exact lookup key (`entryKey`): the prompt hash, with the namespace when there is one. */
  exactHash: string;
  /** Partition of semantic matching: account scope, system messages and turn count. */
  contextHash: string;
  /**
   * The namespace it was stored in; null when none (and for entries stored before namespaces
   * were recorded).
   */
  namespace: string | null;
  /** Hash of the earlier (non-system) messages; equal prefixes need no similarity test. */
  prefixHash: string;
  messages: Message[];
  /** The text whose vector is `vector` (the final message). */
  queryText: string;
  /** Earlier user turns joined, the text of `prefixVector`; empty for a single turn. */
  prefixText: string;
  answer: string;
  model: string;
  tokens: number;
  embedderId: string | null;
  vector: Float32Array | null;
  prefixVector: Float32Array | null;
  createdAt: string;
  expiresAt: string | null;
}

export interface Entry extends NewEntry {
  /** The row id: internal (the index, counters and the change log use it). */
  id: number;
  /** The id the API shows (`entry_id`): random, unique in the account, kept when stored again. */
  publicId: number;
  usageCount: number;
  /** Sum of the lookup times of this entry's hits, in ms (its mean is how slow it is to serve). */
  lookupMsTotal: number;
  lastHitAt: string | null;
}

/** An entry without its conversation and vectors: what serving an exact hit needs. */
export type EntryHead = Omit<Entry, 'messages' | 'vector' | 'prefixVector' | 'queryText' | 'prefixText' | 'namespace'>;

/** An entry's vectors made again, by another embedder or from another form of its texts. */
export interface VectorUpdate {
  id: number;
  /** The vector id the entry was read with. */
  from: string;
  embedderId: string;
  vector: Float32Array;
  prefixVector: Float32Array | null;
}

/** The fields the vector index needs, streamed at start-up and on change. */
export interface VectorRow {
  id: number;
  accountId: string;
  contextHash: string;
  embedderId: string;
  vector: Float32Array;
  expiresAt: string | null;
}

/** A row read to bring a snapshot up to date: the entry as it is now, vector or none. */
export interface ChangedVector extends Omit<VectorRow, 'vector'> {
  /** The number of its last vector write (see Store.vectorSeq). */
  seq: number;
  vector: Float32Array | null;
}

/** A vector taken from where it was searched: its entry deleted, expired, or moved to another partition. */
export interface RemovedVector {
  seq: number;
  id: number;
  accountId: string;
  contextHash: string;
}

export interface DeletedEntry {
  id: number;
  accountId: string;
  contextHash: string;
}

/** `recent` first, most `hits` first, or `slowest` (highest mean lookup time of its hits) first. */
export type EntryOrder = 'recent' | 'hits' | 'slowest';

/** A page of an account's entries: `q` searches question, answer and model; `namespace` keeps one namespace's (`''`: those stored in none). */
export interface EntryListOptions {
  page: number;
  perPage: number;
  q?: string;
  namespace?: string;
  order?: EntryOrder;
}

export interface EntryPage {
  entries: Entry[];
  total: number;
}

/**
 * An entry as a list shows it: the start of its question and answer and their lengths, read so
 * in the database, without its conversation, texts or vectors.
 */
export interface EntryPreview extends Omit<Entry, 'messages' | 'vector' | 'prefixVector' | 'queryText' | 'prefixText' | 'answer'> {
  /** The question's first `chars` UTF-16 code units, without half a character at the end. */
  queryPreview: string;
  /** The question's length in UTF-16 code units (JavaScript's `length`). */
  queryLength: number;
  answerPreview: string;
  answerLength: number;
  /** Whether it has a vector (it is found by semantic checks too). */
  hasVector: boolean;
}

export interface EntryPreviewPage {
  entries: EntryPreview[];
  total: number;
}

export interface UsageDelta {
  requests: number;
  exactHits: number;
  semanticHits: number;
  lookupMsTotal: number;
  tokensSaved: number;
  /** Dollars saved, summed at hit time with the entry's model price. */
  costSaved: number;
  stores: number;
}

export interface UsageBucket extends UsageDelta {
  /** Start of the hour, ISO 8601 UTC. */
  bucket: string;
}

export interface UsageRow extends UsageBucket {
  accountId: string;
}

export interface UsageQuery {
  from?: string;
  to?: string;
}

/** A dashboard sign-in. Only the SHA-256 of the session token is stored. */
export interface Session {
  tokenHash: string;
  accountId: string;
  csrfToken: string;
  createdAt: string;
  expiresAt: string;
}

/** Hits of one entry since the last write. */
export interface HitDelta {
  count: number;
  at: string;
  lookupMs: number;
  /**
   * `createdAt` of the entry the hits were on: an entry stored again since (same id, counts
   * reset) does not take them.
   */
  createdAt: string;
}

/** What deleting an account removed with it (`deleteAccount`). */
export interface AccountDeletion {
  account: Account;
  keys: number;
  sessions: number;
  entries: number;
  /** Hourly usage buckets. */
  usageBuckets: number;
}

/** How far the removal of a deleted account's rows has come (`purgeDeletedAccounts`), after each batch. */
export interface PurgeProgress {
  accountId: string;
  /** Its entries removed so far by this run. */
  entriesRemoved: number;
  /** Its entries still to remove. */
  entriesLeft: number;
}

/** What a run of `purgeDeletedAccounts` removed: the rows of `accounts` deleted accounts. */
export interface PurgeResult {
  accounts: number;
  entries: number;
  usageBuckets: number;
}

/**
 * A write for an account deleted meanwhile (a store whose request was let in before the deletion
 * committed): nothing was written. Answered as its key is now: 401 `INVALID_API_KEY`.
 */
export class AccountGoneError extends Error {
  override readonly name = 'AccountGoneError';
  constructor(
    readonly accountId: string,
    options?: ErrorOptions,
  ) {
    super(`account ${accountId} was deleted`, options);
  }
}

/** Durable state: accounts, keys, entries, usage. Implementations: SQLite, PostgreSQL. */
export interface Store {
  readonly kind: 'sqlite' | 'postgres';

  createAccount(name: string, plan: string): Promise<Account>;
  getAccount(id: string): Promise<Account | null>;
  getAccountByName(name: string): Promise<Account | null>;
  listAccounts(): Promise<Account[]>;
  updateAccount(id: string, patch: Partial<Pick<Account, 'plan' | 'defaultThreshold' | 'entryTtlSeconds'>>): Promise<Account | null>;
  /**
   * Deletes the account and everything of it for good: its keys, dashboard sessions, entries (the
   * change log announces them as deleted, where there is one) and usage. At once for everyone: the
   * account, its keys and sessions go in one short transaction, and its entries and usage are
   * neither served nor counted from then on; their rows are removed afterwards, in short
   * transactions (`purgeDeletedAccounts`). Null when there is
   * no such account. Writes that come for it afterwards (counters of requests let in before, a
   * store under way) are dropped or refused (`AccountGoneError`), not written. Counters that come
   * for it while it is being deleted are dropped too, without waiting for it: they come in one
   * batch with other accounts' counters, which are written.
   */
  deleteAccount(id: string): Promise<AccountDeletion | null>;
  /**
   * Removes the rows left of deleted accounts (their entries and usage), oldest deletion first, a
   * batch at a time, each batch a transaction of its own (on the embedded store, with the write
   * lock left to other writers between batches); one process at a time. Resolves when none is left
   * (or `signal` aborts), or null at once when another process is at it. A run interrupted (a
   * crash, a kill) leaves whole batches: the next run goes on from there.
   */
  purgeDeletedAccounts?(opts?: { onBatch?: (p: PurgeProgress) => void; signal?: AbortSignal }): Promise<PurgeResult | null>;
  /** The entries of a deleted account still to remove, or null when none is left of it. */
  purgeLeft?(accountId: string): number | null | Promise<number | null>;
  /** Sets (or with null removes) the dashboard password and ends the account's sessions. */
  setPassword(accountId: string, passwordHash: string | null): Promise<void>;
  getPasswordHash(accountId: string): Promise<string | null>;

  createKey(key: { accountId: string; name: string | null; prefix: string; secretHash: string }): Promise<ApiKey>;
  /** The key with this secret hash and its account, revoked or not. */
  findKeyByHash(secretHash: string): Promise<{ key: ApiKey; account: Account } | null>;
  /** The same lookup without a promise, for stores that answer in process (optional). */
  findKeyByHashSync?(secretHash: string): { key: ApiKey; account: Account } | null;
  getKey(id: string): Promise<ApiKey | null>;
  listKeys(accountId: string): Promise<ApiKey[]>;
  revokeKey(id: string, accountId?: string): Promise<ApiKey | null>;
  touchKeys(lastUsed: ReadonlyMap<string, string>): Promise<void>;

  /**
   * Writes an entry durably; a second store of the same exact hash in the same account
   * replaces its answer and keeps its id. Resolves only once the write is on disk. Rejects with
   * `AccountGoneError` when the account has been deleted. With `limits`, rejects with
   * `StorageQuotaError` (writing nothing) when the entry would take the account past one: checked
   * in the write's transaction, so that stores at the same moment, on any node, cannot pass a
   * limit together. A replacement counts only what it changes.
   */
  putEntry(entry: NewEntry, limits?: StorageLimits | null): Promise<Entry>;
  /** What the account keeps: its entries (until they are deleted or removed once expired) and their bytes. */
  getStorage(accountId: string): Promise<StorageUse>;
  /** The entry stored for this exact hash, without its conversation and vectors. */
  getEntryByHash(accountId: string, exactHash: string): Promise<EntryHead | null>;
  /** The same lookup without a promise, for stores that answer in process (optional). */
  getEntryByHashSync?(accountId: string, exactHash: string): EntryHead | null;
  /** A live entry of the account by its public id. */
  getEntry(accountId: string, publicId: number): Promise<Entry | null>;
  getEntries(ids: readonly number[]): Promise<Entry[]>;
  listEntries(accountId: string, opts: EntryListOptions): Promise<EntryPage>;
  /**
   * The same page as `listEntries`, each entry with the first `chars` UTF-16 code units of its
   * question and answer and their lengths, cut and counted in the database: a list of entries
   * whose answers run to 100,000 characters does not read them whole.
   */
  listEntryPreviews(accountId: string, opts: EntryListOptions, chars: number): Promise<EntryPreviewPage>;
  /**
   * Deletes a live entry of the account by its public id; says which row it was, or null. An
   * expired entry is none (as for `getEntry`): it is left to `deleteExpired`.
   */
  deleteEntry(accountId: string, publicId: number): Promise<DeletedEntry | null>;
  /** Adds hits to entries: usage_count += n, last_hit_at = at; those of an account deleted, or being deleted, are dropped. */
  recordHits(hits: ReadonlyMap<number, HitDelta>): Promise<void>;
  /**
   * Deletes up to `limit` entries whose expires_at is at or before `now` (of one account, with
   * `accountId`); returns what was deleted.
   */
  deleteExpired(now: string, limit: number, accountId?: string): Promise<DeletedEntry[]>;
  /**
   * Deletes up to `limit` of the oldest changes in the log other nodes catch up from, of those
   * older than it keeps; returns how many. Only stores shared by several nodes have the log.
   */
  pruneChanges?(limit: number): Promise<number>;
  /** Every vector, in id order, for rebuilding an index; none of an account deleted (whose rows are still being removed). */
  scanVectors(afterId: number, limit: number): Promise<VectorRow[]>;
  /**
   * Embedded store: the number of the last write of an entry's vector or partition, or removal of
   * one (every such write takes the next number). An index snapshot saved with it is brought up to
   * date with what came after: removedVectors, then changedVectors.
   */
  vectorSeq?(): number;
  /** Entries whose vector or partition was written after `afterSeq`, in that order. */
  changedVectors?(afterSeq: number, limit: number): Promise<ChangedVector[]>;
  /** Vectors removed after `afterSeq`, in that order: kept until a snapshot reflects them. */
  removedVectors?(afterSeq: number, limit: number): Promise<RemovedVector[]>;
  /** Forgets the removals up to `upToSeq`: no snapshot is to be brought up to date across them. */
  forgetRemovedVectors?(upToSeq: number): Promise<void>;
  /**
   * Whether the last write failed for want of the database (a full disk, read-only files, the
   * lock held by another process) while reads are answered; embedded store only.
   */
  readonly writesFailing?: boolean;
  /**
   * Ids, in order and after `afterId`, of entries whose vector id is `embedderId` or starts with
   * `prefix` (the embedder's, of any text form) but is not `current`: vectors to make again; and
   * of entries without a vector whose id is `prefix` + `pending` (`pendingId`): stored while the
   * embedder could not embed. No vector is read.
   */
  staleVectorIds(current: string, embedderId: string, prefix: string, afterId: number, limit: number): Promise<number[]>;
  /**
   * Writes vectors made again (`VectorUpdate`), each only where the entry still has the vector id
   * it was read with (an entry stored again meanwhile keeps its new vectors); returns the ids
   * written. The entries are otherwise untouched (their answer, times and counts).
   */
  replaceVectors(updates: readonly VectorUpdate[]): Promise<number[]>;
  /**
   * Runs `fn` unless another node of the cluster runs work of that `name` now (then null at once).
   * Only stores shared by several nodes have it.
   */
  alone?<T>(name: string, fn: () => Promise<T>): Promise<T | null>;

  /** Adds counters to hourly buckets (creating them); those of an account deleted meanwhile, or being deleted, are dropped. */
  addUsage(rows: readonly UsageRow[]): Promise<void>;

  createSession(session: Session): Promise<void>;
  /** The session if it exists and has not expired at `now`. */
  getSession(tokenHash: string, now: string): Promise<Session | null>;
  deleteSession(tokenHash: string): Promise<void>;
  getUsage(accountId: string, query: UsageQuery): Promise<UsageBucket[]>;

  close(): Promise<void>;
}
