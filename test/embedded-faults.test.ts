import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, chownSync, closeSync, existsSync, openSync, rmSync, writeSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { tempDir } from './helpers.ts';
import { SqliteStore } from '../src/store/sqlite.ts';
import { api, BIN, childEnv, ROOT, runCli, startServerProcess, type ServerProcess } from './process.ts';
import { eventually } from './services.ts';

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

/** Mounts a file system of `size` at `dir` (root only); false where it cannot. */
function mountSmall(dir: string, size: string): boolean {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Writes to `file` until the file system is full. */
function fillDisk(file: string): void {
  const fd = openSync(file, 'w');
  const chunk = Buffer.alloc(64 * 1024, 1);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (err) {
    assert.equal((err as NodeJS.ErrnoException).code, 'ENOSPC');
  } finally {
    closeSync(fd);
  }
}

describe('embedded store: a database file whose header is overwritten', () => {
  test('the start is refused in one line that says the file is damaged and what to do', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'reprise.db');
    await new SqliteStore(file).close();
    overwritePage(file, 1, 100);
    const started = await runCli(['serve'], { REPRISE_DATA_DIR: dir, REPRISE_EMBEDDER: 'none', HOST: '127.0.0.1', PORT: '0' });
    assert.equal(started.code, 1, started.stdout);
    assert.equal(started.stderr.trim().split('\n').length, 1, started.stderr);
    assert.match(started.stderr, /file is not a database: the file is damaged or is no Reprise database; restore it from a backup/);
  });
});

describe('embedded store: a database file damaged where the index is loaded from', () => {
  test(
    'the load stops at once with the damage logged once and said by the health, not tried again every second for good',
    { timeout: 120_000 },
    async () => {
      const dir = tempDir();
      const env = { REPRISE_DATA_DIR: dir, REPRISE_EMBED_WORKERS: '1' };
      let server = await startServerProcess(env, 120_000);
      const key = bootstrapKey(server);
      for (let i = 0; i < 5; i++) {
        const res = await api(server.url, 'POST', '/api/v1/store', key, { messages: [user(`question ${i}`)], answer: `answer ${i}` });
        assert.equal(res.status, 200);
      }
      assert.equal(await server.stop(), 0);
      // No snapshot: the index is read from the entries, whose table's page is overwritten.
      rmSync(path.join(dir, 'index'), { recursive: true, force: true });
      const file = path.join(dir, 'reprise.db');
      const db = new Database(file, { readonly: true });
      const pageSize = db.pragma('page_size', { simple: true }) as number;
      const root = db.prepare("SELECT rootpage FROM sqlite_master WHERE name = 'entries'").pluck().get() as number;
      db.close();
      overwritePage(file, root, pageSize);

      server = await startServerProcess(env, 120_000, { keepOutput: true });
      try {
        const health = await fetch(`${server.url}/healthz`);
        const body = (await health.json()) as { checks: Record<string, string> };
        assert.equal(body.checks.store, 'damaged', JSON.stringify(body));
        assert.equal(body.checks.index, 'unavailable', JSON.stringify(body));
      } finally {
        await server.stop();
      }
      const lines = logLines(server);
      assert.equal(lines.filter((l) => /is damaged/.test(l.msg)).length, 1, server.stdout());
      assert.equal(lines.filter((l) => /trying again/.test(l.msg)).length, 0, server.stdout());
    },
  );
});

describe('embedded store: the disk full at shutdown', () => {
  test(
    'the index snapshot cannot be saved: a warning, exit code 0, and nothing lost at the next start',
    { timeout: 180_000 },
    async (t) => {
      const dir = tempDir();
      // A file system of its own to fill: needs root (as the CI machine runs) and leave to mount.
      if (!mountSmall(dir, '32m')) {
        t.skip('cannot mount a tmpfs here (needs root)');
        return;
      }
      try {
        const env = { REPRISE_DATA_DIR: dir, REPRISE_EMBED_WORKERS: '1' };
        let server = await startServerProcess(env, 120_000, { keepOutput: true });
        const key = bootstrapKey(server);
        const stored = 10;
        for (let i = 0; i < stored; i++) {
          const res = await api(server.url, 'POST', '/api/v1/store', key, { messages: [user(`question ${i}`)], answer: `answer ${i}` });
          assert.equal(res.status, 200);
          assert.equal(res.json.stored, true);
        }
        // The counters of those stores written by the server's batch, before the disk fills.
        const db = new Database(path.join(dir, 'reprise.db'), { readonly: true });
        try {
          const counted = () => (db.prepare('SELECT COALESCE(SUM(stores), 0) FROM usage').pluck().get() as number) === stored;
          assert.ok(await eventually(async () => counted()), 'the counters are written');
        } finally {
          db.close();
        }
        const filler = path.join(dir, 'filler');
        fillDisk(filler);
        assert.equal(await server.stop(), 0, server.stdout());
        const warned = logLines(server).filter((l) => /snapshot could not be saved at shutdown; nothing is lost/.test(l.msg));
        assert.equal(warned.length, 1, server.stdout());
        assert.equal(warned[0]?.level, 40);
        rmSync(filler);

        server = await startServerProcess(env, 120_000);
        try {
          for (let i = 0; i < stored; i++) {
            const hit = await api(server.url, 'POST', '/api/v1/check', key, { messages: [user(`question ${i}`)] });
            assert.equal(hit.json.answer, `answer ${i}`);
          }
          // A question worded otherwise is found in the index of the next start.
          const similar = await api(server.url, 'POST', '/api/v1/check', key, { messages: [user('Question 3?')] });
          assert.equal(similar.json.cache_hit, true, JSON.stringify(similar.json));
          const usage = await api(server.url, 'GET', '/api/v1/usage', key);
          assert.equal(usage.json.stores, stored, JSON.stringify(usage.json));
        } finally {
          await server.stop();
        }
      } finally {
        execFileSync('umount', [dir]);
      }
    },
  );
});

/** The command that runs the server as a user other than root: as it is, or through setpriv when this is root. */
function asOtherUser(): { command: string[]; uid: number; gid: number } | string {
  if (process.getuid?.() !== 0) return { command: [process.execPath], uid: process.getuid?.() ?? -1, gid: -1 };
  const ids = (flag: string) => Number(spawnSync('id', [flag, 'nobody'], { encoding: 'utf8' }).stdout.trim());
  const command = ['setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups', process.execPath];
  const probe = spawnSync(command[0] as string, [...command.slice(1), BIN, 'help'], { cwd: ROOT, env: childEnv({ HOME: '/tmp' }) });
  return probe.status === 0
    ? { command, uid: ids('-u'), gid: ids('-g') }
    : 'cannot run the server as nobody here (setpriv, or a checkout it cannot read)';
}

describe('embedded store: a database file this user cannot write', () => {
  test(
    'the server refuses to start, in one line naming the file and its permissions, rather than serve read-only',
    { timeout: 60_000 },
    async (t) => {
      const other = asOtherUser();
      if (typeof other === 'string') {
        t.skip(other);
        return;
      }
      const dir = tempDir();
      const file = path.join(dir, 'reprise.db');
      await new SqliteStore(file).close();
      if (other.gid >= 0) {
        chownSync(dir, other.uid, other.gid);
        chownSync(file, other.uid, other.gid);
      }
      // Read-only for its owner, the user the server runs as (a copy made with `cp -p` of a backup).
      chmodSync(file, 0o444);
      const [command, ...args] = other.command as [string, ...string[]];
      const child = spawn(command, [...args, BIN, 'serve'], {
        cwd: ROOT,
        env: childEnv({ HOME: '/tmp', HOST: '127.0.0.1', PORT: '0', REPRISE_DATA_DIR: dir, REPRISE_EMBEDDER: 'none' }),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        stdout += d;
        // A server that starts all the same is stopped, and the test fails on its exit code.
        if (/Reprise is listening/.test(stdout)) child.kill();
      });
      child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      const [code] = (await once(child, 'exit')) as [number | null];
      assert.equal(code, 1, `${stdout}\n${stderr}`);
      const lines = stderr.trim().split('\n');
      assert.equal(lines.length, 1, stderr);
      assert.match(
        lines[0] as string,
        new RegExp(`^reprise: cannot open the store at REPRISE_DATA_DIR \\(${file}\\): ${file} is not writable by this user .*mode 0444`),
      );
      assert.doesNotMatch(stdout, /rp_live_|Reprise is listening/);
    },
  );
});
