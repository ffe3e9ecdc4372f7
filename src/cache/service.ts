import { performance } from 'node:perf_hooks';
import { setImmediate, setTimeout as delay } from 'node:timers/promises';
import { EmbedderUnavailableError, type Embedder } from '../embedding/interface.ts';
import type {
  Account,
  ChangedVector,
  Entry,
  EntryHead,
  HitDelta,
  NewEntry,
  Store,
  UsageBucket,
  UsageDelta,
  VectorRow,
  VectorUpdate,
} from '../store/interface.ts';
import { limited, StorageQuotaError, storageRefusal, storedBytes, type StorageLimits, type StorageUse } from '../store/quota.ts';
import type { Neighbour, VectorIndex } from '../vector/interface.ts';
import { entryKey, promptHash, type Message } from './canonical.ts';
import {
  accountOfPartition,
  contextHashOf,
  followUpOf,
  partitionOf,
  repliesOf,
  sameReplies,
  semanticKey,
  type SemanticKey,
} from './context.ts';
import { formatUsd, type Pricing } from './pricing.ts';
import { dot, mayRival, type HitScorer, type Side } from './scorer.ts';
import { embedText, embedTurns, formPrefix, ofEmbedder, pendingId, vectorId } from './text-form.ts';
import { putAsQuestion } from './features.ts';
import { emptyDelta, addDelta, type UsageRecorder } from './usage.ts';
import { isoAt } from '../util/time.ts';
import { Slice, Turns } from '../util/turns.ts';

export type CacheType = 'exact' | 'semantic';

export const DEFAULT_THRESHOLD = 0.85;
/** Candidates taken from the index before the hit decision. */
const CANDIDATES = 8;
/** How far the search widens when the nearest candidates are all unusable. */
const MAX_CANDIDATES = 512;
/** How far the search widens for the runner-up when the nearest others are all other requests. */
const RUNNER_UP_CANDIDATES = 64;
/** An entry the index holds and the store no longer does (deleted meanwhile). */
const MISSING = {} as Entry;

export interface LoadOptions {
  /**
   * The index holds a snapshot that `beforeReady` brings up to date (a cluster node's, from the
   * change log): nothing is read from the store.
   */
  fromChanges?: boolean;
  /** Rows read from the store at a time. */
  batch?: number;
  /** How long the load works before it lets requests through. */
  sliceMs?: number;
  signal?: AbortSignal;
  /** Told of a read that failed (it is tried again). */
  onError?: (err: unknown) => void;
  /** Runs once every vector is in, before semantic checks search the index. */
  beforeReady?: () => Promise<void>;
}

export interface CheckInput {
  messages: Message[];
  similarityThreshold?: number;
  cacheTypes?: CacheType[];
  /** Extension: a scope inside the account; entries of other namespaces never match. */
  namespace?: string;
  /** Extension: only entries stored for this model match. */
  model?: string;
}

export interface Hit {
  cacheHit: true;
  answer: string;
  cacheType: CacheType;
  lookupTimeMs: number;
  tokensSaved: number;
  createdAt: string;
  similarityScore: number | null;
  metadata: { model: string; originalTokens: number; usageCount: number };
  entryId: number;
}

export interface Miss {
  cacheHit: false;
  promptHash: string;
  lookupTimeMs: number;
  searchResults: { exactChecked: boolean; semanticChecked: boolean; closestMatchScore: number };
}

export type CheckResult = Hit | Miss;

export interface StoreInput {
  messages: Message[];
  answer: string;
  model: string;
  tokensUsed?: number;
  namespace?: string;
  /** Extension: lifetime of this entry in seconds (0 = no expiry). */
  ttlSeconds?: number;
}

export interface StoreResult {
  stored: true;
  cacheTypesStored: CacheType[];
  storageTimeMs: number;
  entryId: number;
  promptHash: string;
}

export interface UsageSummary {
  totalRequests: number;
  cacheHits: number;
  cacheMisses: number;
  hitRatePercentage: number;
  exactHits: number;
  semanticHits: number;
  averageLookupTimeMs: number;
  tokensSaved: number;
  estimatedCostSavings: string;
  estimatedCostSavingsUsd: number;
  stores: number;
}

export interface CacheDeps {
  store: Store;
  index: VectorIndex;
  /** Null when semantic caching is switched off. */
  embedder: Embedder | null;
  scorer: HitScorer;
  pricing: Pricing;
  usage: UsageRecorder;
  /** Server default lifetime of entries in seconds; 0 = none. */
  entryTtlSeconds: number;
  /** The storage limits of an account's plan (none when absent). */
  storageLimits?: (account: Account) => StorageLimits;
  /** Minimum similarity of earlier user turns for a multi-turn semantic hit. */
  contextThreshold?: number;
  /** Told when the embedder fails to embed after it worked (its server down, its workers restarting). */
  onEmbedderDown?: (err: unknown) => void;
  /**
   * Told when it embeds again; `pending` when entries were stored meanwhile without their
   * vectors (`pendingId`), to embed now (`reembed`).
   */
  onEmbedderBack?: (pending: boolean) => void;
  now?: () => number;
}

/** Estimated tokens of a text when the client does not say: about four characters a token. */
export function estimateTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

const round3 = (ms: number): number => Math.round(ms * 1000) / 1000;

/**
 * A score as shown, to 4 decimals, rounded down: a threshold set to a score a client has seen
 * is never above the score itself, so the same candidate is a hit at it. The shown score is the
 * one compared with the threshold, so a hit never shows less than the threshold.
 */
const shownScore = (score: number): number => Math.floor(score * 10_000) / 10_000;

/** An entry that has not expired at `nowIso` and matches the requested model, if any. */
function usable(e: EntryHead, nowIso: string, model: string | undefined): boolean {
  return (e.expiresAt === null || e.expiresAt > nowIso) && (model === undefined || e.model === model);
}

/** The cache's rules: check, store, usage. Knows nothing of HTTP. */
export class CacheService {
  private readonly now: () => number;
  private readonly contextThreshold: number;
  /** Requests resume one per event-loop pass after embedding, so exact lookups are not held up. */
  private readonly turns = new Turns();
  /** The namespace each entry object was last found to match (see `sameNamespace`). */
  private readonly matchedNamespace = new WeakMap<EntryHead, string>();
  /** While the index is loaded at start (`loadIndex`): the ids deleted meanwhile. */
  private loading: Set<number> | null = null;
  /** Whether the embedder's last attempt failed (no embedding made since). */
  private embedderDown = false;
  /** Whether entries were stored without their vectors since the embedder failed. */
  private storedPending = false;

  constructor(private readonly deps: CacheDeps) {
    this.now = deps.now ?? Date.now;
    this.contextThreshold = deps.contextThreshold ?? 0.65;
  }

  /**
   * Checks and stores under way past their first step (embedding, a search, a write). The HTTP
   * server waits for the requests of connected clients when it closes, not for those whose client
   * has gone; closing waits for these too (`settled`), so a store whose client gave up is still
   * written whole rather than cut off by the store closing under it.
   */
  private readonly pending = new Set<Promise<unknown>>();

  private track<T>(work: Promise<T>): Promise<T> {
    this.pending.add(work);
    const done = () => void this.pending.delete(work);
    work.then(done, done);
    return work;
  }

  /** Resolves once every check and store under way has finished, answered or failed. */
  async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }

  get semanticEnabled(): boolean {
    return this.deps.embedder !== null;
  }

  /**
   * Loads the stored vectors of the current embedder into the index while requests are answered:
   * a slice of about `sliceMs` an event-loop turn, starting on the next turn. With `since`, the
   * number a snapshot loaded into the index was saved at (Store.vectorSeq), only what changed after
   * it is read: the vectors removed since are taken out, then the entries whose vector or partition
   * was written since are put in (or taken out, if they are no longer searched).
   *
   * Until it is done, semantic checks are answered as misses (`semantic_checked: false`); exact
   * checks and stores are served as ever, and an entry deleted meanwhile is not put back. A
   * partition whose graph is being built (`HybridIndex`) gets the rest of its vectors once the
   * graph serves, not all of them in its exact copy first. A read that fails is tried again each
   * second (`onError` is told). `beforeReady` runs once every vector is in, before semantic checks
   * search the index. Returns how many vectors were put in; stops early, still not ready, when
   * `signal` aborts.
   */
  async loadIndex(since = 0, opts: LoadOptions = {}): Promise<number> {
    const embedder = this.deps.embedder;
    if (!embedder) return 0;
    const { index, store } = this.deps;
    const { signal, batch = 250, sliceMs = 2 } = opts;
    const changed = since > 0 ? store.changedVectors?.bind(store) : undefined;
    const removals = since > 0 ? store.removedVectors?.bind(store) : undefined;
    if (since > 0 && !opts.fromChanges && (!changed || !removals)) throw new Error('this store cannot bring an index snapshot up to date');
    const removed = new Set<number>();
    this.loading = removed;
    let loaded = 0;
    const slice = new Slice(sliceMs);
    // Lets requests through: true once stopped.
    const pause = async (): Promise<boolean> => {
      await slice.pause();
      return signal?.aborted === true;
    };
    // A read, tried again each second while the store does not answer; null once stopped.
    const read = async <T>(rows: () => Promise<T[]>): Promise<T[] | null> => {
      for (;;) {
        try {
          return await rows();
        } catch (err) {
          opts.onError?.(err);
          await delay(1000, undefined, { signal }).catch(() => undefined);
          if (await pause()) return null;
        }
      }
    };
    if (await pause()) return loaded;
    for (let after = since; removals && !opts.fromChanges;) {
      const rows = await read(() => removals(after, batch));
      if (rows === null) return loaded;
      if (rows.length === 0) break;
      for (const r of rows) {
        after = r.seq;
        index.remove(partitionOf(r.accountId, r.contextHash), r.id);
        if (slice.used && (await pause())) return loaded;
      }
    }
    for (let after = since; !opts.fromChanges;) {
      const rows = await read<ChangedVector | VectorRow>(() => (changed ? changed(after, batch) : store.scanVectors(after, batch)));
      if (rows === null) return loaded;
      if (rows.length === 0) break;
      const nowIso = isoAt(this.now());
      for (const r of rows) {
        after = 'seq' in r ? r.seq : r.id;
        const searched = r.vector !== null && ofEmbedder(r.embedderId, embedder) && (r.expiresAt === null || r.expiresAt > nowIso);
        // A full load skips the rest; an update takes out what the snapshot may hold of them.
        if (!searched && !changed) continue;
        const partition = partitionOf(r.accountId, r.contextHash);
        if (index.stateOf?.(partition) === 'promoting') {
          await index.promoted?.();
          if (await pause()) return loaded;
        }
        if (removed.has(r.id)) continue;
        if (r.vector === null || !searched) index.remove(partition, r.id);
        else {
          index.add(partition, r.id, r.vector);
          loaded++;
        }
        if (slice.used && (await pause())) return loaded;
      }
    }
    await opts.beforeReady?.();
    await index.promoted?.();
    if (signal?.aborted) return loaded;
    this.loading = null;
    return loaded;
  }

  /** Whether the embedder embeds: false from a failure until it embeds again. */
  get embedderAvailable(): boolean {
    return !this.embedderDown;
  }

  private embedded(): void {
    if (!this.embedderDown) return;
    this.embedderDown = false;
    const pending = this.storedPending;
    this.storedPending = false;
    this.deps.onEmbedderBack?.(pending);
  }

  /**
   * Embeds one short text to learn whether an embedder that failed embeds again, with no request
   * to do it: true when it does (and what follows its return is set off, as on any embedding).
   */
  async probeEmbedder(): Promise<boolean> {
    const embedder = this.deps.embedder;
    if (!embedder) return false;
    try {
      await embedder.embed(['Is the embedder back?']);
    } catch (err) {
      this.embedderFailed(err);
      return false;
    }
    this.embedded();
    return true;
  }

  /**
   * Notes an entry that another node stored without its vector (its embedder failing): true when
   * this node's embedder embeds, so that a `reembed` now takes it; else it is taken by the one that
   * follows once the embedder embeds again (`onEmbedderBack` with `pending`).
   */
  notePending(): boolean {
    if (!this.embedderDown) return true;
    this.storedPending = true;
    return false;
  }

  /**
   * Whether `err` says the embedder cannot embed now (`EmbedderUnavailableError`); notes it. A store
   * that is unavailable too (its error is also marked `unavailable`) is no embedder failure: it is
   * answered 503 as anywhere else.
   */
  private embedderFailed(err: unknown): boolean {
    if (!(err instanceof EmbedderUnavailableError)) return false;
    if (!this.embedderDown) {
      this.embedderDown = true;
      this.deps.onEmbedderDown?.(err);
    }
    return true;
  }

  /** Whether semantic checks search the index: false while `loadIndex` is at work. */
  get indexReady(): boolean {
    return this.loading === null;
  }

  /** Takes an entry out of the index, and keeps a load under way from putting it back. */
  private unindex(partition: string, id: number): void {
    this.deps.index.remove(partition, id);
    this.loading?.add(id);
  }

  /**
   * Makes again, in the background, the stored vectors of this embedder that an older form of
   * their texts was embedded in (`TEXT_FORM`): entries stored before acronyms were written out
   * and wrappers taken off are searched with their old vectors until then. Entries are read in
   * id order, `batch` at a time, embedded in the workers (at their low priority) and written only
   * where not stored again meanwhile; each is put in the index as it is written. Stops early when
   * `signal` aborts. Returns how many vectors were written.
   */
  async reembed(opts: { batch?: number; signal?: AbortSignal } = {}): Promise<number> {
    const embedder = this.deps.embedder;
    if (!embedder) return 0;
    const current = vectorId(embedder);
    // Small batches: a check's own texts wait for the workers behind at most one batch.
    const batch = opts.batch ?? 8;
    let after = 0;
    let written = 0;
    while (!opts.signal?.aborted) {
      // Ids only: a start with nothing to make again reads no vector.
      const stale = await this.deps.store.staleVectorIds(current, embedder.id, formPrefix(embedder), after, 1000);
      if (stale.length === 0) break;
      after = stale[stale.length - 1] as number;
      for (let i = 0; i < stale.length && !opts.signal?.aborted; i += batch) {
        const nowIso = isoAt(this.now());
        const entries = (await this.deps.store.getEntries(stale.slice(i, i + batch))).filter(
          (e) =>
            e.embedderId !== null &&
            e.embedderId !== current &&
            ofEmbedder(e.embedderId, embedder) &&
            (e.expiresAt === null || e.expiresAt > nowIso),
        );
        let made: Float32Array[][];
        try {
          made = await Promise.all(entries.map((e) => embedTurns(embedder, e, e.accountId)));
        } catch (err) {
          // The embedder cannot embed now: the rest is taken once it can again (`onEmbedderBack`).
          if (!this.embedderFailed(err)) throw err;
          this.storedPending = true;
          return written;
        }
        // Each update with the partition its entry goes in once written.
        const updates: (VectorUpdate & { partition: string })[] = [];
        entries.forEach((e, k) => {
          const [vector, prefixVector] = made[k] as Float32Array[];
          if (!vector) return;
          const partition = partitionOf(e.accountId, e.contextHash);
          updates.push({
            id: e.id,
            from: e.embedderId as string,
            embedderId: current,
            vector,
            prefixVector: prefixVector ?? null,
            partition,
          });
        });
        const done = new Set(await this.deps.store.replaceVectors(updates));
        for (const u of updates) if (done.has(u.id)) this.deps.index.add(u.partition, u.id, u.vector);
        written += done.size;
      }
    }
    return written;
  }

  /**
   * Looks a conversation up. An exact hit from a store that answers in process (SQLite) is
   * returned without a promise; everything else resolves later.
   */
  check(account: Account, input: CheckInput): CheckResult | Promise<CheckResult> {
    const result = this.checkNow(account, input);
    // An exact hit answered in process is returned as it is, without a promise.
    return result instanceof Promise ? this.track(result) : result;
  }

  private checkNow(account: Account, input: CheckInput): CheckResult | Promise<CheckResult> {
    const t0 = performance.now();
    const types = input.cacheTypes;
    const exactChecked = types === undefined || types.includes('exact');
    const hash = promptHash(input.messages);
    const nowIso = isoAt(this.now());
    if (!exactChecked) return this.afterExact(account, input, hash, nowIso, t0, false);
    const store = this.deps.store;
    const key = entryKey(hash, input.namespace);
    if (store.getEntryByHashSync === undefined) {
      return store.getEntryByHash(account.id, key).then((entry) => this.exactOrNext(account, input, entry, hash, nowIso, t0));
    }
    return this.exactOrNext(account, input, store.getEntryByHashSync(account.id, key), hash, nowIso, t0);
  }

  /** The exact hit if `entry` is one, or the rest of the check. */
  private exactOrNext(
    account: Account,
    input: CheckInput,
    entry: EntryHead | null,
    hash: string,
    nowIso: string,
    t0: number,
  ): CheckResult | Promise<CheckResult> {
    if (entry !== null && usable(entry, nowIso, input.model) && this.sameNamespace(entry, input)) {
      return this.hit(account, entry, 'exact', null, t0);
    }
    return this.afterExact(account, input, hash, nowIso, t0, true);
  }

  /**
   * Whether an entry found under the request's key was stored in the request's namespace. Keys
   * include the namespace, but entries stored before they did were keyed by the prompt hash
   * alone whatever their namespace; the context hash says which. A namespace found to match is
   * remembered with the entry (cached entries are shared objects, and one stored again is a new
   * object), so repeated hits hash nothing.
   */
  private sameNamespace(entry: EntryHead, input: CheckInput): boolean {
    const namespace = input.namespace ?? '';
    if (this.matchedNamespace.get(entry) === namespace) return true;
    if (entry.contextHash !== contextHashOf(input.messages, namespace)) return false;
    this.matchedNamespace.set(entry, namespace);
    return true;
  }

  /** The semantic search (when asked for and enabled), then the miss. */
  private async afterExact(
    account: Account,
    input: CheckInput,
    hash: string,
    nowIso: string,
    t0: number,
    exactChecked: boolean,
  ): Promise<CheckResult> {
    const types = input.cacheTypes;
    let semanticChecked = (types === undefined || types.includes('semantic')) && this.deps.embedder !== null && this.loading === null;
    let closest = 0;
    if (semanticChecked) {
      const threshold = input.similarityThreshold ?? account.defaultThreshold ?? DEFAULT_THRESHOLD;
      const key = semanticKey(input.messages, input.namespace ?? '');
      let found: { entry: Entry; score: number } | null = null;
      try {
        found = await this.semanticSearch(account, key, nowIso, input.model);
      } catch (err) {
        // The embedder cannot embed now: a miss that says the semantic cache was not searched,
        // as the spec's field has it, not an error. The client calls its LLM as on any miss.
        if (!this.embedderFailed(err)) throw err;
        semanticChecked = false;
      }
      if (found) {
        closest = found.score;
        // The score as shown decides, so a hit never shows a score below the threshold it met.
        if (shownScore(found.score) >= threshold) return this.hit(account, found.entry, 'semantic', found.score, t0);
      }
    }

    const lookupTimeMs = round3(performance.now() - t0);
    this.deps.usage.count(account.id, { requests: 1, lookupMsTotal: lookupTimeMs });
    return {
      cacheHit: false,
      promptHash: hash,
      lookupTimeMs,
      searchResults: { exactChecked, semanticChecked, closestMatchScore: shownScore(closest) },
    };
  }

  private async semanticSearch(
    account: Account,
    key: SemanticKey,
    nowIso: string,
    model: string | undefined,
  ): Promise<{ entry: Entry; score: number } | null> {
    const embedder = this.deps.embedder as Embedder;
    const [vector, prefixVector] = await embedTurns(embedder, key, account.id);
    this.embedded();
    await this.turns.next();
    if (!vector) return null;
    const partition = partitionOf(account.id, key.contextHash);
    let neighbours = this.deps.index.search(partition, vector, CANDIDATES);
    if (neighbours.length === 0) return null;
    // The nearest usable candidate by cosine is the one answer that could be served; the scorer
    // then decides whether it is close enough. (Re-ranking the candidates by the scorer picks a
    // wrong neighbour more often on crowded data: measured in docs/quality.md.) The two nearest are
    // read first, as the nearest is nearly always usable and the next is its runner-up; the others
    // only when needed.
    const query: Side = { text: key.queryText, vector };
    const earlier: Side | null = key.prefixText && prefixVector ? { text: key.prefixText, vector: prefixVector } : null;
    // Whether an entry is another request however near ("sort ascending" for "sort descending",
    // or after "a trip for 20 people" for one "for 2"): passed over, and no rival to the one served.
    const verdicts = new Map<number, boolean>();
    const differs = (e: Entry): boolean => {
      let d = verdicts.get(e.id);
      if (d === undefined) verdicts.set(e.id, (d = this.differs(query, earlier, key, e)));
      return d;
    };
    const entries = new Map<number, Entry>();
    const read = async (ns: readonly Neighbour[]) => {
      const ids = ns.map((n) => n.id).filter((id) => !entries.has(id));
      if (ids.length > 0) for (const e of await this.deps.store.getEntries(ids)) entries.set(e.id, e);
      for (const id of ids) if (!entries.has(id)) entries.set(id, MISSING);
    };
    // Whether a candidate can be served: 'ok'; 'other request' when it is the same conversation but
    // for earlier replies, or another request; 'unusable' when it is expired, another model's,
    // another scope's or after other earlier turns.
    let passedOver = 0;
    const verdict = (e: Entry | undefined): 'ok' | 'other request' | 'unusable' => {
      if (
        e === undefined ||
        e === MISSING ||
        !usable(e, nowIso, model) ||
        e.accountId !== account.id ||
        // An entry stored again in another scope keeps its id and leaves it behind in the old
        // partition of the index; only its current scope counts.
        e.contextHash !== key.contextHash ||
        !ofEmbedder(e.embedderId, embedder) ||
        e.vector === null ||
        !this.samePrefix(key, prefixVector ?? null, e)
      ) {
        return 'unusable';
      }
      if (!this.sameReplies(key, e) || differs(e)) {
        passedOver++;
        return 'other request';
      }
      return 'ok';
    };
    await read(neighbours.slice(0, 2));
    let found: { entry: Entry & { vector: Float32Array }; cosine: number } | null = null;
    // When the nearest are unusable (expired and not yet swept, stored for another model, after
    // other earlier turns), the search widens, so they cannot hide a usable entry behind them.
    // Other requests do not widen it: a follow-up after a fresh reply differs from every stored
    // conversation, and reading hundreds of them would find none; nor does a neighbourhood of
    // requests that differ from the query (the same template with other numbers) once as many of
    // them as a first search returns were passed over.
    let hidden = false;
    const seen = new Set<number>();
    // How many entries the last search asked for.
    let searched = CANDIDATES;
    for (let k = CANDIDATES; ; searched = k) {
      const rest = neighbours.filter((n) => !seen.has(n.id));
      for (let i = 0; i < rest.length; i++) {
        const n = rest[i] as Neighbour;
        seen.add(n.id);
        // Read as needed: the others of this search together, the first time one is.
        if (!entries.has(n.id)) await read(rest.slice(i));
        const e = entries.get(n.id);
        const v = verdict(e);
        if (v === 'ok') {
          found = { entry: e as Entry & { vector: Float32Array }, cosine: n.cosine };
          break;
        }
        if (v === 'unusable') hidden = true;
      }
      if (found || !hidden || passedOver >= CANDIDATES || neighbours.length < k || k >= MAX_CANDIDATES) break;
      k = Math.min(k * 8, MAX_CANDIDATES);
      neighbours = this.deps.index.search(partition, vector, k);
    }
    if (!found) return null;
    const { entry, cosine } = found;
    // A candidate far nearer than any other question is more likely the same question; one among
    // several equally near, less. The runner-up is the nearest other entry that is not another
    // request by the scorer's checks, before or after the one served.
    // When every other entry of the search is another request (methods of one class, the same
    // template with other numbers), the search widens once for it: taken for none at all, the first
    // stage would decide alone, as if the account held no other question.
    let runnerUp: number | undefined;
    const looked = new Set<number>();
    for (let wide = false; runnerUp === undefined; wide = true) {
      for (let i = 0; i < neighbours.length && runnerUp === undefined; i++) {
        const n = neighbours[i] as Neighbour;
        if (looked.has(n.id)) continue;
        looked.add(n.id);
        if (!mayRival(n, entry.id, cosine)) continue;
        if (!entries.has(n.id)) await read(neighbours.slice(i, i + CANDIDATES));
        const e = entries.get(n.id) as Entry;
        if (e === MISSING || !differs(e)) runnerUp = n.cosine;
      }
      if (runnerUp !== undefined || wide || neighbours.length < searched || searched >= RUNNER_UP_CANDIDATES) break;
      searched = RUNNER_UP_CANDIDATES;
      neighbours = this.deps.index.search(partition, vector, searched);
    }
    const candidate = { text: entry.queryText, vector: entry.vector, scope: entry.accountId };
    const score =
      (await this.followUpScore(account, key, entry, candidate, cosine, runnerUp)) ??
      this.deps.scorer.score(query, candidate, cosine, runnerUp);
    const around = await this.aroundScore(account, query, candidate);
    return { entry, score: Math.min(score, around, this.contextScore(key, prefixVector ?? null, entry)) };
  }

  /**
   * When the query and the candidate share a long passage (a document, a template, pasted code)
   * and say something different around it, how surely that part asks the same: the scorer's
   * score for it alone (0 when one side says nothing more). 1 otherwise.
   */
  private async aroundScore(account: Account, query: Side, candidate: Side): Promise<number> {
    if (!this.deps.scorer.around) return 1;
    const rest = this.deps.scorer.around(query, candidate);
    if (rest === null) return 1;
    if (rest.a === '' || rest.b === '') return 0;
    const [va, vb] = await embedText(this.deps.embedder as Embedder, [rest.a, rest.b], account.id);
    await this.turns.next();
    if (!va || !vb) return 0;
    return this.deps.scorer.score({ text: rest.a, vector: va }, { text: rest.b, vector: vb, scope: candidate.scope }, dot(va, vb));
  }

  /**
   * A follow-up typed as keywords or an instruction ("its completion date", "inventor of the
   * press") after earlier turns that differ in their words from the entry's: the score of the
   * query's final message read after the entry's own previous user turn, so that only the
   * follow-ups differ. Read after its own, both lines differ, and the hit decision, fitted on pairs
   * of whole questions, reads a question and its keyword form as different requests. Whether the
   * earlier turns ask the same is scored apart (`contextScore`). Null when the earlier turns are
   * the same, or both follow-ups are put as questions, which are read with their own context.
   */
  private async followUpScore(
    account: Account,
    key: SemanticKey,
    entry: Entry & { vector: Float32Array },
    candidate: Side,
    cosine: number,
    runnerUp: number | undefined,
  ): Promise<number | null> {
    if (key.previous === null || key.prefixHash === entry.prefixHash) return null;
    const stored = followUpOf(entry.messages);
    if (stored.previous === null || stored.previous === key.previous) return null;
    if (putAsQuestion(key.final) && putAsQuestion(stored.final)) return null;
    const text = `${stored.previous}\n${key.final}`;
    const [vector] = await embedText(this.deps.embedder as Embedder, [text], account.id);
    await this.turns.next();
    if (!vector) return null;
    const c = dot(vector, entry.vector);
    // The runner-up as much further off as from the query itself: the neighbourhood is the query's.
    return this.deps.scorer.score({ text, vector }, candidate, c, runnerUp === undefined ? undefined : runnerUp + c - cosine);
  }

  /**
   * How surely the earlier user turns ask the same as the entry's: 1 when they are the same, else
   * the hit decision's own score for them. The same follow-up ("when was it founded?") after
   * "the functions of the United Nations" and after "the functions of NATO" embeds nearly alike
   * with its context; the first questions alone tell them apart.
   */
  private contextScore(key: SemanticKey, prefixVector: Float32Array | null, e: Entry): number {
    if (key.prefixText === '' || key.prefixHash === e.prefixHash || key.prefixText === e.prefixText) return 1;
    if (!prefixVector || !e.prefixVector) return 0;
    return this.deps.scorer.score(
      { text: key.prefixText, vector: prefixVector },
      { text: e.prefixText, vector: e.prefixVector, scope: e.accountId },
      dot(prefixVector, e.prefixVector),
    );
  }

  /**
   * Whether an entry is another request by the scorer's checks, in what the query asks (read with
   * the turn before it) or in the earlier user turns.
   */
  private differs(query: Side, earlier: Side | null, key: SemanticKey, e: Entry): boolean {
    const scorer = this.deps.scorer;
    if (!scorer.differs || e.vector === null) return false;
    if (scorer.differs(query, { text: e.queryText, vector: e.vector, scope: e.accountId }) !== null) return true;
    return (
      earlier !== null &&
      e.prefixVector !== null &&
      key.prefixHash !== e.prefixHash &&
      scorer.differs(earlier, { text: e.prefixText, vector: e.prefixVector, scope: e.accountId }) !== null
    );
  }

  /** Whether the earlier replies are the same: "multiply it by 3" after "7" and after "4" differ. */
  private sameReplies(key: SemanticKey, e: Entry): boolean {
    if (key.prefixHash === e.prefixHash) return true;
    return sameReplies(key.replies, repliesOf(e.messages));
  }

  private samePrefix(key: SemanticKey, prefixVector: Float32Array | null, e: Entry): boolean {
    if (key.prefixHash === e.prefixHash) return true;
    if (!prefixVector || !e.prefixVector) return key.prefixText === e.prefixText && key.prefixText !== '';
    return dot(prefixVector, e.prefixVector) >= this.contextThreshold;
  }

  private hit(account: Account, entry: EntryHead, type: CacheType, score: number | null, t0: number): Hit {
    const lookupTimeMs = round3(performance.now() - t0);
    const uses = this.deps.usage.hit(entry.id, entry.createdAt, lookupTimeMs);
    this.deps.usage.count(account.id, {
      requests: 1,
      exactHits: type === 'exact' ? 1 : 0,
      semanticHits: type === 'semantic' ? 1 : 0,
      lookupMsTotal: lookupTimeMs,
      tokensSaved: entry.tokens,
      costSaved: this.deps.pricing.cost(entry.model, entry.tokens),
    });
    return {
      cacheHit: true,
      answer: entry.answer,
      cacheType: type,
      lookupTimeMs,
      tokensSaved: entry.tokens,
      createdAt: entry.createdAt,
      similarityScore: score === null ? null : shownScore(score),
      metadata: { model: entry.model, originalTokens: entry.tokens, usageCount: entry.usageCount + uses },
      entryId: entry.publicId,
    };
  }

  store(account: Account, input: StoreInput): Promise<StoreResult> {
    return this.track(this.storeNow(account, input));
  }

  private async storeNow(account: Account, input: StoreInput): Promise<StoreResult> {
    const t0 = performance.now();
    const hash = promptHash(input.messages);
    const exactHash = entryKey(hash, input.namespace);
    const messages = input.messages.map((m) => ({ role: m.role, content: m.content }));
    const key = semanticKey(input.messages, input.namespace ?? '');
    const embedder = this.deps.embedder;
    let vector: Float32Array | null = null;
    let prefixVector: Float32Array | null = null;
    let pending = false;
    if (embedder) {
      // Embedding is the expensive part: a store that cannot fit is refused before it.
      await this.refuseWhatCannotFit(account, exactHash, messages, input.answer);
      try {
        const vs = await embedTurns(embedder, key, account.id);
        this.embedded();
        vector = vs[0] ?? null;
        prefixVector = vs[1] ?? null;
      } catch (err) {
        // The embedder cannot embed now: stored for exact hits, and embedded once it can.
        if (!this.embedderFailed(err)) throw err;
        pending = true;
        this.storedPending = true;
      }
      await this.turns.next();
    }
    const nowMs = this.now();
    const createdAt = new Date(nowMs).toISOString();
    const ttl = input.ttlSeconds ?? account.entryTtlSeconds ?? this.deps.entryTtlSeconds;
    const entry = await this.putWithinLimits(account, {
      accountId: account.id,
      exactHash,
      contextHash: key.contextHash,
      namespace: input.namespace || null,
      prefixHash: key.prefixHash,
      messages,
      queryText: key.queryText,
      prefixText: key.prefixText,
      answer: input.answer,
      model: input.model,
      tokens: input.tokensUsed ?? estimateTokens(input.answer),
      embedderId: embedder ? (pending ? pendingId(embedder) : vectorId(embedder)) : null,
      vector,
      prefixVector,
      createdAt,
      expiresAt: ttl > 0 ? new Date(nowMs + ttl * 1000).toISOString() : null,
    });
    // A new answer starts its count anew; the same answer stored again keeps its version and hits.
    if (entry.createdAt === createdAt) this.deps.usage.forgetHits(entry.id);
    if (vector) this.deps.index.add(partitionOf(account.id, key.contextHash), entry.id, vector);
    this.deps.usage.count(account.id, { stores: 1 });
    return {
      stored: true as const,
      cacheTypesStored: vector ? ['exact', 'semantic'] : ['exact'],
      storageTimeMs: round3(performance.now() - t0),
      entryId: entry.publicId,
      promptHash: hash,
    };
  }

  /**
   * Throws the `StorageQuotaError` the write would, before anything is embedded, when the entry
   * clearly cannot fit: a new conversation of the account (not one stored again, which counts only
   * what it changes) past a limit, with no expired entries whose removal makes room. What may fit
   * goes on to the write, whose check in its own transaction decides, so that stores at the same
   * moment, on any node, cannot pass a limit together. One read of the account's storage counts;
   * more only for an account at its limit.
   */
  private async refuseWhatCannotFit(account: Account, exactHash: string, messages: Message[], answer: string): Promise<void> {
    const limits = this.deps.storageLimits?.(account) ?? null;
    if (!limited(limits)) return;
    const adding: StorageUse = { entries: 1, bytes: storedBytes(JSON.stringify(messages), answer) };
    const refusal = async () => {
      const use = await this.deps.store.getStorage(account.id);
      return storageRefusal(limits, { entries: use.entries + 1, bytes: use.bytes + adding.bytes }, adding);
    };
    let refused = await refusal();
    if (refused === null || (await this.deps.store.getEntryByHash(account.id, exactHash)) !== null) return;
    if ((await this.sweepExpired(1000, account.id)) > 0) refused = await refusal();
    if (refused !== null) throw refused;
  }

  /**
   * Writes an entry, refused (`StorageQuotaError`) when it would take the account past a storage
   * limit of its plan. Expired entries count until they are removed (by the sweep, every minute):
   * a store that finds no room removes the account's expired entries at once and is tried again.
   */
  private async putWithinLimits(account: Account, entry: NewEntry): Promise<Entry> {
    const limits = this.deps.storageLimits?.(account) ?? null;
    try {
      return await this.deps.store.putEntry(entry, limits);
    } catch (err) {
      if (!(err instanceof StorageQuotaError)) throw err;
      if ((await this.sweepExpired(1000, account.id)) === 0) throw err;
      return this.deps.store.putEntry(entry, limits);
    }
  }

  /** What the account keeps, and the limits of its plan (null: none). */
  async storage(account: Account): Promise<StorageReport> {
    const use = await this.deps.store.getStorage(account.id);
    const limits = this.deps.storageLimits?.(account);
    return { ...use, maxEntries: limits?.maxEntries ?? null, maxStoredBytes: limits?.maxStoredBytes ?? null };
  }

  /** Notes that an API key was used (written in the next batch). */
  keyUsed(keyId: string): void {
    this.deps.usage.keyUsed(keyId);
  }

  /** Hits of an entry counted on this node and not yet written. */
  pendingHits(entryId: number): Readonly<HitDelta> | undefined {
    return this.deps.usage.pendingHits(entryId);
  }

  /** Writes batched counters now. */
  flush(): Promise<void> {
    return this.deps.usage.flush();
  }

  /** Deletes an entry of the account by its public id (`entry_id`); false when it has none such. */
  async deleteEntry(account: Account, publicId: number): Promise<boolean> {
    const gone = await this.deps.store.deleteEntry(account.id, publicId);
    if (!gone) return false;
    this.unindex(partitionOf(account.id, gone.contextHash), gone.id);
    return true;
  }

  /**
   * Drops from the index the vectors of accounts that are gone (`reprise accounts delete`; on the
   * embedded store, run by another process, which has no way to reach this index). Their entries
   * are gone, so they are never served; kept, they would take memory for good and be saved in the
   * index snapshot at shutdown. Returns how many vectors were dropped.
   */
  async forgetDeletedAccounts(): Promise<number> {
    const index = this.deps.index;
    // Accounts held before the read: one made since (a store into it meanwhile) is not taken for gone.
    const held = new Set(index.partitions().map(accountOfPartition));
    if (held.size === 0) return 0;
    const live = new Set((await this.deps.store.listAccounts()).map((a) => a.id));
    const before = index.size;
    for (const partition of index.partitions()) {
      const account = accountOfPartition(partition);
      if (held.has(account) && !live.has(account)) index.drop(partition);
    }
    return before - index.size;
  }

  /**
   * Deletes every expired entry (of one account, with `accountId`) and drops it from the index,
   * then (for all accounts) the change log's old rows, in batches of `batch`, letting requests
   * through between batches. Returns how many entries.
   */
  async sweepExpired(batch = 1000, accountId?: string): Promise<number> {
    const store = this.deps.store;
    const nowIso = new Date(this.now()).toISOString();
    let deleted = 0;
    for (;;) {
      const gone = await store.deleteExpired(nowIso, batch, accountId);
      for (const e of gone) this.unindex(partitionOf(e.accountId, e.contextHash), e.id);
      deleted += gone.length;
      if (gone.length < batch) break;
      await setImmediate();
    }
    if (accountId === undefined && store.pruneChanges) while ((await store.pruneChanges(batch)) >= batch) await setImmediate();
    return deleted;
  }

  /**
   * The account's usage in the period and, with a granularity, the same usage per hour or per UTC
   * day, oldest first (only periods with activity are listed). Both come from one read, so the
   * series adds up to the figures even while requests are being counted.
   */
  async usage(account: Account, from?: string, to?: string, granularity?: 'hour' | 'day'): Promise<UsageReport> {
    const buckets = await this.deps.usage.read(account.id, from, to);
    return { ...summarise(buckets), series: granularity === undefined ? undefined : seriesOf(buckets, granularity) };
  }
}

/** What an account keeps (`StorageUse`) and its plan's limits; null: none. */
export interface StorageReport extends StorageUse {
  maxEntries: number | null;
  maxStoredBytes: number | null;
}

export interface UsagePoint extends UsageSummary {
  start: string;
}

export interface UsageReport extends UsageSummary {
  series: UsagePoint[] | undefined;
}

function seriesOf(buckets: readonly UsageBucket[], granularity: 'hour' | 'day'): UsagePoint[] {
  const byPeriod = new Map<string, UsageDelta>();
  for (const b of buckets) {
    const start = granularity === 'hour' ? b.bucket : `${b.bucket.slice(0, 10)}T00:00:00.000Z`;
    let d = byPeriod.get(start);
    if (!d) {
      d = emptyDelta();
      byPeriod.set(start, d);
    }
    addDelta(d, b);
  }
  return [...byPeriod].map(([start, d]) => ({ start, ...summarise([d]) }));
}

function summarise(buckets: readonly UsageDelta[]): UsageSummary {
  const t = emptyDelta();
  for (const b of buckets) addDelta(t, b);
  const hits = t.exactHits + t.semanticHits;
  return {
    totalRequests: t.requests,
    cacheHits: hits,
    cacheMisses: t.requests - hits,
    hitRatePercentage: t.requests === 0 ? 0 : Math.round((hits / t.requests) * 10_000) / 100,
    exactHits: t.exactHits,
    semanticHits: t.semanticHits,
    averageLookupTimeMs: t.requests === 0 ? 0 : round3(t.lookupMsTotal / t.requests),
    tokensSaved: t.tokensSaved,
    estimatedCostSavings: formatUsd(t.costSaved),
    estimatedCostSavingsUsd: Math.round(t.costSaved * 1e6) / 1e6,
    stores: t.stores,
  };
}
