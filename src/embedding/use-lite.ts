import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { EmbedderUnavailableError, type Embedder } from './interface.ts';
import { Lru } from '../util/lru.ts';

const DIMENSIONS = 512;
/**
 * Characters of text per batch sent to one worker (a longer text goes alone): a batch takes the
 * time of all its texts, and what comes after it waits for it whole.
 */
const BATCH_CHARS = 16_000;

export interface UseLiteOptions {
  /** Worker threads, each with its own copy of the model. Default: the number of cores. */
  workers?: number;
  /** Recent texts whose vectors are kept. Default 10,000. */
  memoSize?: number;
  /** Texts per batch sent to one worker. Default 32. */
  maxBatch?: number;
  /**
   * The workers' nice value, from 0 (the event loop's own priority) to 19 (the lowest, the
   * default): at 19, exact hits are answered first when the cores are busy, and embedding waits for
   * any other busy process on the machine too.
   */
  priority?: number;
}

interface Pending {
  text: string;
  resolve: (v: Float32Array) => void;
  reject: (err: Error) => void;
}

interface Slot {
  worker: Worker;
  busy: Pending[] | null;
  batchId: number;
}

/** Starts a worker on the compiled file, or on the TypeScript source through tsx's loader. */
function spawn(priority: number): Worker {
  const here = import.meta.url;
  const workerData = { priority };
  if (here.endsWith('.js')) return new Worker(new URL('./use-lite.worker.js', here), { workerData });
  const tsx = import.meta.resolve('tsx/esm/api');
  const entry = new URL('./use-lite.worker.ts', here).href;
  const boot = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(entry)}); })`;
  return new Worker(boot, { eval: true, workerData });
}

/**
 * The default embedder: Universal Sentence Encoder lite (512-d) in a pool of worker threads,
 * so embedding never blocks the event loop. Texts that arrive while the workers are busy are
 * grouped into batches; identical texts in flight are embedded once; recent results are memoised.
 */
class UseLitePool implements Embedder {
  readonly id = 'use-lite@1';
  readonly dimensions = DIMENSIONS;
  readonly maxBatch: number;
  backend = 'use-lite';
  private readonly slots: Slot[] = [];
  /**
   * Texts waiting for a worker, by scope (account), in the order the scopes are to be served:
   * batches take one text of each scope in turn, so an account that sends many long texts waits
   * behind its own, and another account's text goes in one of the next batches.
   */
  private readonly queues = new Map<string, Pending[]>();
  private queued = 0;
  private readonly memo: Lru<string, Float32Array>;
  private readonly inflight = new Map<string, Promise<Float32Array>>();
  private closed = false;
  private nextBatch = 1;
  private readonly priority: number;

  constructor(opts: UseLiteOptions) {
    this.maxBatch = opts.maxBatch ?? 32;
    this.memo = new Lru(opts.memoSize ?? 10_000);
    this.priority = opts.priority ?? 19;
  }

  async start(workers: number): Promise<void> {
    await Promise.all(Array.from({ length: workers }, () => this.addWorker()));
  }

  private addWorker(): Promise<void> {
    const worker = spawn(this.priority);
    const slot: Slot = { worker, busy: null, batchId: 0 };
    this.slots.push(slot);
    return new Promise((resolve, reject) => {
      let ready = false;
      worker.on('message', (msg: { ready?: true; backend?: string; id?: number; vectors?: Float32Array; error?: string }) => {
        if (msg.ready) {
          ready = true;
          if (msg.backend) this.backend = msg.backend;
          resolve();
          this.pump();
          return;
        }
        const batch = slot.busy;
        if (!batch || msg.id !== slot.batchId) return;
        slot.busy = null;
        if (msg.error !== undefined || !msg.vectors) {
          const err = new Error(`embedding failed: ${msg.error ?? 'no vectors'}`);
          for (const p of batch) p.reject(err);
        } else {
          const vectors = msg.vectors;
          batch.forEach((p, i) => p.resolve(vectors.slice(i * DIMENSIONS, (i + 1) * DIMENSIONS)));
        }
        this.pump();
      });
      const fail = (err: Error) => {
        const i = this.slots.indexOf(slot);
        if (i >= 0) this.slots.splice(i, 1);
        const batch = slot.busy;
        slot.busy = null;
        if (batch) for (const p of batch) p.reject(new Error(`embedding worker stopped: ${err.message}`));
        if (!ready) {
          reject(err);
          return;
        }
        this.respawn(1000);
      };
      worker.on('error', fail);
      worker.on('exit', (code) => {
        if (this.slots.includes(slot)) fail(new Error(`exit code ${code}`));
      });
    });
  }

  /**
   * Starts a worker in place of one that stopped. If it cannot start (the model does not load),
   * what waits is refused while no worker is left, and it is tried again later, waiting twice as
   * long each time (up to 30 s).
   */
  private respawn(retryMs: number): void {
    if (this.closed) return;
    this.addWorker().catch((e: unknown) => {
      if (this.slots.length === 0) {
        const err = new EmbedderUnavailableError(`no embedding worker is running: ${e instanceof Error ? e.message : String(e)}`);
        for (const p of this.drain()) p.reject(err);
      }
      setTimeout(() => this.respawn(Math.min(retryMs * 2, 30_000)), retryMs).unref();
    });
  }

  /** The next batch: one text of each scope in turn, up to `maxBatch` texts and `BATCH_CHARS` characters. */
  private take(): Pending[] {
    const batch: Pending[] = [];
    let chars = 0;
    while (this.queued > 0 && batch.length < this.maxBatch) {
      const [scope, waiting] = this.queues.entries().next().value as [string, Pending[]];
      const next = waiting[0] as Pending;
      if (batch.length > 0 && chars + next.text.length > BATCH_CHARS) break;
      waiting.shift();
      this.queued--;
      batch.push(next);
      chars += next.text.length;
      // The scope goes last in turn, or leaves when it has nothing more waiting.
      this.queues.delete(scope);
      if (waiting.length > 0) this.queues.set(scope, waiting);
    }
    return batch;
  }

  /** Takes every text waiting, to refuse them. */
  private drain(): Pending[] {
    const all = [...this.queues.values()].flat();
    this.queues.clear();
    this.queued = 0;
    return all;
  }

  private pump(): void {
    for (const slot of this.slots) {
      if (this.queued === 0) return;
      if (slot.busy) continue;
      const batch = this.take();
      slot.busy = batch;
      slot.batchId = this.nextBatch++;
      slot.worker.postMessage({ id: slot.batchId, texts: batch.map((p) => p.text) });
    }
  }

  private one(text: string, scope: string | undefined): Promise<Float32Array> {
    const key = scope === undefined ? text : `${scope}\u0000${text}`;
    const known = this.memo.get(key);
    if (known) return Promise.resolve(known);
    const running = this.inflight.get(key);
    if (running) return running;
    const p = new Promise<Float32Array>((resolve, reject) => {
      const waiting = this.queues.get(scope ?? '');
      if (waiting) waiting.push({ text, resolve, reject });
      else this.queues.set(scope ?? '', [{ text, resolve, reject }]);
      this.queued++;
    }).then(
      (v) => {
        this.inflight.delete(key);
        // Long texts are not memoised: the memo stays bounded in bytes (10,000 × 4 KB keys at most).
        if (text.length <= 4096) this.memo.set(key, v);
        return v;
      },
      (err: unknown) => {
        this.inflight.delete(key);
        throw err;
      },
    );
    this.inflight.set(key, p);
    return p;
  }

  async embed(texts: readonly string[], scope?: string): Promise<Float32Array[]> {
    if (this.closed) throw new Error('embedder is closed');
    if (this.slots.length === 0) throw new EmbedderUnavailableError('no embedding worker is running; one is being restarted');
    const all = Promise.all(texts.map((t) => this.one(t, scope)));
    this.pump();
    return all;
  }

  async close(): Promise<void> {
    this.closed = true;
    const err = new Error('embedder is closed');
    for (const p of this.drain()) p.reject(err);
    const slots = this.slots.splice(0);
    for (const s of slots) if (s.busy) for (const p of s.busy) p.reject(err);
    await Promise.all(slots.map((s) => s.worker.terminate()));
  }
}

/** Loads the model in every worker; resolves when all can embed. */
export async function createUseLiteEmbedder(opts: UseLiteOptions = {}): Promise<Embedder> {
  const pool = new UseLitePool(opts);
  const workers = Math.max(1, opts.workers ?? availableParallelism());
  try {
    await pool.start(workers);
  } catch (err) {
    await pool.close();
    throw err;
  }
  return pool;
}
