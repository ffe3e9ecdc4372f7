import { hourBucket } from '../store/ids.ts';
import { isoAt } from '../util/time.ts';
import type { HitDelta, Store, UsageBucket, UsageDelta, UsageRow } from '../store/interface.ts';

export const emptyDelta = (): UsageDelta => ({
  requests: 0,
  exactHits: 0,
  semanticHits: 0,
  lookupMsTotal: 0,
  tokensSaved: 0,
  costSaved: 0,
  stores: 0,
});

/** A count that is not a finite number adds nothing: one such value would fail every batch. */
const finite = (x: number | undefined): number => (x !== undefined && Number.isFinite(x) ? x : 0);

export function addDelta(into: UsageDelta, d: Partial<UsageDelta>): void {
  into.requests += finite(d.requests);
  into.exactHits += finite(d.exactHits);
  into.semanticHits += finite(d.semanticHits);
  into.lookupMsTotal += finite(d.lookupMsTotal);
  into.tokensSaved += finite(d.tokensSaved);
  into.costSaved += finite(d.costSaved);
  into.stores += finite(d.stores);
}

/**
 * Counts usage and entry hits in memory and writes them to the store in batches (every
 * `flushMs` and on close), so the hot path makes no write per request. Reads merge the
 * unwritten counts in, so a reader on this node always sees its own requests; in a cluster,
 * another node's requests show once that node has written them (within `flushMs`).
 */
export class UsageRecorder {
  private usage = new Map<string, UsageRow>();
  private hits = new Map<number, HitDelta>();
  private lastUsed = new Map<string, string>();
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();
  /** The flush started by the timer, until it has settled. */
  private timed: Promise<void> | null = null;

  constructor(
    private readonly store: Store,
    private readonly flushMs = 1000,
    private readonly now: () => number = Date.now,
  ) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      // No second batch is queued behind one still being written (a store waiting for a database
      // locked by another process): what is counted meanwhile goes in the batch after it.
      if (this.timed) return;
      this.timed = this.flush()
        .catch(() => undefined)
        .finally(() => (this.timed = null));
    }, this.flushMs);
    this.timer.unref();
  }

  count(accountId: string, d: Partial<UsageDelta>): void {
    const bucket = hourBucket(this.now());
    const key = `${accountId}\u0000${bucket}`;
    let row = this.usage.get(key);
    if (!row) {
      row = { accountId, bucket, ...emptyDelta() };
      this.usage.set(key, row);
    }
    addDelta(row, d);
  }

  /** Counts a hit on the entry as stored at `createdAt`; returns its hits not yet written. */
  hit(entryId: number, createdAt: string, lookupMs: number): number {
    const at = isoAt(this.now());
    const h = this.hits.get(entryId);
    if (h && h.createdAt === createdAt) {
      h.count++;
      h.at = at;
      h.lookupMs += lookupMs;
      return h.count;
    }
    // The first hit, or one on an answer stored since the counted ones (those are dropped).
    if (h && h.createdAt > createdAt) return h.count;
    this.hits.set(entryId, { count: 1, at, lookupMs, createdAt });
    return 1;
  }

  /** Hits of an entry counted here and not yet written. */
  pendingHits(entryId: number): Readonly<HitDelta> | undefined {
    return this.hits.get(entryId);
  }

  /** Drops unwritten hits of an entry whose answer was just replaced. */
  forgetHits(entryId: number): void {
    this.hits.delete(entryId);
  }

  keyUsed(keyId: string): void {
    this.lastUsed.set(keyId, isoAt(this.now()));
  }

  /**
   * Buckets from the store with this node's unwritten counts added. A read takes its turn with
   * the writes of counts, so a batch on its way to the store is counted once: not in memory any
   * more, and not yet read back from the store, it would be missed.
   */
  read(accountId: string, from?: string, to?: string): Promise<UsageBucket[]> {
    const result = this.flushing.catch(() => undefined).then(() => this.readNow(accountId, from, to));
    this.flushing = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  private async readNow(accountId: string, from?: string, to?: string): Promise<UsageBucket[]> {
    const rows = await this.store.getUsage(accountId, { from, to });
    const byBucket = new Map(rows.map((r) => [r.bucket, { ...r }]));
    for (const row of this.usage.values()) {
      if (row.accountId !== accountId) continue;
      if ((from && row.bucket < from) || (to && row.bucket >= to)) continue;
      let b = byBucket.get(row.bucket);
      if (!b) {
        b = { bucket: row.bucket, ...emptyDelta() };
        byBucket.set(row.bucket, b);
      }
      addDelta(b, row);
    }
    return [...byBucket.values()].sort((a, b) => (a.bucket < b.bucket ? -1 : 1));
  }

  /** Writes what has been counted. On failure the counts are kept for the next try. */
  flush(): Promise<void> {
    const next = this.flushing.catch(() => undefined).then(() => this.flushNow());
    this.flushing = next;
    return next;
  }

  private async flushNow(): Promise<void> {
    const usage = this.usage;
    const hits = this.hits;
    const lastUsed = this.lastUsed;
    this.usage = new Map();
    this.hits = new Map();
    this.lastUsed = new Map();
    // The three writes go out in turn; a failure puts back what it and the writes after it did
    // not write, and nothing already committed (hits written are not counted again because the
    // keys' last-used times after them failed).
    let written = 0;
    try {
      if (usage.size > 0) await this.store.addUsage([...usage.values()]);
      written = 1;
      if (hits.size > 0) await this.store.recordHits(hits);
      written = 2;
      if (lastUsed.size > 0) await this.store.touchKeys(lastUsed);
    } catch (err) {
      if (written < 1) {
        for (const [k, row] of usage) {
          const cur = this.usage.get(k);
          if (cur) addDelta(cur, row);
          else this.usage.set(k, row);
        }
      }
      if (written < 2) for (const [id, h] of hits) this.mergeHit(id, h);
      for (const [id, at] of lastUsed) if (!this.lastUsed.has(id)) this.lastUsed.set(id, at);
      throw err;
    }
  }

  /** Puts back hits that could not be written (those on an answer replaced since are dropped). */
  private mergeHit(id: number, h: HitDelta): void {
    const cur = this.hits.get(id);
    if (cur && cur.createdAt === h.createdAt) {
      cur.count += h.count;
      cur.lookupMs += h.lookupMs;
    } else if (!cur || cur.createdAt < h.createdAt) this.hits.set(id, h);
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.flush();
  }
}
