import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { accessSync, constants, existsSync, readFileSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { AppContext } from './api/context.ts';
import { ConfigError, type Config } from './config.ts';
import { Pricing } from './cache/pricing.ts';
import type { CalibratedScorer, HitModel } from './cache/calibrated.ts';
import { cosineScorer, type HitScorer } from './cache/scorer.ts';
import { CacheService } from './cache/service.ts';
import { UsageRecorder } from './cache/usage.ts';
import type { Embedder } from './embedding/interface.ts';
import type { RateLimiter } from './limits/interface.ts';
import { MemoryRateLimiter } from './limits/memory.ts';
import { planOf } from './limits/plans.ts';
import type { Store } from './store/interface.ts';
import { isSqliteDamaged, SqliteStore } from './store/sqlite.ts';
import { DataDirInUseError, lockDataDir, type DataDirLock } from './store/data-dir-lock.ts';
import { PostgresStore } from './store/postgres.ts';
import { RedisRateLimiter } from './limits/redis.ts';
import { IndexSync } from './cache/sync.ts';
import { waitAtMost } from './util/time.ts';
import { Redis } from 'ioredis';
import { dropSnapshot, findSnapshots, HybridIndex, loadSnapshot, saveSnapshot } from './vector/hnsw.ts';

/** The package version, read from package.json (one level up from src/, two from dist/src/). */
export const VERSION: string = (() => {
  for (const rel of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'reprise' && pkg.version) return pkg.version;
    } catch {
      // not at this level
    }
  }
  return '0.0.0';
})();

export function sqlitePath(config: Config): string {
  return path.join(config.dataDir, 'reprise.db');
}

/** Opens the store the configuration names. */
export async function openStore(config: Config): Promise<Store> {
  try {
    if (config.databaseUrl)
      return await PostgresStore.open(config.databaseUrl, {
        schema: config.pgSchema,
        queryTimeoutMs: config.pgQueryTimeoutMs,
        deleteBatch: config.deleteBatch,
      });
    return new SqliteStore(sqlitePath(config), { synchronous: config.sqliteSynchronous, deleteBatch: config.deleteBatch });
  } catch (err) {
    // Said in terms of the setting to change, not as a stack trace.
    const where = config.databaseUrl ? 'DATABASE_URL (PostgreSQL)' : `REPRISE_DATA_DIR (${sqlitePath(config)})`;
    const why = config.databaseUrl ? (err as Error).message : dataDirProblem(config.dataDir, err);
    throw new StoreOpenError(`cannot open the store at ${where}: ${why}`, { cause: err });
  }
}

/** Why the data directory could not be used: a file named in its place, or what the error says. */
function dataDirProblem(dir: string, err: unknown): string {
  let file = false;
  try {
    file = !statSync(dir).isDirectory();
  } catch {
    // Missing, or under a file: the error says which.
  }
  if (file) return `${dir} is a file, not a directory`;
  // SQLite's "file is not a database" or "database disk image is malformed" alone does not say what to do.
  if (isSqliteDamaged(err))
    return `${(err as Error).message}: the file is damaged or is no Reprise database; restore it from a backup, or move it away to start with an empty one`;
  return (err as Error).message;
}

/**
 * Refuses an embedded database that this user cannot write (a file made read-only, or owned by
 * another user after a copy or a restore as root): SQLite would open it read-only without a word,
 * and the server would answer checks and refuse every store, key use and counter. Said at start,
 * naming the file and its permissions.
 */
function refuseReadOnlyDatabase(config: Config): void {
  if (config.databaseUrl) return;
  const db = sqlitePath(config);
  for (const file of [db, `${db}-wal`, `${db}-shm`]) {
    let st;
    try {
      st = statSync(file);
    } catch {
      continue;
    }
    try {
      accessSync(file, constants.W_OK);
    } catch {
      const mode = (st.mode & 0o777).toString(8).padStart(4, '0');
      const user = process.getuid?.() ?? 'unknown';
      throw new StoreOpenError(
        `cannot open the store at REPRISE_DATA_DIR (${db}): ${file} is not writable by this user (uid ${user}; the file's owner is uid ${st.uid}, mode ${mode}); make it writable by the user the server runs as (chown or chmod u+w)`,
      );
    }
  }
}

/**
 * Whether the configured store has been made: the SQLite file, or Reprise's tables in the
 * PostgreSQL schema. Nothing is made by asking.
 */
export async function storeExists(config: Config): Promise<boolean> {
  if (!config.databaseUrl) return existsSync(sqlitePath(config));
  try {
    return await PostgresStore.initialised(config.databaseUrl, config.pgSchema);
  } catch (err) {
    throw new StoreOpenError(`cannot open the store at DATABASE_URL (PostgreSQL): ${(err as Error).message}`, { cause: err });
  }
}

/** The configured store could not be opened (unreachable, not writable, not a directory). */
export class StoreOpenError extends Error {
  override readonly name = 'StoreOpenError';
}

/** A stop was asked (`RuntimeOptions.signal`) before the start was over: what it had opened is closed again. */
export class StartStoppedError extends Error {
  override readonly name = 'StartStoppedError';
  constructor() {
    super('stopped during start-up');
  }
}

/**
 * The embedded store's data directory, taken for this server alone (see lockDataDir); null in
 * cluster mode, where nodes share PostgreSQL and may share a directory. The CLI does not take it.
 */
function lockEmbeddedDataDir(config: Config): DataDirLock | null {
  if (config.databaseUrl) return null;
  try {
    return lockDataDir(config.dataDir);
  } catch (err) {
    const why =
      err instanceof DataDirInUseError
        ? `${err.message}; stop it, or give this server its own REPRISE_DATA_DIR (the CLI may be used while a server runs)`
        : dataDirProblem(config.dataDir, err);
    throw new StoreOpenError(`cannot open the store at REPRISE_DATA_DIR (${sqlitePath(config)}): ${why}`, { cause: err });
  }
}

/** Removals kept for the embedded store's snapshot, at least (see trimRemovals). */
const REMOVALS_KEPT = 100_000;

/**
 * Takes a cluster node's data directory, for its index snapshot, when no other server holds it
 * (nodes may share one: then none of them keeps a snapshot): its lock; null otherwise, said in the log.
 */
function takeNodeSnapshotDir(config: Config, log: RuntimeLog | undefined): DataDirLock | null {
  try {
    return lockDataDir(config.dataDir);
  } catch (err) {
    log?.info(
      { err: err instanceof DataDirInUseError ? undefined : err, data_dir: config.dataDir },
      'the data directory is in use by another server, or cannot be written: this node keeps no index snapshot and reads the index from PostgreSQL at each start',
    );
    return null;
  }
}

/**
 * Redis-backed limits shared by all nodes when REDIS_URL is set; in-process otherwise. Resolves
 * once Redis is connected: a node's first requests are not counted in buckets of their own, nor
 * logged as an outage, for want of a connection still being made. When the connection fails, or
 * its connect timeout passes, the limiter starts on per-node buckets: an outage from the start,
 * logged and in the health bodies at once, not only once a request has asked Redis.
 */
export async function openLimiter(config: Config, log?: RuntimeLog): Promise<RateLimiter> {
  if (!config.redisUrl) return new MemoryRateLimiter();
  const connectTimeout = 2000;
  const redis = new Redis(config.redisUrl, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout,
    commandTimeout: 1000,
    retryStrategy: (times) => Math.min(times * 200, 2000),
  });
  // Errors are answered by the limiter's fallback; the client reconnects by itself.
  redis.on('error', () => undefined);
  let refused: unknown;
  await waitAtMost(connectTimeout, (signal) =>
    once(redis, 'ready', { signal }).catch((err: unknown) => {
      if (!signal.aborted) refused = err;
    }),
  );
  const downAtStart = redis.status === 'ready' ? undefined : (refused ?? new Error(`no connection to Redis within ${connectTimeout} ms`));
  const onFallback = (err: unknown) =>
    log?.warn({ err }, 'Redis (REDIS_URL) does not answer: each node now applies the rate limits on its own traffic until it is back');
  const onRecover = () => log?.info({}, 'Redis (REDIS_URL) answers again: rate limits are shared by all nodes again');
  const connected = () => redis.status === 'ready';
  return new RedisRateLimiter(redis, { prefix: config.redisPrefix, onFallback, onRecover, connected, downAtStart }, async () => {
    redis.disconnect();
  });
}

export async function openEmbedder(config: Config): Promise<Embedder | null> {
  const e = config.embedder;
  switch (e.kind) {
    case 'none':
      return null;
    case 'use-lite': {
      const { createUseLiteEmbedder } = await import('./embedding/use-lite.ts');
      return createUseLiteEmbedder({ workers: e.workers === 0 ? undefined : e.workers, memoSize: e.memoSize, priority: e.priority });
    }
    case 'http': {
      const { createHttpEmbedder, DimensionsMismatchError } = await import('./embedding/http.ts');
      try {
        return await createHttpEmbedder({
          baseUrl: e.url,
          model: e.model,
          apiKey: e.apiKey ?? undefined,
          dimensions: e.dimensions ?? undefined,
        });
      } catch (err) {
        if (!(err instanceof DimensionsMismatchError)) throw err;
        // Refused as any other bad setting (exit code 2), naming what the model really gives.
        throw new ConfigError(
          'REPRISE_EMBED_DIMENSIONS',
          `is ${err.given}, but the model ${e.model} at ${err.url} returns vectors of ${err.actual} dimensions; set it to ${err.actual}, or to 0 to learn it at start`,
        );
      }
    }
  }
}

/** The calibrated model and its scorer's class, or null for raw cosine. */
type Calibrated = { model: HitModel; Scorer: typeof CalibratedScorer } | null;

/**
 * The calibrated model and its scorer's module, when the configuration asks for them and there is
 * an embedder to score with. Loaded here, not with this module, so that commands without a cache
 * (`reprise keys`) do not load them and the scorer's name lexicon.
 */
async function loadCalibrated(config: Config, withEmbedder: boolean): Promise<Calibrated> {
  if (config.scorer !== 'calibrated' || !withEmbedder) return null;
  const { CalibratedScorer: Scorer, loadHitModel } = await import('./cache/calibrated.ts');
  return { model: loadHitModel(), Scorer };
}

/** The calibrated model where it was trained for this embedder; raw cosine otherwise. */
export function chooseScorer(calibrated: Calibrated, embedder: Embedder | null): HitScorer {
  if (!calibrated || !embedder) return cosineScorer;
  return calibrated.model.embedderId === embedder.id ? new calibrated.Scorer(calibrated.model) : cosineScorer;
}

export interface Runtime {
  ctx: AppContext;
  usage: UsageRecorder;
  embedder: Embedder | null;
  index: HybridIndex;
  /** Vectors the index took from its snapshot at start (the rest came from the store). */
  vectorsFromSnapshot: number;
  /** Cluster mode: keeps the index in step with other nodes' writes. */
  sync: IndexSync | null;
  /** Settles when the index is loaded (`CacheService.loadIndex`), or that stopped; never rejects. */
  indexLoaded: Promise<void>;
  /** Settles when the stored vectors of older text forms are made again, or that stopped (`CacheService.reembed`). */
  reembedded: Promise<void>;
  close(): Promise<void>;
}

/** Where the runtime reports what happens outside any request (a dependency lost and back). */
export interface RuntimeLog {
  error?(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
}

export interface RuntimeOptions {
  log?: RuntimeLog;
  /** Use this embedder instead of opening the configured one (tests share one across apps). */
  embedder?: Embedder | null;
  scorer?: HitScorer;
  usageFlushMs?: number;
  syncPollMs?: number;
  /**
   * How long to wait for the index to load before returning (default: until it is loaded); past
   * that the runtime serves while it loads (`CacheService.loadIndex`).
   */
  indexWaitMs?: number;
  /** How often an embedder that failed is tried again in the background until it embeds (default 1 s). */
  embedderProbeMs?: number;
  /** How often expired entries are swept (default a minute). */
  sweepMs?: number;
  /** Removals kept for the embedded store's snapshot, at least (default 100,000; see trimRemovals). */
  removalsKept?: number;
  /**
   * Aborted when the server is asked to stop (SIGTERM, SIGINT) while it starts: the start stops at
   * its next step, closes what it opened (the index load stops, counters are flushed, the data
   * directory is free again) and rejects with a StartStoppedError.
   */
  signal?: AbortSignal;
}

/** The composition root: picks every adapter from the configuration and wires them. */
export async function createRuntime(config: Config, opts: RuntimeOptions = {}): Promise<Runtime> {
  // Before anything is opened, so that a model that cannot be read leaves nothing open.
  const withEmbedder = opts.embedder !== undefined ? opts.embedder !== null : config.embedder.kind !== 'none';
  const calibrated = opts.scorer ? null : await loadCalibrated(config, withEmbedder);
  if (opts.signal?.aborted) throw new StartStoppedError();
  const lock = lockEmbeddedDataDir(config);
  // What is opened from here on is closed again, newest first and the data directory last, when
  // the start fails midway (an embedder or PostgreSQL that does not answer): a caller that tries
  // again in this process finds the directory free, not held until the process exits.
  const opened: (() => unknown)[] = [() => lock?.release()];
  const step = async <T>(open: () => T | Promise<T>): Promise<T> => {
    try {
      return await open();
    } catch (err) {
      for (const close of opened.reverse())
        await Promise.resolve()
          .then(close)
          .catch(() => undefined);
      throw err;
    }
  };
  /** Between the steps of the start: a stop asked meanwhile closes what is open and ends it. */
  const stopIfAsked = () =>
    step(() => {
      if (opts.signal?.aborted) throw new StartStoppedError();
    });
  await step(() => refuseReadOnlyDatabase(config));
  const store: Store = await step(() => openStore(config));
  opened.push(() => store.close());
  await stopIfAsked();
  // The first error that said the embedded database is damaged: logged once, and said by the
  // health checks until a restart (the damage stays until an operator repairs the file).
  let damage: unknown = null;
  const storeDamaged = (err: unknown): void => {
    if (damage !== null) return;
    damage = err;
    (opts.log?.error ?? opts.log?.warn)?.call(
      opts.log,
      { err, file: sqlitePath(config) },
      `the database ${sqlitePath(config)} is damaged: requests that need its damaged pages are refused (503) and the rest are served; stop the server, keep a copy of the file, and restore it from a backup or recover it with sqlite3's .recover (README, Durability)`,
    );
  };
  const embedder = opts.embedder !== undefined ? opts.embedder : await step(() => openEmbedder(config));
  if (opts.embedder === undefined && embedder) opened.push(() => embedder.close());
  await stopIfAsked();
  const limiter = await step(() => openLimiter(config, opts.log));
  opened.push(() => limiter.close());
  await stopIfAsked();
  const index = new HybridIndex(embedder?.dimensions ?? 512, { crossover: 2000 });
  // In a cluster, requests are counted in the hour PostgreSQL's clock says, as on every node.
  const usage = new UsageRecorder(store, opts.usageFlushMs ?? 1000, store instanceof PostgresStore ? store.now : undefined);
  // Set once the runs they start are defined, below.
  let embedderDown: () => void = () => undefined;
  let embedPending: () => void = () => undefined;
  let embedderBack: (pending: boolean) => void = () => undefined;
  const cache = new CacheService({
    store,
    index,
    embedder,
    scorer: opts.scorer ?? chooseScorer(calibrated, embedder),
    pricing: new Pricing(config.prices, config.defaultPricePerMillion),
    usage,
    entryTtlSeconds: config.entryTtlSeconds,
    // In a cluster, entries' times by PostgreSQL's clock: the same on every node, whatever its own says.
    now: store instanceof PostgresStore ? store.now : undefined,
    storageLimits: (account) => planOf(config.plans, account.plan),
    onEmbedderDown: (err) => {
      opts.log?.warn({ err }, 'the embedder cannot embed: semantic checks are misses and stores are exact only until it can again');
      embedderDown();
    },
    onEmbedderBack: (pending) => embedderBack(pending),
  });
  const sync =
    store instanceof PostgresStore && embedder && config.databaseUrl
      ? new IndexSync(store, index, embedder, config.databaseUrl, {
          pollMs: opts.syncPollMs,
          onLate: (seq) => opts.log?.info({ seq }, 'a store committed after its change number was given up on is in the index now'),
          onPending: () => {
            if (cache.notePending()) embedPending();
          },
        })
      : null;
  // A cluster node keeps a snapshot of its own index in its data directory, when it has the
  // directory to itself: saved at shutdown with the change number it reflects, and kept once
  // loaded, so that a node restarted (a rolling deploy) or restarted after a crash loads it and
  // applies the changes since from the change log, instead of reading every vector from
  // PostgreSQL. Loaded only when PostgreSQL has a record of it (the same database, not one restored
  // from an older backup) and the change log still holds every change after it (a week).
  const snapshotDir = path.join(config.dataDir, 'index');
  const nodeLock = store instanceof PostgresStore && sync && embedder ? takeNodeSnapshotDir(config, opts.log) : null;
  const nodeSnapshot =
    nodeLock && store instanceof PostgresStore && sync && embedder ? { lock: nodeLock, store, sync, tag: embedder.id } : null;
  if (nodeLock) opened.push(() => nodeLock.release());
  let nodeToken: string | null = null;
  if (nodeSnapshot) {
    // Each manifest read once: the one in place, or, after a save ended between its renames, the
    // new one (recorded before it was written) and the old one.
    const found = findSnapshots(snapshotDir);
    const { first } = await step(() => nodeSnapshot.store.changeBounds());
    let usable: { token: string; seq: number } | null = null;
    for (const { token } of found) {
      const seq = token === null ? null : await step(() => nodeSnapshot.store.snapshotSeq(token));
      if (token !== null && seq !== null && seq >= first - 1) {
        usable = { token, seq };
        break;
      }
    }
    if (usable && loadSnapshot(index, snapshotDir, nodeSnapshot.tag, usable.token, true, found) !== null) {
      nodeToken = usable.token;
      nodeSnapshot.sync.markAt(usable.seq, first);
    } else dropSnapshot(snapshotDir);
  }
  if (nodeToken === null) await step(async () => sync?.mark());
  await stopIfAsked();
  // On the embedded store the index is saved at shutdown and loaded at start; then what changed
  // in the database after the snapshot was saved is read: the vectors removed since (deleted,
  // expired), and the entries whose vectors were written since. The snapshot stays on disk until
  // the next shutdown replaces it, so a start after a crash loads it too, and reads more changes.
  // The database holds the token of the snapshot saved with it, so a snapshot beside another
  // database (one restored from a backup) is not loaded.
  const snapshot = store instanceof SqliteStore && embedder ? { store, dir: snapshotDir, tag: embedder.id } : null;
  const watermark = snapshot ? loadSnapshot(index, snapshot.dir, snapshot.tag, snapshot.store.snapshotToken(), true) : null;
  // None was loaded: one left on disk (another embedder's) would not know of the removals
  // forgotten below, were it loaded at a later start.
  if (snapshot && watermark === null) dropSnapshot(snapshot.dir);
  // The vectors removed (deletes, expiries, moves to another partition) are listed in the database
  // for the snapshot on disk, to be taken out of it at a start after a crash. With none there for
  // a later start to load (this start loaded none; or, without an embedder, none is left by one),
  // no snapshot can need the list: it is emptied now and after each expiry sweep (see trimRemovals).
  let unlisted = store instanceof SqliteStore && (snapshot ? watermark === null : findSnapshots(snapshotDir).length === 0);
  /**
   * Trims the embedded store's list of removed vectors to its bound. With no snapshot that can
   * need it the bound is 0: the list would otherwise keep a row for each delete and expiry until
   * a snapshot is saved, for good on a server without an embedder. Otherwise it grows with every
   * delete and expiry until the next shutdown saves a new snapshot; past as many as the index
   * holds (100,000 at least), the snapshot is dropped with them: a start after a crash would then
   * rebuild the index. Not while the index loads from the snapshot, which reads the list.
   */
  const trimRemovals = async (): Promise<void> => {
    if (!(store instanceof SqliteStore) || (!unlisted && snapshot && !cache.indexReady)) return;
    // Up to the number read now, before any snapshot is saved (at close, after the sweeps): the
    // removals after the one it is saved at are kept for it.
    const upTo = store.vectorSeq();
    const removals = store.removedVectorCount();
    if (removals <= (unlisted ? 0 : Math.max(opts.removalsKept ?? REMOVALS_KEPT, index.size))) return;
    // The snapshot first: one left without its removals would be loaded after a crash.
    if (!unlisted) dropSnapshot(snapshotDir);
    await store.forgetRemovedVectors(upTo);
    if (!unlisted)
      opts.log?.info({ removals }, 'the index snapshot is dropped, with the removals made since it was saved; the next shutdown saves one');
  };
  const trimFailed = (err: unknown) =>
    opts.log?.warn({ err }, 'the list of removed vectors could not be trimmed; it is tried again at the next sweep');
  await trimRemovals().catch(trimFailed);
  // Without a snapshot to load, the index is rebuilt from the database, and saved once whole
  // (see saveRebuilt) with the number of the last vector write before the rebuild: what was
  // written up to it is in the index then, and the removals after it are kept for it from here on.
  const rebuiltAt = snapshot && watermark === null ? snapshot.store.vectorSeq() : null;
  if (rebuiltAt !== null) unlisted = false;
  // Accounts deleted with the CLI leave the index (see `forgetDeletedAccounts`). Those of the
  // embedded store are deleted by another process: the server looks when another connection has
  // committed (read each second), and before it saves a snapshot; and here, for those deleted while
  // it was stopped, which the snapshot still holds.
  const forgetDeleted = async (): Promise<void> => {
    try {
      const vectors = await cache.forgetDeletedAccounts();
      if (vectors > 0) opts.log?.info({ vectors }, 'the vectors of deleted accounts are out of the semantic index');
    } catch (err) {
      opts.log?.warn({ err }, 'looking for deleted accounts in the semantic index failed; it is tried again at the next change');
    }
  };
  let accountWatch: NodeJS.Timeout | null = null;
  if (snapshot) {
    snapshot.store.committedElsewhere();
    if (index.size > 0) await forgetDeleted();
    accountWatch = setInterval(() => {
      if (snapshot.store.committedElsewhere()) void forgetDeleted();
    }, 1000);
    accountWatch.unref();
  }
  // What the snapshot brought, less the vectors of accounts deleted since it was saved.
  const vectorsFromSnapshot = index.size;
  // The rest of the index is loaded while requests are answered (exact hits and stores; semantic
  // checks are misses until it is whole), so a node rebuilding a large index after a crash, or
  // any cluster node at start, serves meanwhile. Other nodes' writes made during the load are
  // applied from the change log before semantic checks search it.
  const background = new AbortController();
  // A stop asked from here on ends the load of the index; the runtime is then closed whole (below).
  const stopLoading = () => background.abort();
  if (opts.signal?.aborted) stopLoading();
  else opts.signal?.addEventListener('abort', stopLoading, { once: true });
  /**
   * Saves the embedded store's snapshot of the index at `seq` (the last vector write it holds),
   * and records its token in the database once it is whole on disk: a crash between the two
   * leaves them unmatched, and the index is rebuilt from the database.
   */
  const saveEmbeddedSnapshot = async (s: NonNullable<typeof snapshot>, seq: number): Promise<void> => {
    const token = randomUUID();
    saveSnapshot(index, s.dir, s.tag, token, seq);
    await s.store.setSnapshotToken(token, seq);
  };
  /**
   * Saves a cluster node's snapshot of the index, recorded in PostgreSQL before it is written (a
   * record without its files is never matched); its token. Its change number is below any still
   * looked for: a change that commits late is applied after the next start.
   */
  const saveNodeSnapshot = async (n: NonNullable<typeof nodeSnapshot>): Promise<string> => {
    const token = randomUUID();
    const seq = n.sync.snapshotThrough;
    await n.store.recordSnapshot(token, seq);
    saveSnapshot(index, snapshotDir, n.tag, token, seq);
    return token;
  };
  /**
   * After a start that had no snapshot to load (none saved yet, a data directory never stopped
   * cleanly, one of another embedder, damaged, or beside another database), the index rebuilt from
   * the database is saved at once, so that a crash before the next clean stop brings it up to date
   * instead of rebuilding it again (about 21 minutes at a million entries). usearch writes a graph
   * synchronously: requests wait meanwhile (about 3 s at a million vectors), once a start.
   */
  const saveRebuilt = async (): Promise<void> => {
    const started = performance.now();
    try {
      if (snapshot && rebuiltAt !== null) await saveEmbeddedSnapshot(snapshot, rebuiltAt);
      // The next shutdown's replaces it.
      else if (nodeSnapshot && nodeToken === null) nodeToken = await saveNodeSnapshot(nodeSnapshot);
      else return;
    } catch (err) {
      // None is left half-made: the next start rebuilds, as before.
      if (snapshot) {
        dropSnapshot(snapshot.dir);
        unlisted = true;
      } else dropSnapshot(snapshotDir);
      opts.log?.warn({ err }, 'the rebuilt semantic index could not be saved; a start after a crash rebuilds it again');
      return;
    }
    opts.log?.info(
      { vectors: index.size, save_ms: Math.round(performance.now() - started) },
      'the rebuilt semantic index is saved: a start after a crash loads it and reads what changed since',
    );
  };
  const loadStarted = performance.now();
  /** Whether loading the index stopped for good (a damaged database): the health says so. */
  let indexStopped = false;
  const indexLoaded = cache
    .loadIndex(watermark ?? 0, {
      fromChanges: nodeToken !== null,
      signal: background.signal,
      onError: (err) => {
        // A damaged database is not repaired by reading it again: the load stops (said below).
        if (store instanceof SqliteStore && isSqliteDamaged(err)) {
          storeDamaged(err);
          throw err;
        }
        opts.log?.warn({ err }, 'loading the semantic index: the store does not answer; trying again');
      },
      beforeReady: async () => {
        await sync?.start();
        await sync?.caughtUp();
      },
    })
    .then(
      () => {
        // What the index holds: vectors read on the way can have been deleted (or stored) meanwhile.
        if (cache.indexReady && embedder) {
          opts.log?.info(
            { vectors: index.size, load_ms: Math.round(performance.now() - loadStarted) },
            'the semantic index is loaded: semantic checks search it',
          );
          return background.signal.aborted ? undefined : saveRebuilt();
        }
      },
      (err: unknown) => {
        indexStopped = true;
        opts.log?.warn({ err }, 'loading the semantic index stopped; semantic checks are misses until the next start');
      },
    );
  // Vectors read while the index loaded may be of an account deleted meanwhile.
  if (snapshot) void indexLoaded.then(() => (background.signal.aborted ? undefined : forgetDeleted()));
  usage.start();
  // Vectors made from an older form of their texts are made again in the background (by one node
  // of a cluster at a time), once the index is loaded; until then they are searched as they are.
  // The same, one run at a time, for entries stored while the embedder could not embed, once it
  // embeds again (`onEmbedderBack`).
  const reembed = () => cache.reembed({ signal: background.signal });
  const reembedRun = () =>
    (store.alone ? store.alone('reembed', reembed) : reembed()).then(
      (vectors) => {
        if (vectors !== null && vectors > 0) opts.log?.info({ vectors }, 'stored vectors made again from the current form of their texts');
      },
      (err: unknown) => opts.log?.warn({ err }, 'making stored vectors again stopped; it resumes at the next start'),
    );
  let reembedded: Promise<void> = indexLoaded.then(() => (background.signal.aborted ? undefined : reembedRun()));
  // Entries stored without their vectors, by this node or another, are embedded by a run after
  // the ones under way (one more at most: it takes all there are by then). Before the index is
  // loaded, the run that follows the load takes them.
  let queued = false;
  embedPending = () => {
    if (queued || !cache.indexReady || background.signal.aborted) return;
    queued = true;
    reembedded = reembedded.then(() => {
      queued = false;
      return background.signal.aborted ? undefined : reembedRun();
    });
  };
  embedderBack = (pending) => {
    opts.log?.info({ pending }, 'the embedder embeds again: semantic checks and stores use it again');
    if (pending) embedPending();
  };
  // A node whose embedder failed tries it again on its own, so that it learns it is back (its
  // health, and the entries it stored meanwhile) without waiting for a request that embeds: one
  // that gets exact hits only, or none, would otherwise never find out.
  let probing = false;
  embedderDown = () => {
    if (probing || background.signal.aborted) return;
    probing = true;
    void (async () => {
      try {
        while (!background.signal.aborted && !cache.embedderAvailable) {
          await delay(opts.embedderProbeMs ?? 1000, undefined, { signal: background.signal }).catch(() => undefined);
          if (!background.signal.aborted) await cache.probeEmbedder();
        }
      } finally {
        probing = false;
      }
    })();
  };
  if (opts.indexWaitMs === undefined) await indexLoaded;
  else if (opts.indexWaitMs > 0) await waitAtMost(opts.indexWaitMs, () => indexLoaded);
  // The rows left of accounts deleted (their entries and usage, removed a batch at a time after
  // the account is gone for everyone) are removed by the server when no other process is at it
  // (one node of a cluster): at start and at each sweep, so that a deletion interrupted (the CLI
  // killed) is finished.
  const purge = store.purgeDeletedAccounts ? store.purgeDeletedAccounts.bind(store) : null;
  let purging: Promise<void> | null = null;
  const purgeDeleted = (): void => {
    if (!purge || purging || background.signal.aborted) return;
    purging = purge({ signal: background.signal })
      .then(
        (done) => {
          if (done && done.accounts > 0) {
            opts.log?.info(
              { accounts: done.accounts, entries: done.entries, usage_buckets: done.usageBuckets },
              'the rest of deleted accounts is removed from the database',
            );
          }
        },
        (err: unknown) => opts.log?.warn({ err }, 'removing the rows of deleted accounts stopped; it goes on at the next sweep'),
      )
      .finally(() => (purging = null));
  };
  purgeDeleted();
  const sweeper = setInterval(() => {
    purgeDeleted();
    void cache
      .sweepExpired()
      .catch(() => undefined)
      .then(() => (background.signal.aborted ? undefined : trimRemovals().catch(trimFailed)));
  }, opts.sweepMs ?? 60_000);
  sweeper.unref();

  const ctx: AppContext = {
    config,
    store,
    cache,
    limiter,
    version: VERSION,
    storeDamaged: store instanceof SqliteStore ? storeDamaged : undefined,
    async ready() {
      const checks: Record<string, string> = {};
      let error: unknown;
      try {
        await store.getAccount('readiness-probe');
        // Informational: checks are answered while writes fail (stores are 503 meanwhile), and
        // from a database damaged in places, what can be read.
        checks.store = damage !== null ? 'damaged' : store.writesFailing ? 'read-only' : 'ok';
      } catch (err) {
        const damaged = store instanceof SqliteStore && isSqliteDamaged(err);
        if (damaged) storeDamaged(err);
        checks.store = damaged ? 'damaged' : 'unavailable';
        error = err;
      }
      // Informational: checks and stores are answered without it (misses, exact only).
      checks.embedder = embedder ? (cache.embedderAvailable ? 'ok' : 'unavailable') : 'disabled';
      // Informational: exact hits and stores are served while the index loads.
      if (embedder) checks.index = cache.indexReady ? 'ok' : indexStopped ? 'unavailable' : 'loading';
      // Informational: limits fail open to per-node buckets while Redis is away.
      if (limiter.degraded !== undefined) checks.limiter = limiter.degraded ? 'degraded' : 'ok';
      return { ok: error === undefined, checks, error };
    },
  };
  const runtime: Runtime = {
    ctx,
    usage,
    embedder,
    index,
    vectorsFromSnapshot,
    sync,
    indexLoaded,
    get reembedded() {
      return reembedded;
    },
    async close() {
      clearInterval(sweeper);
      if (accountWatch) clearInterval(accountWatch);
      background.abort();
      await indexLoaded;
      // Stopped after its batch under way: the next start goes on from there.
      await purging;
      // Runs started meanwhile are chained on it.
      for (let last: Promise<void> | null = null; last !== reembedded;) await (last = reembedded);
      // Checks and stores whose clients have gone finish before what they use is closed.
      await cache.settled();
      await sync?.stop();
      await usage.close();
      await limiter.close();
      // A graph still being built is dropped: its partition is saved exact, and built at the next start.
      index.close();
      // Last, after the counters are safe: a large index takes a while to write.
      // An index not loaded whole is not saved: the next start would take it for all there is.
      if (snapshot && cache.indexReady) {
        await forgetDeleted();
        try {
          await saveEmbeddedSnapshot(snapshot, snapshot.store.vectorSeq());
        } catch (err) {
          // Nothing is lost (a full disk, a data directory that cannot be written): every entry is
          // in the database, which keeps the token of the snapshot saved before and the removals
          // made since. What this save left half-written is never loaded; it is removed if it can be.
          try {
            rmSync(`${snapshot.dir}.new`, { recursive: true, force: true });
          } catch {
            // The next save removes it first.
          }
          opts.log?.warn(
            { err },
            'the semantic index snapshot could not be saved at shutdown; nothing is lost: the next start loads the snapshot saved before and reads what changed since from the database, or rebuilds the index from it',
          );
        }
      }
      if (nodeSnapshot && cache.indexReady) {
        // When PostgreSQL does not answer, the snapshot on disk, the one loaded at start and
        // recorded then, is kept for the next start. The record of that one is forgotten once the
        // new one has replaced it.
        let saved = false;
        try {
          await saveNodeSnapshot(nodeSnapshot);
          saved = true;
          if (nodeToken !== null) await nodeSnapshot.store.forgetSnapshot(nodeToken);
        } catch (err) {
          opts.log?.warn(
            { err },
            saved
              ? 'the record of the index snapshot replaced was not deleted; it is, with those too old, at a later shutdown'
              : nodeToken !== null
                ? 'the semantic index snapshot was not saved; the next start loads the one it loaded at this start'
                : 'the semantic index snapshot was not saved; the next start reads the index from PostgreSQL',
          );
        }
      }
      nodeSnapshot?.lock.release();
      if (opts.embedder === undefined && embedder) await embedder.close();
      await store.close();
      lock?.release();
    },
  };
  opts.signal?.removeEventListener('abort', stopLoading);
  if (opts.signal?.aborted) {
    await runtime.close();
    throw new StartStoppedError();
  }
  return runtime;
}
