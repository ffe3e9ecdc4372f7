/**
 * A semantic load in a process of its own, so that a latency probe in the bench process measures
 * the server and not its own event loop: `node --import tsx bench/background.ts <url> <key>
 * <seconds> <connections>` sends new questions (misses that are embedded and searched) and prints
 * the result as JSON.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { load, type LoadResult } from './load.ts';

export function semanticLoadInChild(url: string, key: string, seconds: number, connections: number): Promise<LoadResult> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(import.meta.url), url, key, String(seconds), String(connections)],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) reject(new Error(`semantic load exited with ${code}`));
      else resolve(JSON.parse(out.trim().split('\n').pop() as string) as LoadResult);
    });
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [url, key, seconds, connections] = process.argv.slice(2);
  let n = 0;
  const r = await load({
    url: `${url}/api/v1/check`,
    headers: { authorization: `Bearer ${key}` },
    connections: Number(connections),
    duration: Number(seconds),
    body: () => JSON.stringify({ messages: [{ role: 'user', content: `Semantic background load ${n++} ${Math.random()}` }] }),
  });
  process.stdout.write(`${JSON.stringify(r)}\n`);
}
