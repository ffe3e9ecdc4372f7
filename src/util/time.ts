import { setTimeout as delay } from 'node:timers/promises';

let lastMs = Number.NaN;
let lastIso = '';

/**
 * `new Date(ms).toISOString()`, remembering the last answer: requests in the same millisecond
 * share one string instead of formatting a date each.
 */
export function isoAt(ms: number): string {
  if (ms !== lastMs) {
    lastIso = new Date(ms).toISOString();
    lastMs = ms;
  }
  return lastIso;
}

/**
 * Waits for `work` or for `ms`, whichever ends first, and never rejects. `work` is given a signal
 * that aborts when the wait is over, to drop what it waits on (a listener).
 */
export async function waitAtMost(ms: number, work: (signal: AbortSignal) => Promise<unknown>): Promise<void> {
  const over = new AbortController();
  await Promise.race([work(over.signal), delay(ms, undefined, { signal: over.signal })]).catch(() => undefined);
  over.abort();
}
