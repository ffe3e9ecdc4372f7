/** A plan's rate limit: a token bucket of `burst` tokens refilled at `requestsPerMinute`. */
export interface Plan {
  requestsPerMinute: number;
  burst: number;
  /** The limiter still counts and sets headers but never refuses. */
  unlimited: boolean;
}

export type PlanTable = Record<string, Plan>;

export const DEFAULT_PLANS: PlanTable = {
  free: { requestsPerMinute: 60, burst: 100, unlimited: false },
  pro: { requestsPerMinute: 600, burst: 1000, unlimited: false },
  enterprise: { requestsPerMinute: 6000, burst: 10_000, unlimited: false },
  unlimited: { requestsPerMinute: 6000, burst: 10_000, unlimited: true },
};
