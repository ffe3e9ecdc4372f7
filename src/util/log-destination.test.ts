import assert from 'node:assert/strict';
import { closeSync, openSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { tempDir } from '../../test/helpers.ts';
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
