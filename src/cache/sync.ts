import pg from 'pg';
import type { Embedder } from '../embedding/interface.ts';
import { CHANGES_CHANNEL, type PostgresStore } from '../store/postgres.ts';
import type { VectorIndex } from '../vector/interface.ts';
import { partitionOf } from './context.ts';

export interface SyncOptions {
  /** Poll for changes this often even without a notification (and after reconnecting). */
  pollMs?: number;
  onError?: (err: unknown) => void;
}

/**
 * Keeps this node's vector index in step with PostgreSQL: every write appends to
 * `entry_changes` and NOTIFYs; this node LISTENs, and also polls, applying changes after the
 * last sequence it has seen. After a lost connection it reconnects and catches up from that
 * sequence, so no insert, delete or expiry is missed.
 */
export class IndexSync {
  private lastSeq = 0;
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
    this.lastSeq = await this.store.lastChange();
  }

  get seq(): number {
    return this.lastSeq;
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

  /** Resolves once every change committed before the call has been applied. */
  async settle(): Promise<void> {
    const target = await this.store.lastChange();
    while (this.lastSeq < target && !this.stopped) {
      this.poke();
      await (this.running ?? Promise.resolve());
    }
  }

  private async catchUp(): Promise<void> {
    for (;;) {
      const changes = await this.store.changesSince(this.lastSeq, 1000);
      if (changes.length === 0) return;
      const now = new Date().toISOString();
      for (const c of changes) {
        const partition = partitionOf(c.accountId, c.contextHash);
        if (c.op === 'delete') this.index.remove(partition, c.entryId);
        else if (c.vector && c.vector.embedderId === this.embedder.id && (c.vector.expiresAt === null || c.vector.expiresAt > now)) {
          this.index.add(partition, c.entryId, c.vector.vector);
        }
        this.lastSeq = c.seq;
      }
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await (this.running ?? Promise.resolve());
    await this.client?.end().catch(() => undefined);
  }
}
