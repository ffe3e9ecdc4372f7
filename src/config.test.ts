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
