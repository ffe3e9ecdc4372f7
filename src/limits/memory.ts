import { bucketResult, type BucketRule, type LimitResult, type RateLimiter } from './interface.ts';

interface Bucket {
  tokens: number;
  at: number;
  /** The bucket's own rule, to tell when it has refilled (another key's rule may differ). */
  rule: BucketRule;
}

/** In-process token buckets for one node. Holds at most `maxKeys` buckets. */
export class MemoryRateLimiter implements RateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly maxKeys = 100_000,
    private readonly now: () => number = Date.now,
  ) {}

  async consume(key: string, rule: BucketRule, cost = 1): Promise<LimitResult> {
    return this.consumeSync(key, rule, cost);
  }

  consumeSync(key: string, rule: BucketRule, cost = 1): LimitResult {
    const now = this.now();
    let b = this.buckets.get(key);
    if (b === undefined) {
      if (this.buckets.size >= this.maxKeys) this.evict(now);
      b = { tokens: rule.capacity, at: now, rule };
      this.buckets.set(key, b);
    } else {
      b.tokens = Math.min(rule.capacity, b.tokens + ((now - b.at) / 1000) * rule.refillPerSecond);
      b.at = now;
      b.rule = rule;
    }
    const allowed = rule.unlimited === true || b.tokens >= cost;
    if (allowed) b.tokens = Math.max(0, b.tokens - cost);
    return bucketResult(rule, b.tokens, allowed, now);
  }

  /** Drops buckets that have refilled (forgetting them changes nothing), else the oldest. */
  private evict(now: number): void {
    for (const [k, b] of this.buckets) {
      if (b.tokens + ((now - b.at) / 1000) * b.rule.refillPerSecond >= b.rule.capacity) this.buckets.delete(k);
    }
    while (this.buckets.size >= this.maxKeys) {
      const oldest = this.buckets.keys().next();
      if (oldest.done) break;
      this.buckets.delete(oldest.value);
    }
  }

  async close(): Promise<void> {
    this.buckets.clear();
  }
}
