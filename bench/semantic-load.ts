/**
 * A semantic load in a process of its own: checks of new questions (each a semantic miss, so each
 * is embedded and searched) for `duration` seconds on `connections` connections, as fast as they
 * are answered or at `rate` per second. Prints the load's `LoadResult` as JSON. Run apart from the
 * process that probes exact hits, so the probe's timings are not those of a busy load generator.
 *
 *   node --import tsx bench/semantic-load.ts '{"url": "...", "key": "...", "connections": 16, "duration": 8, "rate": 200}'
 */
import { setPriority } from 'node:os';
import { load } from './load.ts';

// The load stands in for clients on other machines. On the server's own two cores it runs at the
// lowest priority, so it takes no core from the server or the probe when they have work: run at
// normal priority, any busy process there (two shell loops, say) lifts a bare route's p99 from
// about 0.5 ms to 4 ms, and two loops at the lowest priority do not.
setPriority(19);

const opts = JSON.parse(process.argv[2] ?? '{}') as { url: string; key: string; connections: number; duration: number; rate?: number };
let n = 0;
// The parent starts its probe on this line, once this process is loaded.
process.stdout.write('start\n');
const result = await load({
  url: opts.url,
  headers: { authorization: `Bearer ${opts.key}` },
  connections: opts.connections,
  duration: opts.duration,
  ...(opts.rate !== undefined ? { rate: opts.rate } : {}),
  body: () => JSON.stringify({ messages: [{ role: 'user', content: `Semantic background load ${process.pid} ${n++} ${Math.random()}` }] }),
});
process.stdout.write(`${JSON.stringify(result)}\n`);
