import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, constants, openSync, readFileSync, readSync, rmSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { tempDir } from '../../test/helpers.ts';
import { BIN, childEnv, ROOT } from '../../test/process.ts';
import { LogDestination } from './log-destination.ts';

test('every line reaches the file in order, short, long and non-ASCII, once flushed', async () => {
  const dir = tempDir('reprise-log-');
  const file = path.join(dir, 'out.log');
  const fd = openSync(file, 'w');
  try {
    const out = new LogDestination(fd);
    const lines: string[] = [];
    for (let i = 0; i < 5000; i++) lines.push(`{"n":${i},"msg":"request completed"}\n`);
    lines.splice(100, 0, `{"msg":"${'é'.repeat(30_000)}"}\n`, `{"msg":"naïve — 東京 🚀"}\n`);
    for (const line of lines) out.write(line);
    await out.flush();
    assert.equal(readFileSync(file, 'utf8'), lines.join(''));
  } finally {
    closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a server whose log cannot be written (disk full) ends with the reason, and does not hang', async () => {
  const dir = tempDir('reprise-log-full-');
  const env = childEnv({ REPRISE_DATA_DIR: dir, REPRISE_EMBEDDER: 'none', HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info' });
  // A database made first, so that nothing is printed before the log's first line.
  assert.equal(spawnSync(process.execPath, [BIN, 'keys', 'create', '--account', 'a'], { cwd: ROOT, env }).status, 0);
  // /dev/full: every write fails with ENOSPC, as on a full disk.
  const full = openSync('/dev/full', 'w');
  const child = spawn(process.execPath, [BIN, 'serve'], { cwd: ROOT, env, stdio: ['ignore', full, 'pipe'] });
  closeSync(full);
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  const deadline = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const [code, signal] = await exited;
  clearTimeout(deadline);
  assert.equal(signal, null, 'the server hung and was killed after 20 s');
  assert.equal(code, 1);
  assert.match(stderr, /ENOSPC/);
});

test(
  'a reader that stops reading: lines past 64 MB wait for it no longer, and once it reads, a line says how much was dropped',
  { timeout: 60_000 },
  async () => {
    const dir = tempDir('reprise-log-pipe-');
    const fifo = path.join(dir, 'log.fifo');
    assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
    const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const writer = openSync(fifo, 'w');
    try {
      const out = new LogDestination(writer);
      const line = `{"level":30,"msg":"${'x'.repeat(1000)}"}\n`;
      const count = 100_000;
      // About 100 MB logged while nothing is read.
      for (let i = 0; i < count; i++) out.write(line);
      let text = '';
      let lines = 0;
      const seen: { notice: { dropped_bytes: number } | null } = { notice: null };
      const buf = Buffer.alloc(1 << 20);
      const take = (s: string) => {
        text += s;
        let nl = text.indexOf('\n');
        while (nl >= 0) {
          const l = text.slice(0, nl + 1);
          text = text.slice(nl + 1);
          if (l === line) lines++;
          else seen.notice = JSON.parse(l) as { dropped_bytes: number };
          nl = text.indexOf('\n');
        }
      };
      // The reader reads again, until the notice has come and nothing is pending.
      let flushed = false;
      while (!flushed || seen.notice === null) {
        try {
          const n = readSync(reader, buf);
          take(buf.toString('latin1', 0, n));
          continue;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
        }
        if (!flushed) void out.flush().then(() => (flushed = seen.notice !== null));
        await nextTurn();
      }
      assert.ok(lines < count, 'some lines were dropped');
      assert.ok(lines * line.length >= 60 * 1024 * 1024, `at least 60 MB were kept for the reader (${lines} lines)`);
      assert.equal(lines * line.length + (seen.notice?.dropped_bytes ?? 0), count * line.length);
    } finally {
      closeSync(writer);
      closeSync(reader);
      rmSync(dir, { recursive: true, force: true });
    }
  },
);
