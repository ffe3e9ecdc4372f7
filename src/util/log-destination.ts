import pino from 'pino';

/** Bytes of log lines handed on at once. */
const BATCH_BYTES = 16 * 1024;
/** Pending lines are handed on at the latest this many milliseconds after the first of them. */
const BATCH_MS = 20;
/**
 * Bytes that may wait for a reader that does not read (a stalled pipe, a terminal paused): past
 * them, new lines are dropped, not kept in memory without bound.
 */
const PENDING_MAX = 64 * 1024 * 1024;

/** sonic-boom in buffer mode: it takes the bytes it is given, as they are. */
interface ByteSink {
  write(data: Buffer): boolean;
  flushSync(): void;
  destroy(): void;
  on(event: 'write', listener: (bytes: number) => void): void;
  on(event: 'drop', listener: (data: Buffer) => void): void;
  on(event: 'error', listener: (err: NodeJS.ErrnoException) => void): void;
}

/**
 * The server's log destination. Each line is encoded into a batch buffer as it is logged, and
 * each batch of about 16 KB (or whatever is pending 20 ms after its first line) is handed to
 * sonic-boom, which writes it asynchronously.
 *
 * Handing sonic-boom one string per line costs more than making the line: it measures the
 * byte length of its whole pending text on every write, and lines kept as strings are copied
 * again, long after they were made, when that text is flattened. Lines still pending are
 * written by `flush()`, and by `flushSync()` when the process exits.
 *
 * A reader that stops reading leaves up to 64 MB pending; lines past that are dropped, and
 * once lines are written again a line says how many were lost.
 */
export class LogDestination {
  private readonly out: ByteSink;
  private batch = Buffer.allocUnsafe(BATCH_BYTES * 4);
  private used = 0;
  private timer: NodeJS.Timeout | null = null;
  /** Bytes handed to sonic-boom, and bytes it has written: equal when nothing is in flight. */
  private handed = 0;
  private written = 0;
  private idle: (() => void)[] = [];
  /** Set when a write has failed (the reader gone, the disk full): nothing more will be written. */
  private closed = false;
  /** Bytes dropped, as the reader did not take them, since the last notice of it. */
  private droppedBytes = 0;

  constructor(fd = 1) {
    this.out = pino.destination({ dest: fd, sync: false, contentMode: 'buffer', maxLength: PENDING_MAX }) as unknown as ByteSink;
    this.out.on('write', (bytes) => {
      this.written += bytes;
      if (this.droppedBytes > 0) this.noteDropped();
      if (this.written === this.handed) this.settle();
    });
    this.out.on('drop', (data) => {
      this.handed -= data.length;
      this.droppedBytes += data.length;
      if (this.written === this.handed) this.settle();
    });
    this.out.on('error', (err) => {
      this.closed = true;
      // Dropped, so that pino's flush at exit does not try it again: sonic-boom retries a failed
      // synchronous write forever, and the process, exiting for this very failure, would hang
      // there instead, its port open and nothing answered.
      this.out.destroy();
      this.settle();
      // A closed reader is pino's to ignore; any other failure to write logs stays fatal.
      if (err.code !== 'EPIPE') throw err;
    });
    process.once('exit', this.flushSync);
  }

  /** pino's stream interface: one serialised line, newline included. */
  write(line: string): boolean {
    // A UTF-16 code unit is at most 3 bytes of UTF-8.
    const most = line.length * 3;
    if (this.used + most > this.batch.length) this.drain();
    if (most > this.batch.length) {
      this.hand(Buffer.from(line, 'utf8'));
      return true;
    }
    this.used += this.batch.write(line, this.used, 'utf8');
    if (this.used >= BATCH_BYTES) this.drain();
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
    if (this.used === 0) return;
    const bytes = this.batch.subarray(0, this.used);
    this.batch = Buffer.allocUnsafe(BATCH_BYTES * 4);
    this.used = 0;
    this.hand(bytes);
  };

  /** The line that says how much was lost while the reader did not read (pino's shape, level warn). */
  private noteDropped(): void {
    const bytes = this.droppedBytes;
    this.droppedBytes = 0;
    const msg = `${bytes} bytes of log lines were dropped: the log's reader did not take them`;
    this.write(`${JSON.stringify({ level: 40, time: Date.now(), pid: process.pid, dropped_bytes: bytes, msg })}\n`);
  }

  private hand(bytes: Buffer): void {
    this.handed += bytes.length;
    this.out.write(bytes);
  }

  /** Resolves once every line logged so far has been written (or cannot be). */
  flush(): Promise<void> {
    this.drain();
    if (this.closed || this.written === this.handed) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  private settle(): void {
    for (const resolve of this.idle.splice(0)) resolve();
  }

  /**
   * Writes everything pending before returning, for when the process is exiting. A write
   * already in flight may land after the ones made here; `flush()` waits for it instead.
   */
  readonly flushSync = (): void => {
    // A destination that failed (a disk full, a reader gone) is dropped (see the constructor).
    if (this.closed) return;
    this.drain();
    this.out.flushSync();
  };
}
