import { setImmediate as nextPass } from 'node:timers/promises';

/**
 * Hands out turns, one per pass of the event loop. Work that resumes in bursts (a batch of
 * embeddings from a worker resolves many requests at once) waits for a turn, so the requests
 * that arrived meanwhile (exact lookups) are read and answered between its pieces instead of
 * after all of them.
 */
export class Turns {
  private readonly waiting: (() => void)[] = [];
  private scheduled = false;

  /** Resolves on a later pass of the event loop, after the I/O that is ready by then. */
  next(): Promise<void> {
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      if (!this.scheduled) this.schedule();
    });
  }

  private schedule(): void {
    this.scheduled = true;
    setImmediate(this.grant);
  }

  private readonly grant = (): void => {
    this.scheduled = false;
    this.waiting.shift()?.();
    if (this.waiting.length > 0) this.schedule();
  };
}

/**
 * A time budget for work done between requests (loading an index, applying a log of changes):
 * the work goes on while `used` is false, then `pause`s, which lets the event loop run (the I/O
 * ready by then) and starts a new slice.
 */
export class Slice {
  private deadline: number;

  constructor(private readonly ms: number) {
    this.deadline = performance.now() + ms;
  }

  /** Whether this slice's time is up. */
  get used(): boolean {
    return performance.now() >= this.deadline;
  }

  /** Resolves on a later pass of the event loop, with a new slice begun. */
  async pause(): Promise<void> {
    await nextPass();
    this.deadline = performance.now() + this.ms;
  }
}
