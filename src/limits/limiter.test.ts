import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { freePort, PrivateRedis } from '../../test/private-servers.ts';
import { eventually, serviceUrl, skipReason, uniquePrefix } from '../../test/services.ts';
import type { BucketRule, RateLimiter } from './interface.ts';
import { MemoryRateLimiter } from './memory.ts';
import { RedisRateLimiter, type RedisScripting } from './redis.ts';
import { loadConfig } from '../config.ts';
import { openLimiter } from '../runtime.ts';

/** `shared`: separate instances (nodes) see the same buckets. */
function conformance(name: string, make: () => RateLimiter, shared: boolean, skip: string | false = false) {
  describe(`${name} limiter`, { skip }, () => {
    const limiters: RateLimiter[] = [];
    const limiter = () => {
      const l = make();
      limiters.push(l);
      return l;
    };
    after(async () => {
      for (const l of limiters) await l.close();
    });
    const rule: BucketRule = { capacity: 5, refillPerSecond: 1, limit: 60 };

    test('allows the burst, then refuses with retryAfter; headers values are exact', async () => {
      const l = limiter();
      const key = `k-${Math.random()}`;
      const results = [];
      for (let i = 0; i < 6; i++) results.push(await l.consume(key, rule));
      assert.deepEqual(
        results.map((r) => r.allowed),
        [true, true, true, true, true, false],
      );
      assert.deepEqual(
        results.map((r) => r.remaining),
        [4, 3, 2, 1, 0, 0],
      );
      assert.equal(results[5]?.retryAfter, 1);
      assert.equal(results[0]?.limit, 60);
      const now = Math.floor(Date.now() / 1000);
      assert.ok((results[5]?.resetAt ?? 0) >= now + 4 && (results[5]?.resetAt ?? 0) <= now + 6);
    });

    test('keys are independent; unlimited never refuses', async () => {
      const l = limiter();
      const a = `a-${Math.random()}`;
      for (let i = 0; i < 5; i++) await l.consume(a, rule);
      assert.equal((await l.consume(a, rule)).allowed, false);
      assert.equal((await l.consume(`b-${Math.random()}`, rule)).allowed, true);
      const u = `u-${Math.random()}`;
      for (let i = 0; i < 8; i++) assert.equal((await l.consume(u, { ...rule, unlimited: true })).allowed, true);
    });

    if (!shared) return;
    test('two limiter instances on the same store share a bucket', async () => {
      const one = limiter();
      const two = limiter();
      const key = `shared-${Math.random()}`;
      let allowed = 0;
      for (let i = 0; i < 10; i++) if ((await (i % 2 ? one : two).consume(key, rule)).allowed) allowed++;
      assert.equal(allowed, 5);
    });
  });
}

conformance('memory', () => new MemoryRateLimiter(), false);
const prefix = uniquePrefix();
conformance(
  'Redis',
  () => {
    const redis = new Redis(serviceUrl('REDIS_URL') as string, { maxRetriesPerRequest: 1 });
    return new RedisRateLimiter(redis, { prefix }, async () => {
      redis.disconnect();
    });
  },
  true,
  skipReason('REDIS_URL'),
);

describe('Redis limiter when Redis is unreachable', () => {
  test('fails open to per-node buckets instead of failing requests', async () => {
    const redis = new Redis('redis://127.0.0.1:1', {
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      retryStrategy: () => null,
      lazyConnect: true,
    });
    redis.on('error', () => undefined);
    let fallbacks = 0;
    const l = new RedisRateLimiter(redis, { onFallback: () => fallbacks++ }, async () => redis.disconnect());
    const rule = { capacity: 2, refillPerSecond: 1, limit: 60 };
    const r = [await l.consume('x', rule), await l.consume('x', rule), await l.consume('x', rule)];
    assert.deepEqual(
      r.map((x) => x.allowed),
      [true, true, false],
    );
    // Said once per outage, not once per request.
    assert.equal(fallbacks, 1);
    assert.equal(l.degraded, true);
    await l.close();
  });
});

describe('in-memory limiter when full', () => {
  test('a new key evicts only buckets that have refilled by their own rule', async () => {
    let now = 0;
    const l = new MemoryRateLimiter(3, () => now);
    const account = { capacity: 100, refillPerSecond: 1, limit: 60 };
    const address = { capacity: 30, refillPerSecond: 0.5, limit: 30 };
    for (let i = 0; i < 61; i++) await l.consume('account', account);
    await l.consume('address-1', address);
    await l.consume('address-2', address);
    now += 2000;
    // The addresses have refilled and go; the account holds more than an address's capacity but
    // has not refilled, so it stays (forgotten, it would come back at its full burst).
    await l.consume('address-3', address);
    assert.equal((await l.consume('account', account, 0)).remaining, 41);
    await l.close();
  });
});

describe('Redis limiter when Redis answers but refuses its writes', { skip: skipReason('REDIS_URL') }, () => {
  let server: PrivateRedis;
  before(async () => {
    server = new PrivateRedis(await freePort());
    await server.start();
  });
  after(async () => {
    await server?.stop();
  });

  test('a read-only replica (after a failover) is one outage, not one a second: pings that succeed do not end it', async () => {
    const redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
    redis.on('error', () => undefined);
    // A replica of a primary that does not exist: it answers every command and refuses writes.
    await redis.call('REPLICAOF', '127.0.0.1', String(await freePort()));
    let calls = 0;
    const counted: RedisScripting = {
      evalsha: (...args) => redis.evalsha(...args).finally(() => calls++),
      script: (sub, s) => redis.script(sub, s).finally(() => calls++),
    };
    let fallbacks = 0;
    let recoveries = 0;
    const l = new RedisRateLimiter(counted, { retryMs: 10, onFallback: () => fallbacks++, onRecover: () => recoveries++ }, async () =>
      redis.disconnect(),
    );
    try {
      const rule = { capacity: 100, refillPerSecond: 1, limit: 60 };
      // Redis is asked again every 10 ms while requests come: a dozen times before this ends.
      const asked = await eventually(async () => (await l.consume('k', rule)).allowed && calls >= 12);
      assert.ok(asked, `Redis was asked again (${calls} calls)`);
      assert.equal(fallbacks, 1, 'the outage is reported once');
      assert.equal(recoveries, 0, 'Redis still refuses the limiter, so it is not back');
      assert.equal(l.degraded, true);
    } finally {
      await l.close();
    }
  });
});

describe('Redis limiter as a server opens it: its health without requests', { skip: skipReason('REDIS_URL') }, () => {
  test('a Redis that does not answer at start is said at once, not at the first request', async () => {
    const l = await openLimiter(loadConfig({ REDIS_URL: `redis://127.0.0.1:${await freePort()}` }));
    try {
      assert.equal(l.degraded, true);
    } finally {
      await l.close();
    }
  });

  test('a Redis that stops while no request comes is said, and so is its return', async () => {
    const server = new PrivateRedis(await freePort());
    await server.start();
    const l = await openLimiter(loadConfig({ REDIS_URL: server.url }));
    try {
      assert.equal(l.degraded, false);
      await server.stop();
      assert.ok(await eventually(async () => l.degraded === true), 'the limiter says Redis is gone');
      await server.start();
      assert.ok(await eventually(async () => l.degraded === false), 'the limiter says Redis is back');
    } finally {
      await l.close();
      await server.stop();
    }
  });
});
