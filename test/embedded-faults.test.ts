import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync, writeSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { tempDir } from './helpers.ts';
import { api, startServerProcess, type ServerProcess } from './process.ts';

const user = (content: string) => ({ role: 'user' as const, content });

/** The bootstrap key a first start prints. */
function bootstrapKey(server: ServerProcess): string {
  const m = /(rp_live_\S+)/.exec(server.stdout());
  assert.ok(m, `no bootstrap key in:\n${server.stdout()}`);
  return m[1] as string;
}

/** The log lines (JSON) a server printed. */
function logLines(server: ServerProcess): { level: number; msg: string; [k: string]: unknown }[] {
  return server
    .stdout()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));
}

/** Overwrites the page `page` (numbered from 1, as SQLite does) of the database file with garbage. */
function overwritePage(file: string, page: number, pageSize: number): void {
  const fd = openSync(file, 'r+');
  try {
    writeSync(fd, randomBytes(pageSize), 0, pageSize, (page - 1) * pageSize);
  } finally {
    closeSync(fd);
  }
}

describe('embedded store: a database file damaged on disk', () => {
  test('requests that need the damaged page are 503 in the error shape, never 500; the damage is logged once and the health says so', async () => {
    const dir = tempDir();
    const env = { REPRISE_DATA_DIR: dir, REPRISE_EMBEDDER: 'none' };
    let server = await startServerProcess(env);
    const key = bootstrapKey(server);
    for (let i = 0; i < 20; i++) {
      const res = await api(server.url, 'POST', '/api/v1/store', key, { messages: [user(`question ${i}`)], answer: `answer ${i}` });
      assert.equal(res.status, 200);
    }
    assert.equal(await server.stop(), 0);
    const file = path.join(dir, 'reprise.db');
    assert.equal(existsSync(`${file}-wal`), false, 'a clean stop leaves the database whole in its file');
    // The page of the index exact lookups and stores go through, overwritten (a bad sector, a
    // stray write): the rest of the file is whole.
    const db = new Database(file, { readonly: true });
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    const pages = db.pragma('page_count', { simple: true }) as number;
    const root = db.prepare("SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_entries_1'").pluck().get() as number;
    db.close();
    assert.ok(root > 1 && root < pages, `page ${root} of ${pages}`);
    overwritePage(file, root, pageSize);

    server = await startServerProcess(env, 60_000, { keepOutput: true });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) {
        const check = await api(server.url, 'POST', '/api/v1/check', key, { messages: [user(`question ${i}`)] });
        statuses.push(check.status);
        assert.equal(check.status, 503, JSON.stringify(check.json));
        assert.equal(check.json.error.code, 'SERVICE_UNAVAILABLE');
        assert.equal(check.json.status, 503);
        assert.match(check.json.error.message, /database is damaged/);
        const store = await api(server.url, 'POST', '/api/v1/store', key, { messages: [user(`new ${i}`)], answer: 'x' });
        statuses.push(store.status);
        assert.equal(store.status, 503, JSON.stringify(store.json));
        assert.equal(store.json.error.code, 'SERVICE_UNAVAILABLE');
      }
      // What does not need the page is served; the health says the store is damaged.
      const usage = await api(server.url, 'GET', '/api/v1/usage', key);
      assert.equal(usage.status, 200);
      const health = await fetch(`${server.url}/healthz`);
      assert.equal(health.status, 200);
      assert.equal(((await health.json()) as { checks: { store: string } }).checks.store, 'damaged');
      const keyed = await api(server.url, 'GET', '/api/v1/health', key);
      assert.equal(keyed.json.data.checks.store, 'damaged');
      assert.ok(!statuses.includes(500));
    } finally {
      await server.stop();
    }
    const lines = logLines(server);
    const damage = lines.filter((l) => /is damaged/.test(l.msg));
    assert.equal(damage.length, 1, 'the damage is logged once');
    assert.equal(damage[0]?.level, 50);
    assert.ok(damage[0]?.msg.includes(file), damage[0]?.msg);
    assert.equal(lines.filter((l) => l.level >= 50 && l !== damage[0]).length, 0, 'no request failed as an internal error');
  });
});
