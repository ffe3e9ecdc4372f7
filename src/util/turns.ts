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
