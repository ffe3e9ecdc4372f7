import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { UseLiteModel } from './use-lite.model.ts';

/** Messages from the pool: a batch to embed. Replies carry the packed vectors. */
interface Request {
  id: number;
  texts: string[];
}

const port = parentPort;
if (!port) throw new Error('use-lite.worker must run in a worker thread');

// Embedding yields the CPU to the event loop: on Linux a thread's nice value is its own, so
// this lowers only this worker (by default to the lowest priority, `REPRISE_EMBED_PRIORITY`), and
// exact hits are answered first when the cores are busy.
const priority = (workerData as { priority?: number } | null)?.priority ?? 19;
try {
  setPriority(priority);
} catch {
  // Not permitted here (or not supported): embedding runs at normal priority.
}

const model = await UseLiteModel.load();
port.postMessage({ ready: true, backend: model.backend });
port.on('message', (req: Request) => {
  model.embed(req.texts).then(
    (vectors) => port.postMessage({ id: req.id, vectors }, [vectors.buffer as ArrayBuffer]),
    (err: unknown) => port.postMessage({ id: req.id, error: err instanceof Error ? err.message : String(err) }),
  );
});
