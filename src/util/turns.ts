/**
 * Hands out turns, one per pass of the event loop. Work that resumes in bursts (a batch of
 * embeddings from a worker resolves many requests at once) waits for a turn, so the requests
 * that arrived meanwhile (exact lookups) are read and answered between its pieces instead of
 * after all of them.
 */
export class Turns {
  private readonly waiting: (() => void)[] = [];
  private head = 0;
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
    const resolve = this.waiting[this.head++];
    if (this.head > 1024 && this.head * 2 > this.waiting.length) {
      this.waiting.splice(0, this.head);
      this.head = 0;
    }
    resolve?.();
    if (this.head < this.waiting.length) this.schedule();
  };
}
