/**
 * A plan: its rate limit, a token bucket of `burst` tokens refilled at `requestsPerMinute`, and
 * its storage limits.
 */
export interface Plan {
  requestsPerMinute: number;
  burst: number;
  /** The limiter still counts and sets headers but never refuses. */
  unlimited: boolean;
  /** Entries an account may keep (until deleted, or removed once expired); null: no limit. */
  maxEntries: number | null;
  /**
   * Bytes of entries an account may keep: each entry's conversation as stored (its JSON) and
   * answer, in UTF-8 (`storedBytes`); null: no limit.
   */
  maxStoredBytes: number | null;
}

export type PlanTable = Record<string, Plan>;

const MIB = 1024 * 1024;

export const DEFAULT_PLANS: PlanTable = {
  free: { requestsPerMinute: 60, burst: 100, unlimited: false, maxEntries: 10_000, maxStoredBytes: 100 * MIB },
  pro: { requestsPerMinute: 600, burst: 1000, unlimited: false, maxEntries: 100_000, maxStoredBytes: 1024 * MIB },
  enterprise: { requestsPerMinute: 6000, burst: 10_000, unlimited: false, maxEntries: 1_000_000, maxStoredBytes: 10 * 1024 * MIB },
  // Internal services: counted, never refused, and no storage limits unless the configuration sets them.
  unlimited: { requestsPerMinute: 6000, burst: 10_000, unlimited: true, maxEntries: null, maxStoredBytes: null },
};

/**
 * The plan of this name; an account whose plan the configuration does not define gets the `free`
 * plan's limits (rate and storage), as the server says at start.
 */
export function planOf(plans: PlanTable, name: string): Plan {
  return plans[name] ?? plans.free ?? (DEFAULT_PLANS.free as Plan);
}
