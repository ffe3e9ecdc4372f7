import { bucketResult, type BucketRule, type LimitResult, type RateLimiter } from './interface.ts';
import { MemoryRateLimiter } from './memory.ts';

/** The slice of a Redis client the limiter needs (ioredis provides it). */
export interface RedisScripting {
  evalsha(sha: string, numKeys: number, ...args: (string | number)[]): Promise<unknown>;
  script(subcommand: 'LOAD', script: string): Promise<unknown>;
}

/**
 * A token bucket in one Redis hash, updated atomically by a script, so every node shares it.
 * Time comes from the Redis server (TIME), so nodes' clocks do not matter.
 * KEYS[1] bucket; ARGV: capacity, refill per second, cost, unlimited (0/1). Returns
 * {allowed, tokens (as a string), now in ms}.
 */
const SCRIPT = `
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local unlimited = ARGV[4] == '1'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil then
  tokens = capacity
else
  tokens = math.min(capacity, tokens + math.max(0, now - at) / 1000 * rate)
end
local allowed = 0
if unlimited or tokens >= cost then
  allowed = 1
  tokens = math.max(0, tokens - cost)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', now)
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) / rate * 1000) + 1000)
return {allowed, tostring(tokens), now}
`;

/** The bucket the probe runs the script on while Redis is not used: it takes nothing from it. */
const PROBE_RULE: BucketRule = { capacity: 1, refillPerSecond: 1, limit: 1 };

export interface RedisLimiterOptions {
  /** Prefix of every key, e.g. `reprise:`; lets several deployments share one Redis. */
  prefix?: string;
  /** Called when Redis fails and the local fallback starts answering instead (once per outage). */
  onFallback?: (err: unknown) => void;
  /** Called when Redis answers again after an outage. */
  onRecover?: () => void;
  /** While Redis fails, how often it is asked again in the background, in ms; default 1,000. */
  retryMs?: number;
  /** The clock (ms); `Date.now` by default. */
  now?: () => number;
  /**
   * Whether the client is connected now: while it is not, the limiter is degraded (its requests
   * would fall back), which its health says without waiting for a request to find it out.
   */
  connected?: () => boolean;
  /**
   * Redis did not answer when the node started (why): the limiter starts on the per-node buckets,
   * an outage from the start (`onFallback` is called at once) that ends when Redis answers.
   */
  downAtStart?: unknown;
}

/**
 * Rate limits shared by all nodes through Redis. If Redis cannot be reached the limiter fails
 * open to per-node buckets (each node then enforces the plan on its own traffic), so an outage
 * of the limiter never takes the cache down; it returns to the shared buckets by itself.
 *
 * Once a call has failed, requests are answered by the per-node buckets at once, without asking
 * Redis: a Redis that accepts connections and never answers would otherwise hold every request
 * for the client's command timeout. Redis is asked again in the background, one question at a
 * time, every `retryMs`; when it answers, the shared buckets are used again.
 */
export class RedisRateLimiter implements RateLimiter {
  private sha: string | null = null;
  private readonly fallback = new MemoryRateLimiter();
  private readonly prefix: string;
  private fellBack = false;
  /** Calls numbered as they start, and the number of the last that failed: an answer to a call
   * sent before a failure says nothing of Redis now. */
  private calls = 0;
  private lastFailed = 0;
  /** While fallen back: when Redis may be asked again, and whether a question is out. */
  private retryAt = 0;
  private probing = false;
  /** While fallen back: asks Redis again with no request coming, so that health says when it is back. */
  private retryTimer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly retryMs: number;
  private readonly now: () => number;

  constructor(
    private readonly redis: RedisScripting,
    private readonly opts: RedisLimiterOptions = {},
    private readonly close_: () => Promise<void> = async () => undefined,
  ) {
    this.prefix = opts.prefix ?? 'reprise:';
    this.retryMs = opts.retryMs ?? 1000;
    this.now = opts.now ?? Date.now;
    if (opts.downAtStart !== undefined) this.failed(++this.calls, opts.downAtStart);
  }

  private async run(key: string, rule: BucketRule, cost: number): Promise<[number, string, number]> {
    const args = [rule.capacity, rule.refillPerSecond, cost, rule.unlimited ? 1 : 0] as const;
    this.sha ??= String(await this.redis.script('LOAD', SCRIPT));
    try {
      return (await this.redis.evalsha(this.sha, 1, `${this.prefix}rl:${key}`, ...args)) as [number, string, number];
    } catch (err) {
      if (!String((err as Error).message).includes('NOSCRIPT')) throw err;
      this.sha = String(await this.redis.script('LOAD', SCRIPT));
      return (await this.redis.evalsha(this.sha, 1, `${this.prefix}rl:${key}`, ...args)) as [number, string, number];
    }
  }

  async consume(key: string, rule: BucketRule, cost = 1): Promise<LimitResult> {
    if (this.fellBack) {
      this.probe();
      return this.fallback.consumeSync(key, rule, cost);
    }
    const call = ++this.calls;
    try {
      const [allowed, tokens, now] = await this.run(key, rule, cost);
      if (this.fellBack && call > this.lastFailed) {
        this.recovered();
      }
      return bucketResult(rule, Number(tokens), allowed === 1, Number(now));
    } catch (err) {
      this.failed(call, err);
      return this.fallback.consumeSync(key, rule, cost);
    }
  }

  private failed(call: number, err: unknown): void {
    this.sha = null;
    this.lastFailed = Math.max(this.lastFailed, call);
    this.retryAt = this.now() + this.retryMs;
    if (!this.fellBack) {
      this.fellBack = true;
      this.opts.onFallback?.(err);
    }
    if (this.retryTimer === null && !this.closed) {
      this.retryTimer = setInterval(() => this.probe(), this.retryMs);
      this.retryTimer.unref();
    }
  }

  private recovered(): void {
    this.fellBack = false;
    this.stopRetrying();
    this.opts.onRecover?.();
  }

  private stopRetrying(): void {
    if (this.retryTimer !== null) clearInterval(this.retryTimer);
    this.retryTimer = null;
  }

  /**
   * Asks Redis in the background whether it serves the limiter again, when it is time: the script
   * is run on a bucket of its own, taking nothing. A command that only reads (loading the script, a
   * ping) succeeds on a Redis that refuses writes (a read-only replica after a failover, a full
   * memory), and would end an outage that the next request finds again, once a retry interval.
   */
  private probe(): void {
    if (this.probing || this.now() < this.retryAt) return;
    this.probing = true;
    const call = ++this.calls;
    Promise.resolve()
      .then(() => this.run('probe', PROBE_RULE, 0))
      .then(
        () => {
          if (this.fellBack && call > this.lastFailed) {
            this.recovered();
          }
        },
        (err: unknown) => this.failed(call, err),
      )
      .finally(() => (this.probing = false));
  }

  get degraded(): boolean {
    return this.fellBack || this.opts.connected?.() === false;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stopRetrying();
    await this.fallback.close();
    await this.close_();
  }
}
