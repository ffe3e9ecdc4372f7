import type { Config } from '../config.ts';
import type { CacheService } from '../cache/service.ts';
import type { RateLimiter } from '../limits/interface.ts';
import type { Account, ApiKey, Store } from '../store/interface.ts';

/** What the routes are handed by the composition root. */
export interface AppContext {
  config: Config;
  store: Store;
  cache: CacheService;
  limiter: RateLimiter;
  version: string;
  /** Reports whether the store (and other dependencies) answer; used by /healthz. */
  /**
   * Whether the service can answer: each check is `ok`, `disabled` or `unavailable` (what callers
   * see); `error` is why, for the log only (it can name hosts and addresses).
   */
  ready(): Promise<{ ok: boolean; checks: Record<string, string>; error?: unknown }>;
  /**
   * Told of an error that says the store's files are damaged (SQLite's SQLITE_CORRUPT), met by a
   * request: logged once, and said by the health checks from then on.
   */
  storeDamaged?(err: unknown): void;
}

declare module 'fastify' {
  interface FastifyRequest {
    account: Account | null;
    apiKey: ApiKey | null;
  }
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Names the route for error mapping (`check` answers INVALID_MESSAGES). */
    route?: string;
  }
}
