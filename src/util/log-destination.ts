import pino from 'pino';

type SonicBoom = ReturnType<typeof pino.destination>;

/** Pending log text handed on at once when it reaches this many characters. */
const BATCH_CHARS = 16 * 1024;
/** Pending log text is handed on at the latest after this many milliseconds. */
const BATCH_MS = 20;

/**
 * The server's log destination: lines are collected and handed to sonic-boom (asynchronous
 * writes) in batches of about 16 KB, or 20 ms after the first line of a batch.
 *
 * sonic-boom measures the byte length of its whole pending buffer on every write it is given,
 * which at one line per request costs more than making the line; here that happens once per
 * batch. Lines still pending are written on `flushSync()` and when the process exits.
 */
export class LogDestination {
  private readonly out: SonicBoom;
  private pending = '';
  private timer: NodeJS.Timeout | null = null;

  constructor(fd = 1) {
    this.out = pino.destination({ dest: fd, sync: false });
    process.once('exit', this.flushSync);
  }

  /** pino's stream interface: one serialised line, newline included. */
  write(line: string): boolean {
    this.pending += line;
    if (this.pending.length >= BATCH_CHARS) this.drain();
    else if (this.timer === null) {
      this.timer = setTimeout(this.drain, BATCH_MS);
      this.timer.unref();
    }
    return true;
  }

  private readonly drain = (): void => {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.pending === '') return;
    const text = this.pending;
    this.pending = '';
    this.out.write(text);
  };

  /** Writes everything pending before returning. */
  readonly flushSync = (): void => {
    this.drain();
    this.out.flushSync();
  };
}
