import pg from 'pg';
import { Lru } from '../util/lru.ts';
import { openListener } from './pg-listen.ts';

/** The channel on which key and account changes are announced (payload: the schema). */
export const AUTH_CHANNEL = 'reprise_auth_changes';

/**
 * Key lookups of the PostgreSQL store, remembered so that an authenticated request needs no
 * database read, and forgotten whenever a key or an account changes on any node: a trigger in
 * the changing transaction bumps `auth_version` and NOTIFYs (delivered once it commits); this node
 * LISTENs on a connection of its own and also reads the version every `pollMs`. The cache is used
 * only while that connection is up and the version is known, so a revoked key is refused by every
 * node as soon as the notification arrives (milliseconds), and a node that cannot hear them reads
 * every key from the database.
 */
export class KeyCache<V> {
  private readonly lru: Lru<string, V>;
  /** Bumped on every invalidation: a value read before one is not kept. */
  private epoch = 0;
  private live = false;
  private version: string | null = null;
  private client: pg.Client | null = null;
  private connecting: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly url: string,
    private readonly schema: string,
    private readonly readVersion: () => Promise<string>,
    private readonly opts: { capacity?: number; pollMs?: number } = {},
  ) {
    this.lru = new Lru(opts.capacity ?? 10_000);
  }

  /** The remembered value; none while the cache cannot hear changes (it starts listening then). */
  get(key: string): V | undefined {
    if (!this.live) {
      this.start();
      return undefined;
    }
    return this.lru.get(key);
  }

  /** Pass to `set` what this returned before the read. */
  token(): number {
    return this.epoch;
  }

  set(key: string, value: V, token: number): void {
    if (this.live && token === this.epoch) this.lru.set(key, value);
  }

  invalidate(): void {
    this.epoch++;
    this.lru.clear();
  }

  private start(): void {
    if (this.stopped || this.connecting) return;
    this.connecting = this.listen()
      .catch(() => this.down())
      .finally(() => {
        this.connecting = null;
      });
    if (!this.timer) {
      this.timer = setInterval(() => void this.poll(), this.opts.pollMs ?? 1000);
      this.timer.unref();
    }
  }

  private async listen(): Promise<void> {
    const client = await openListener(this.url, AUTH_CHANNEL, {
      lost: (c) => {
        if (this.client === c) this.down();
      },
      notified: (payload) => {
        if (payload === this.schema) this.invalidate();
      },
    });
    if (this.stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    // Anything read before this point may predate a change it did not hear of.
    this.version = await this.readVersion();
    this.invalidate();
    this.live = this.client === client;
  }

  /** Reads the version: a change it missed empties the cache; a failed read stops using it. */
  private async poll(): Promise<void> {
    if (!this.live) {
      this.start();
      return;
    }
    try {
      const v = await this.readVersion();
      if (v !== this.version) {
        this.version = v;
        this.invalidate();
      }
    } catch {
      this.down();
    }
  }

  private down(): void {
    this.live = false;
    this.invalidate();
    const client = this.client;
    this.client = null;
    client?.end().catch(() => undefined);
  }

  async close(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.connecting;
    this.down();
  }
}
