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
