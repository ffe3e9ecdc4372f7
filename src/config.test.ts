import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from './config.ts';

describe('configuration from the environment', () => {
  test('a bad value names its variable', () => {
    for (const [variable, value] of [
      ['LOG_LEVEL', 'verbose'],
      ['REPRISE_TRUST_PROXY', 'maybe'],
      // Shaped like addresses, yet not ones: refused here, not by a stack trace at start-up.
      ['REPRISE_TRUST_PROXY', '1.2.3.4/99'],
      ['REPRISE_TRUST_PROXY', '1.2.3.999'],
      ['REPRISE_TRUST_PROXY', '::1/129'],
      ['PORT', 'eighty'],
      ['REPRISE_EMBED_PRIORITY', '20'],
      ['REPRISE_EMBED_PRIORITY', '-5'],
      // Past what a date or a timer can hold: every store was a 500, or every connection to PostgreSQL refused.
      ['REPRISE_ENTRY_TTL_SECONDS', '99999999999999'],
      ['REPRISE_ENTRY_TTL_SECONDS', '315360001'],
      ['REPRISE_PG_QUERY_TIMEOUT_MS', '2147483648'],
    ] as const) {
      assert.throws(
        () => loadConfig({ [variable]: value }),
        (err: unknown) => err instanceof ConfigError && err.variable === variable && err.message.includes(value),
        variable,
      );
    }
  });

  test('REPRISE_CONFIG: a misspelt key is refused, not ignored', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'reprise-config-'));
    try {
      const file = path.join(dir, 'config.json');
      for (const [content, says] of [
        [{ pricez: { 'gpt-4o': 5 } }, 'unknown key "pricez"'],
        [{ plans: { team: { requests_per_minute: 100, burst: 200, unlimitd: true } } }, 'plans.team: unknown key "unlimitd"'],
        [{ plans: [] }, 'plans in'],
        // What a plan name may be is said, not only that this one is not.
        [{ plans: { Team: { requests_per_minute: 100, burst: 200 } } }, 'plan name "Team" in plans: a plan name is a lower-case letter'],
      ] as const) {
        writeFileSync(file, JSON.stringify(content));
        assert.throws(
          () => loadConfig({ REPRISE_CONFIG: file }),
          (err: unknown) => err instanceof ConfigError && err.variable === 'REPRISE_CONFIG' && err.message.includes(says),
          says,
        );
      }
      writeFileSync(
        file,
        JSON.stringify({
          prices: { 'my-model': 1 },
          default_price_per_million: 3,
          plans: { team: { requests_per_minute: 100, burst: 200 } },
        }),
      );
      assert.equal(loadConfig({ REPRISE_CONFIG: file }).plans.team?.requestsPerMinute, 100);
      // Saved by an editor that begins UTF-8 with a byte order mark: the same file.
      writeFileSync(file, `\uFEFF${JSON.stringify({ plans: { team: { requests_per_minute: 100, burst: 200 } } })}`);
      assert.equal(loadConfig({ REPRISE_CONFIG: file }).plans.team?.requestsPerMinute, 100);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('plans have storage limits: the built-in defaults, and in REPRISE_CONFIG max_entries and max_stored_bytes', () => {
    const MIB = 1024 * 1024;
    const limits = (plans: ReturnType<typeof loadConfig>['plans'], name: string) => [plans[name]?.maxEntries, plans[name]?.maxStoredBytes];
    const defaults = loadConfig({}).plans;
    assert.deepEqual(limits(defaults, 'free'), [10_000, 100 * MIB]);
    assert.deepEqual(limits(defaults, 'pro'), [100_000, 1024 * MIB]);
    assert.deepEqual(limits(defaults, 'enterprise'), [1_000_000, 10 * 1024 * MIB]);
    assert.deepEqual(limits(defaults, 'unlimited'), [null, null]);
    const dir = mkdtempSync(path.join(tmpdir(), 'reprise-config-'));
    try {
      const file = path.join(dir, 'config.json');
      const rate = { requests_per_minute: 100, burst: 200 };
      writeFileSync(
        file,
        JSON.stringify({
          plans: {
            // One limit given: the other is the built-in plan's.
            free: { ...rate, max_entries: 500 },
            pro: { ...rate, max_entries: null, max_stored_bytes: 2_000_000 },
            // A plan of another name: the free plan's defaults.
            team: rate,
            internal: { ...rate, max_entries: 'unlimited', max_stored_bytes: 'unlimited' },
            unlimited: { ...rate, unlimited: true },
            capped: { ...rate, unlimited: true, max_entries: 20 },
          },
        }),
      );
      const plans = loadConfig({ REPRISE_CONFIG: file }).plans;
      assert.deepEqual(limits(plans, 'free'), [500, 100 * MIB]);
      assert.deepEqual(limits(plans, 'pro'), [100_000, 2_000_000]);
      assert.deepEqual(limits(plans, 'team'), [10_000, 100 * MIB]);
      assert.deepEqual(limits(plans, 'internal'), [null, null]);
      assert.deepEqual(limits(plans, 'unlimited'), [null, null]);
      assert.deepEqual(limits(plans, 'capped'), [20, 100 * MIB]);
      assert.deepEqual(limits(plans, 'enterprise'), [1_000_000, 10 * 1024 * MIB]);

      for (const [key, value] of [
        ['max_entries', 0],
        ['max_entries', -1],
        ['max_entries', 1.5],
        ['max_entries', '100'],
        ['max_entries', true],
        ['max_stored_bytes', '100MB'],
        ['max_stored_bytes', 2 ** 60],
        ['max_stored_bytes', 'none'],
        ['max_stored_bytes', {}],
      ] as const) {
        writeFileSync(file, JSON.stringify({ plans: { team: { ...rate, [key]: value } } }));
        assert.throws(
          () => loadConfig({ REPRISE_CONFIG: file }),
          (err: unknown) =>
            err instanceof ConfigError &&
            err.variable === 'REPRISE_CONFIG' &&
            err.message.includes(`plans.team.${key} must be a whole number >= 1, "unlimited", or null`) &&
            err.message.includes(JSON.stringify(value)),
          `${key}: ${JSON.stringify(value)}`,
        );
      }
      writeFileSync(file, JSON.stringify({ plans: { team: { ...rate, max_entires: 10 } } }));
      assert.throws(
        () => loadConfig({ REPRISE_CONFIG: file }),
        (err: unknown) =>
          err instanceof ConfigError &&
          err.message.includes('plans.team: unknown key "max_entires"') &&
          err.message.includes('max_entries'),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a built-in plan in REPRISE_CONFIG keeps what the file leaves out; a new plan needs its rate limit, and says so', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'reprise-config-'));
    try {
      const file = path.join(dir, 'config.json');
      writeFileSync(
        file,
        JSON.stringify({
          plans: {
            // Only the storage limits: the rate limit (and, for `unlimited`, never refusing) stay the built-in plan's.
            free: { max_entries: 500 },
            pro: { burst: 2000, max_stored_bytes: 'unlimited' },
            unlimited: { max_entries: 1_000_000 },
            enterprise: { requests_per_minute: null, unlimited: false },
          },
        }),
      );
      const plans = loadConfig({ REPRISE_CONFIG: file }).plans;
      assert.deepEqual(plans.free, {
        requestsPerMinute: 60,
        burst: 100,
        unlimited: false,
        maxEntries: 500,
        maxStoredBytes: 100 * 1024 * 1024,
      });
      assert.deepEqual(plans.pro, { requestsPerMinute: 600, burst: 2000, unlimited: false, maxEntries: 100_000, maxStoredBytes: null });
      assert.deepEqual(plans.unlimited, {
        requestsPerMinute: 6000,
        burst: 10_000,
        unlimited: true,
        maxEntries: 1_000_000,
        maxStoredBytes: null,
      });
      assert.equal(plans.enterprise?.requestsPerMinute, 6000);

      for (const [spec, says] of [
        [{ max_entries: 50 }, 'plans.team.requests_per_minute is required for a plan that is not built in (a number >= 1)'],
        [{ requests_per_minute: 100 }, 'plans.team.burst is required for a plan that is not built in (a number >= 1)'],
        [{ requests_per_minute: 100, burst: 0 }, 'plans.team.burst must be a number >= 1; got 0'],
        [{ requests_per_minute: '100', burst: 200 }, 'plans.team.requests_per_minute must be a number >= 1; got "100"'],
        [{ requests_per_minute: 100, burst: 200, unlimited: 'yes' }, 'plans.team.unlimited must be true or false; got "yes"'],
        [null, 'plans.team must be an object'],
        [5, 'plans.team must be an object'],
      ] as const) {
        writeFileSync(file, JSON.stringify({ plans: { team: spec } }));
        assert.throws(
          () => loadConfig({ REPRISE_CONFIG: file }),
          (err: unknown) => err instanceof ConfigError && err.variable === 'REPRISE_CONFIG' && err.message.includes(says),
          says,
        );
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('REPRISE_TRUST_PROXY: true is one proxy; a number of proxies; a list of proxy addresses', () => {
    assert.equal(loadConfig({}).trustProxy, false);
    assert.equal(loadConfig({ REPRISE_TRUST_PROXY: 'true' }).trustProxy, 1);
    assert.equal(loadConfig({ REPRISE_TRUST_PROXY: '2' }).trustProxy, 2);
    assert.deepEqual(loadConfig({ REPRISE_TRUST_PROXY: '10.0.0.1, 192.168.0.0/16' }).trustProxy, ['10.0.0.1', '192.168.0.0/16']);
    assert.deepEqual(loadConfig({ REPRISE_TRUST_PROXY: 'fd00::/8,::1' }).trustProxy, ['fd00::/8', '::1']);
  });
});
