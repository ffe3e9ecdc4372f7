import pg from 'pg';
import type { Embedder } from '../embedding/interface.ts';
import { CHANGES_CHANNEL, type ChangeRow, type PostgresStore } from '../store/postgres.ts';
import { openListener } from '../store/pg-listen.ts';
import type { VectorIndex } from '../vector/interface.ts';
import { Slice } from '../util/turns.ts';
import { partitionOf } from './context.ts';
import { ofEmbedder, pendingId } from './text-form.ts';

export interface SyncOptions {
  /** Poll for changes this often even without a notification (and after reconnecting). */
  pollMs?: number;
  /** How long a missing change number holds back the ones after it; default `GAP_WAIT_MS`. */
  gapWaitMs?: number;
  onError?: (err: unknown) => void;
  /** Called when a change is applied that committed after its number was given up on. */
  onLate?: (seq: number) => void;
  /** Called when another node stored an entry that its embedder could not embed (to embed once it can). */
  onPending?: () => void;
}

/**
 * How long a missing change sequence number holds back the numbers after it (they are applied
 * meanwhile, but the node does not move past it): a transaction that took its number and has
 * not committed yet. After that it is taken as rolled back, most likely, and still looked for
 * until `LATE_WAIT_MS`.
 */
const GAP_WAIT_MS = 10_000;
/**
 * How long a number given up on is still looked for: a commit that lands that late (a stalled
 * disk, a writer paused between its insert and its commit) is applied when it does.
 */
const LATE_WAIT_MS = 15 * 60_000;
/** How long applying changes holds the event loop before it lets requests through. */
const SLICE_MS = 5;
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
  /** Numbers below `lastSeq` given up on, with when they were first missed: looked for still. */
  private readonly late = new Map<number, number>();
  private client: pg.Client | null = null;
  /** The connection being opened, if any: one at a time, whatever the polls meanwhile. */
  private connecting: Promise<void> | null = null;
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

  /** Every change up to this sequence number has been applied, or given up on as never committed. */
  get appliedThrough(): number {
    return this.lastSeq;
  }

  /**
   * The change number an index snapshot saved now reflects: every change up to it is applied,
   * and none of the numbers given up on but still looked for (see `late`) is below it, so that a
   * start from the snapshot applies those too when they commit while the node is down.
   */
  get snapshotThrough(): number {
    let through = this.lastSeq;
    for (const seq of this.late.keys()) through = Math.min(through, seq - 1);
    return Math.max(0, through);
  }

  /** Call before loading the index: changes from here on are (re)applied, idempotently. */
  async mark(): Promise<void> {
    // Numbers below the oldest change kept were pruned a week after their changes: none is awaited.
    const { first, last } = await this.store.changeBounds();
    this.lastSeq = Math.max(0, last - START_LOOKBACK, first - 1);
  }

  /**
   * Call instead of `mark` when the index was loaded from a snapshot reflecting every change up to
   * `seq`: the changes after it are applied (and, as in `mark`, some before it again). `first` is
   * the oldest change kept (see `changeBounds`): the numbers below it were pruned, none is awaited
   * (awaited, they would hold the node below them, and a snapshot saved meanwhile would be taken
   * for one older than the change log).
   */
  markAt(seq: number, first: number): void {
    this.lastSeq = Math.max(0, seq - START_LOOKBACK, first - 1);
  }

  async start(): Promise<void> {
    this.timer = setInterval(() => this.poke(), this.opts.pollMs ?? 1000);
    this.timer.unref();
    await this.reconnect();
    this.poke();
  }

  /**
   * Opens the connection that hears changes, unless it is open or being opened. Each catch-up
   * without it asks for it; two opened at once would leave one listening for good, never closed.
   */
  private reconnect(): Promise<void> {
    if (this.stopped || this.client) return Promise.resolve();
    this.connecting ??= this.listen()
      .catch((err: unknown) => this.opts.onError?.(err))
      .finally(() => {
        this.connecting = null;
      });
    return this.connecting;
  }

  private async listen(): Promise<void> {
    // Only the connection in use is let go here: an error of one replaced since says nothing of it.
    const client = await openListener(this.url, CHANGES_CHANNEL, {
      lost: (c, err) => {
        if (err) this.opts.onError?.(err);
        if (this.client === c) this.client = null;
      },
      notified: () => this.poke(),
    });
    if (this.stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
  }

  /**
   * Resolves once the changes committed before the call are applied (as far as a catch-up gets:
   * one that fails, or a number still missing, is left to the next): the one under way, if any,
   * then one started after the call.
   */
  async caughtUp(): Promise<void> {
    this.poke();
    await this.running;
    this.poke();
    await this.running;
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
        void this.reconnect();
        if (this.again) {
          this.again = false;
          this.poke();
        }
      });
  }

  private async catchUp(): Promise<void> {
    // Numbers missed before may have committed since.
    if (this.gaps.size > 0 || this.late.size > 0) await this.apply(await this.store.changesAt([...this.gaps.keys(), ...this.late.keys()]));
    for (;;) {
      const changes = await this.store.changesSince(Math.max(this.lastSeq, this.highest), 1000);
      if (changes.length === 0) break;
      await this.apply(changes);
    }
    this.advance(Date.now());
  }

  /**
   * Applies changes in order, letting requests through every few milliseconds: a node catching
   * up on many (after its start or a lost connection) puts each vector in a graph in about a
   * millisecond, and a batch of a thousand would hold the event loop for a second.
   */
  private async apply(changes: readonly ChangeRow[]): Promise<void> {
    const now = Date.now();
    // Whether a vector has expired, by PostgreSQL's clock as on every node (not this node's own).
    const nowIso = new Date(this.store.now()).toISOString();
    const slice = new Slice(SLICE_MS);
    for (const c of changes) {
      if (slice.used) await slice.pause();
      const late = this.late.delete(c.seq);
      if (!late && (c.seq <= this.lastSeq || this.appliedAbove.has(c.seq))) continue;
      const partition = partitionOf(c.accountId, c.contextHash);
      if (c.op === 'delete') this.index.remove(partition, c.entryId);
      else if (c.vector && ofEmbedder(c.vector.embedderId, this.embedder) && (c.vector.expiresAt === null || c.vector.expiresAt > nowIso)) {
        this.index.add(partition, c.entryId, c.vector.vector);
      } else if (c.embedderId === pendingId(this.embedder)) this.opts.onPending?.();
      if (late) {
        // Committed after this node had moved past its number: applied now all the same.
        this.opts.onLate?.(c.seq);
        continue;
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
   * until `GAP_WAIT_MS` have passed since it was first missed; then it no longer holds the node
   * back, and is looked for until `LATE_WAIT_MS` (a transaction that never committed, most likely).
   */
  private advance(now: number): void {
    const wait = this.opts.gapWaitMs ?? GAP_WAIT_MS;
    for (const [seq, since] of this.late) if (now - since >= LATE_WAIT_MS) this.late.delete(seq);
    for (let next = this.lastSeq + 1; next <= this.highest; next++) {
      if (!this.appliedAbove.delete(next)) {
        const since = this.gaps.get(next);
        if (since !== undefined && now - since < wait) return;
        this.gaps.delete(next);
        if (since !== undefined) this.late.set(next, since);
      }
      this.lastSeq = next;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await (this.running ?? Promise.resolve());
    // A connection still being opened is closed by `listen` once open: not waited for here, as a
    // server that stopped answering would hold the node's shutdown.
    await this.client?.end().catch(() => undefined);
    this.client = null;
  }
}
