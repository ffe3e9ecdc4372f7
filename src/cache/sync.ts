import pg from 'pg';
import type { Embedder } from '../embedding/interface.ts';
import type { VectorRow } from '../store/interface.ts';
import { CHANGES_CHANNEL, type EntryChange, type PostgresStore } from '../store/postgres.ts';
import type { VectorIndex } from '../vector/interface.ts';
import { partitionOf } from './context.ts';
import { ofEmbedder } from './text-form.ts';

export interface SyncOptions {
  /** Poll for changes this often even without a notification (and after reconnecting). */
  pollMs?: number;
  onError?: (err: unknown) => void;
}

/** How long a missing change sequence number is waited for before it is taken as rolled back. */
const GAP_WAIT_MS = 10_000;
/** A jump of more numbers than this at once is not waited for (no writer holds that many open). */
const MAX_GAPS = 10_000;
/**
 * Changes before the latest at start-up that are read again: a transaction that took its
 * sequence number before the latest may commit after the index was loaded.
 */
const START_LOOKBACK = 1000;

/**
 * Keeps this node's vector index in step with PostgreSQL: every write appends to
 * `entry_changes` and NOTIFYs; this node LISTENs, and also polls, applying changes after the
 * last sequence up to which it has seen every number (see `advance`). After a lost connection
 * it reconnects and catches up from that sequence, so no insert, delete or expiry is missed.
 */
export class IndexSync {
  /** Every change up to this sequence number has been applied (or never committed). */
  private lastSeq = 0;
  /** Changes applied beyond `lastSeq`, past a number not seen yet. */
  private readonly appliedAbove = new Set<number>();
  /** The highest sequence number applied. */
  private highest = 0;
  /** Sequence numbers not seen yet, with when they were first missed. */
  private readonly gaps = new Map<number, number>();
  private client: pg.Client | null = null;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;

  constructor(
    private readonly store: PostgresStore,
    private readonly index: VectorIndex,
    private readonly embedder: Embedder,
    private readonly url: string,
    private readonly opts: SyncOptions = {},
  ) {}

  /** Call before loading the index: changes from here on are (re)applied, idempotently. */
  async mark(): Promise<void> {
    this.lastSeq = Math.max(0, (await this.store.lastChange()) - START_LOOKBACK);
  }

  async start(): Promise<void> {
    this.timer = setInterval(() => this.poke(), this.opts.pollMs ?? 1000);
    this.timer.unref();
    await this.listen().catch((err: unknown) => this.opts.onError?.(err));
    this.poke();
  }

  private async listen(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 3000 });
    client.on('error', (err) => {
      this.opts.onError?.(err);
      this.client = null;
      client.end().catch(() => undefined);
    });
    client.on('end', () => {
      if (this.client === client) this.client = null;
    });
    client.on('notification', () => this.poke());
    await client.connect();
    await client.query(`LISTEN ${CHANGES_CHANNEL}`);
    this.client = client;
  }

  /** Applies pending changes now (coalescing concurrent requests). */
  poke(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.catchUp()
      .catch((err: unknown) => this.opts.onError?.(err))
      .finally(() => {
        this.running = null;
        if (!this.client && !this.stopped) this.listen().catch((err: unknown) => this.opts.onError?.(err));
        if (this.again) {
          this.again = false;
          this.poke();
        }
      });
  }

  private async catchUp(): Promise<void> {
    // Numbers missed before may have committed since.
    if (this.gaps.size > 0) this.apply(await this.store.changesAt([...this.gaps.keys()]));
    for (;;) {
      const changes = await this.store.changesSince(Math.max(this.lastSeq, this.highest), 1000);
      if (changes.length === 0) break;
      this.apply(changes);
    }
    this.advance(Date.now());
  }

  private apply(changes: readonly (EntryChange & { vector: VectorRow | null })[]): void {
    const now = Date.now();
    const nowIso = new Date(now).toISOString();
    for (const c of changes) {
      if (c.seq <= this.lastSeq || this.appliedAbove.has(c.seq)) continue;
      const partition = partitionOf(c.accountId, c.contextHash);
      if (c.op === 'delete') this.index.remove(partition, c.entryId);
      else if (c.vector && ofEmbedder(c.vector.embedderId, this.embedder) && (c.vector.expiresAt === null || c.vector.expiresAt > nowIso)) {
        this.index.add(partition, c.entryId, c.vector.vector);
      }
      this.appliedAbove.add(c.seq);
      this.gaps.delete(c.seq);
      // Numbers skipped on the way here are changes not committed yet, or never to be.
      const from = Math.max(this.lastSeq, this.highest) + 1;
      if (c.seq - from <= MAX_GAPS) for (let s = from; s < c.seq; s++) this.gaps.set(s, now);
      this.highest = Math.max(this.highest, c.seq);
    }
  }

  /**
   * Moves `lastSeq` over every number applied since, up to the first one missing. Sequence
   * numbers are taken in one order and committed in another: a change can become visible after
   * a later one, so a missing number is looked for again (changes after it are applied meanwhile)
   * until `GAP_WAIT_MS` have passed since it was first missed; then it is taken to be a
   * transaction that never committed.
   */
  private advance(now: number): void {
    for (let next = this.lastSeq + 1; next <= this.highest; next++) {
      if (!this.appliedAbove.delete(next)) {
        const since = this.gaps.get(next);
        if (since !== undefined && now - since < GAP_WAIT_MS) return;
        this.gaps.delete(next);
      }
      this.lastSeq = next;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await (this.running ?? Promise.resolve());
    await this.client?.end().catch(() => undefined);
  }
}
