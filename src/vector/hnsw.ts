import {
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';
import usearch, { type Matches, type ScalarKind } from 'usearch';
import { BruteForceIndex, neighboursOf } from './brute.ts';
import type { Neighbour, VectorIndex } from './interface.ts';

type Graph = InstanceType<typeof usearch.Index>;

/** usearch's thread count for inserts (0 would be one per core; see `addNew`). */
const SINGLE_THREAD = 1;

/** How the graph stores vectors: half precision keeps recall on near-duplicates at half the memory. */
export type Quantization = 'f32' | 'f16' | 'i8';

export interface HnswOptions {
  /** A partition moves from exact search to HNSW when it reaches this many vectors. */
  crossover?: number;
  /** Graph degree. */
  m?: number;
  efConstruction?: number;
  /** Search breadth; at least k. */
  efSearch?: number;
  quantization?: Quantization;
  /** The graph of a partition that crosses over as it grows is built in slices: at most this many ms an event-loop turn, */
  sliceMs?: number;
  /** and at most this many vectors inserted. */
  sliceVectors?: number;
}

/** How a partition is searched: exactly, exactly while its graph is built, or through its graph. */
export type PartitionState = 'exact' | 'promoting' | 'graph';

/** A partition's graph being built, a slice at a time, while its exact index still serves it. */
interface Build {
  readonly graph: Graph;
  /** The ids the partition held when the build began, inserted in this order from `next`. */
  readonly ids: readonly number[];
  next: number;
  /** Ids added, replaced or removed since the build began: set right in the graph before it serves. */
  readonly changed: Set<number>;
}

/**
 * Exact search for small partitions and an HNSW graph (usearch, half-precision vectors) for
 * large ones. A partition is promoted once it reaches `crossover` vectors.
 *
 * Building a graph of 2,000 vectors of 512 dimensions takes 0.5–1.3 s of one core. A partition
 * that crosses over as it grows (`add`) is therefore built in slices of a few milliseconds, one an
 * event-loop turn (`setImmediate`), so that requests of every account are answered in between.
 * Until the graph is whole, the partition's exact index stays authoritative: it serves searches
 * (exact results), takes adds, replacements and removals, and is what a snapshot writes. The ids
 * changed during the build are set right in the graph in the last slices; then, in the same turn,
 * the graph serves the partition and the exact copy is dropped. `promoted()` settles when no build
 * is left; `clear()` and `close()` end builds in progress (the partitions stay exact).
 * `addMany` (a bulk load: the benchmark's) and snapshot loads build their graphs at once; the
 * load at start adds a vector at a time (`CacheService.loadIndex`), between requests.
 */
export class HybridIndex implements VectorIndex {
  private small: BruteForceIndex;
  private readonly smallCount = new Map<string, number>();
  private readonly graphs = new Map<string, Graph>();
  private readonly crossover: number;
  private readonly m: number;
  private readonly efConstruction: number;
  private readonly efSearch: number;
  private readonly quantization: Quantization;
  private readonly sliceMs: number;
  private readonly sliceVectors: number;
  private readonly builds = new Map<string, Build>();
  /** The next slice of the builds, if any is scheduled. */
  private slice: NodeJS.Immediate | null = null;
  private waiters: (() => void)[] = [];
  /** No build starts once closed. */
  private closed = false;
  private count = 0;
  /** The highest id ever added: what a snapshot covers. */
  private maxId = 0;

  constructor(
    readonly dimensions: number,
    opts: HnswOptions = {},
  ) {
    this.small = new BruteForceIndex(dimensions);
    this.crossover = opts.crossover ?? 5000;
    this.m = opts.m ?? 16;
    this.efConstruction = opts.efConstruction ?? 256;
    this.efSearch = opts.efSearch ?? 128;
    this.quantization = opts.quantization ?? 'f16';
    this.sliceMs = opts.sliceMs ?? 2;
    this.sliceVectors = opts.sliceVectors ?? 64;
  }

  get size(): number {
    return this.count;
  }

  add(partition: string, id: number, vector: Float32Array): void {
    if (id > this.maxId) this.maxId = id;
    const graph = this.graphs.get(partition);
    if (graph) {
      this.addToGraph(graph, id, vector);
      return;
    }
    const before = this.small.size;
    this.small.add(partition, id, vector);
    const added = this.small.size - before;
    this.count += added;
    const n = (this.smallCount.get(partition) ?? 0) + added;
    this.smallCount.set(partition, n);
    const build = this.builds.get(partition);
    if (build) build.changed.add(id);
    else if (n >= this.crossover) this.startBuild(partition);
  }

  addMany(items: readonly { partition: string; id: number; vector: Float32Array }[]): void {
    const byPartition = new Map<string, { id: number; vector: Float32Array }[]>();
    for (const it of items) {
      if (it.id > this.maxId) this.maxId = it.id;
      let list = byPartition.get(it.partition);
      if (!list) byPartition.set(it.partition, (list = []));
      list.push(it);
    }
    for (const [partition, list] of byPartition) {
      if (this.builds.has(partition)) this.finishBuild(partition);
      let graph = this.graphs.get(partition);
      const held = this.smallCount.get(partition) ?? 0;
      if (!graph && held + list.length < this.crossover) {
        for (const it of list) this.add(partition, it.id, it.vector);
        continue;
      }
      if (!graph) {
        this.promote(partition);
        graph = this.graphs.get(partition) as Graph;
      }
      // Keys already present are replaced one by one; new keys go in one call.
      const fresh = new Map<number, { id: number; vector: Float32Array }>();
      for (const it of list) {
        if (graph.contains(BigInt(it.id))) this.addToGraph(graph, it.id, it.vector);
        else fresh.set(it.id, it);
      }
      this.addNew(graph, [...fresh.values()]);
      this.count += fresh.size;
    }
    this.settle();
  }

  /**
   * Adds vectors under keys the graph does not hold, in one call on one thread. usearch's
   * concurrent inserts (unum-cloud/USearch#735) leave some nodes linked to no other: stored, yet
   * never found by a search, not even with their own vector, so an entry of a partition promoted
   * to a graph, or loaded into one at start, could stop matching for good.
   */
  private addNew(graph: Graph, items: readonly { id: number; vector: Float32Array }[]): void {
    if (items.length === 0) return;
    const matrix = new Float32Array(items.length * this.dimensions);
    const keys = new BigUint64Array(items.length);
    items.forEach((it, i) => {
      matrix.set(it.vector, i * this.dimensions);
      keys[i] = BigInt(it.id);
    });
    graph.add(keys, matrix, SINGLE_THREAD);
  }

  private newGraph(): Graph {
    return new usearch.Index({
      dimensions: this.dimensions,
      metric: usearch.MetricKind.IP,
      quantization: this.quantization as ScalarKind,
      connectivity: this.m,
      expansion_add: this.efConstruction,
      expansion_search: this.efSearch,
      multi: false,
    });
  }

  private addToGraph(graph: Graph, id: number, vector: Float32Array): void {
    const key = BigInt(id);
    if (graph.contains(key)) graph.remove(key);
    else this.count++;
    graph.add(key, vector);
  }

  private promote(partition: string): void {
    const ids = this.small.ids(partition);
    const graph = this.newGraph();
    this.graphs.set(partition, graph);
    this.addNew(
      graph,
      ids.flatMap((id) => {
        const vector = this.small.vector(partition, id);
        return vector ? [{ id, vector }] : [];
      }),
    );
    this.small.drop(partition);
    this.smallCount.delete(partition);
  }

  /** How `partition` is searched now; null if it holds nothing. */
  stateOf(partition: string): PartitionState | null {
    if (this.graphs.has(partition)) return 'graph';
    if (this.builds.has(partition)) return 'promoting';
    return this.smallCount.has(partition) ? 'exact' : null;
  }

  /** Settles when no partition's graph is being built (each is serving, or the build was ended). */
  promoted(): Promise<void> {
    if (this.builds.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Ends the builds in progress, and starts no other: partitions that cross over stay exact. */
  close(): void {
    this.closed = true;
    this.cancelBuilds();
  }

  private startBuild(partition: string): void {
    if (this.closed) return;
    this.builds.set(partition, { graph: this.newGraph(), ids: this.small.ids(partition), next: 0, changed: new Set() });
    this.schedule();
  }

  private schedule(): void {
    if (this.slice === null && this.builds.size > 0) this.slice = setImmediate(() => this.runSlice());
  }

  /** One turn's work on the builds, oldest first: `sliceVectors` insertions or `sliceMs`, whichever ends first. */
  private runSlice(): void {
    this.slice = null;
    const deadline = performance.now() + this.sliceMs;
    let budget = this.sliceVectors;
    for (const partition of [...this.builds.keys()]) {
      try {
        budget -= this.build(partition, budget, deadline);
      } catch {
        // The graph could not take a vector (out of memory): the partition stays exact, and the
        // build starts again at its next add.
        this.builds.delete(partition);
      }
      if (budget <= 0 || performance.now() >= deadline) break;
    }
    this.schedule();
    this.settle();
  }

  /** Builds all that is left of a partition's graph now (`addMany`: a bulk load). */
  private finishBuild(partition: string): void {
    this.build(partition, Infinity, Infinity);
  }

  /**
   * Inserts up to `budget` vectors into the partition's graph, until `deadline`: first those it
   * held when the build began, then those changed since (replaced ones taken out and put in
   * again, removed ones taken out). When none is left the graph serves the partition. Returns
   * the vectors inserted or taken out.
   */
  private build(partition: string, budget: number, deadline: number): number {
    const build = this.builds.get(partition) as Build;
    const { graph, ids, changed } = build;
    let done = 0;
    while (done < budget && performance.now() < deadline) {
      if (build.next < ids.length) {
        const id = ids[build.next++] as number;
        // Changed since: set in the graph with the others changed, at the end.
        if (changed.has(id)) continue;
        this.insert(graph, id, this.small.row(partition, id));
        done++;
        continue;
      }
      const next = changed.values().next();
      if (next.done) {
        // Atomic for searches: nothing else runs until this turn ends.
        this.builds.delete(partition);
        this.graphs.set(partition, graph);
        this.small.drop(partition);
        this.smallCount.delete(partition);
        break;
      }
      const id = next.value;
      changed.delete(id);
      const key = BigInt(id);
      if (graph.contains(key)) graph.remove(key);
      this.insert(graph, id, this.small.row(partition, id));
      done++;
    }
    return done;
  }

  /** Adds one vector under a key the graph does not hold, on this thread (see `addNew`). */
  private insert(graph: Graph, id: number, vector: Float32Array | null): void {
    if (vector) graph.add(BigUint64Array.of(BigInt(id)), vector, SINGLE_THREAD);
  }

  private cancelBuilds(): void {
    if (this.slice !== null) clearImmediate(this.slice);
    this.slice = null;
    this.builds.clear();
    this.settle();
  }

  /** Settles `promoted()` once no build is left. */
  private settle(): void {
    if (this.builds.size > 0 || this.waiters.length === 0) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }

  remove(partition: string, id: number): void {
    const graph = this.graphs.get(partition);
    if (graph) {
      const key = BigInt(id);
      if (!graph.contains(key)) return;
      graph.remove(key);
      this.count--;
      return;
    }
    const before = this.small.size;
    this.small.remove(partition, id);
    const removed = before - this.small.size;
    if (removed > 0) {
      this.builds.get(partition)?.changed.add(id);
      this.count -= removed;
      const n = (this.smallCount.get(partition) ?? 1) - removed;
      if (n <= 0) this.smallCount.delete(partition);
      else this.smallCount.set(partition, n);
    }
  }

  partitions(): string[] {
    return [...this.graphs.keys(), ...this.smallCount.keys()];
  }

  /** Removes a whole partition, ending its graph's build if one is in progress. */
  drop(partition: string): void {
    const graph = this.graphs.get(partition);
    if (graph) {
      this.count -= graph.size();
      this.graphs.delete(partition);
    }
    if (this.builds.delete(partition)) this.settle();
    const held = this.smallCount.get(partition);
    if (held !== undefined) {
      this.small.drop(partition);
      this.smallCount.delete(partition);
      this.count -= held;
    }
  }

  /** Whether a snapshot of this shape can be loaded into this index. */
  accepts(m: Pick<Manifest, 'dimensions' | 'quantization' | 'm'>): boolean {
    return m.dimensions === this.dimensions && m.quantization === this.quantization && m.m === this.m;
  }

  /** Empties the index, ending the builds in progress. */
  clear(): void {
    this.cancelBuilds();
    this.small = new BruteForceIndex(this.dimensions);
    this.smallCount.clear();
    this.graphs.clear();
    this.count = 0;
    this.maxId = 0;
  }

  /** Writes the partitions into `dir`; see saveSnapshot. */
  writeTo(dir: string, tag: string, watermark = this.maxId): Omit<Manifest, 'digests' | 'token'> {
    const graphs: Manifest['graphs'] = [];
    let n = 0;
    for (const [partition, graph] of this.graphs) {
      const file = `graph-${n++}.usearch`;
      graph.save(path.join(dir, file));
      graphs.push({ partition, file, size: graph.size() });
    }
    const parts: Buffer[] = [];
    let flatVectors = 0;
    for (const { name, ids, data } of this.small.partitionsData()) {
      flatVectors += ids.length;
      const nameBytes = Buffer.from(name, 'utf8');
      const head = Buffer.alloc(8);
      head.writeUInt32LE(nameBytes.length, 0);
      head.writeUInt32LE(ids.length, 4);
      parts.push(head, nameBytes, Buffer.from(Float64Array.from(ids).buffer), Buffer.from(data.buffer, data.byteOffset, data.byteLength));
    }
    const flat = Buffer.concat(parts);
    writeFileSync(path.join(dir, 'flat.bin'), flat);
    return {
      format: 3,
      dimensions: this.dimensions,
      quantization: this.quantization,
      m: this.m,
      tag,
      watermark,
      flat: 'flat.bin',
      flatBytes: flat.length,
      flatVectors,
      graphs,
    };
  }

  /** Reads a snapshot into this (empty) index; see loadSnapshot. */
  readFrom(dir: string, manifest: Manifest): void {
    for (const g of manifest.graphs) {
      const graph = this.newGraph();
      graph.load(path.join(dir, g.file));
      if (graph.size() !== g.size) throw new Error(`snapshot graph ${g.file} holds ${graph.size()} vectors, expected ${g.size}`);
      this.graphs.set(g.partition, graph);
      this.count += g.size;
    }
    const buf = readFileSync(path.join(dir, manifest.flat));
    // A file cut short at a partition's boundary reads as valid but fewer vectors: the entries
    // it lost would never be read again, as the watermark says they are in the snapshot.
    if (buf.length !== manifest.flatBytes)
      throw new Error(`snapshot ${manifest.flat} has ${buf.length} bytes, expected ${manifest.flatBytes}`);
    const d = this.dimensions;
    let off = 0;
    let vectors = 0;
    while (off < buf.length) {
      const nameLength = buf.readUInt32LE(off);
      const count = buf.readUInt32LE(off + 4);
      off += 8;
      const name = buf.toString('utf8', off, off + nameLength);
      off += nameLength;
      const ids = new Float64Array(buf.buffer.slice(buf.byteOffset + off, buf.byteOffset + off + count * 8));
      off += count * 8;
      const data = new Float32Array(buf.buffer.slice(buf.byteOffset + off, buf.byteOffset + off + count * d * 4));
      off += count * d * 4;
      // At once: a partition saved while its graph was being built is built here, at start.
      this.addMany(
        Array.from({ length: count }, (_, i) => ({ partition: name, id: ids[i] as number, vector: data.subarray(i * d, (i + 1) * d) })),
      );
      vectors += count;
    }
    if (vectors !== manifest.flatVectors)
      throw new Error(`snapshot ${manifest.flat} holds ${vectors} vectors, expected ${manifest.flatVectors}`);
    this.maxId = Math.max(this.maxId, manifest.watermark);
  }

  search(partition: string, query: Float32Array, k: number): Neighbour[] {
    const graph = this.graphs.get(partition);
    if (!graph) return this.small.search(partition, query, k);
    const n = Math.min(k, graph.size());
    if (n <= 0) return [];
    return neighboursOf(graph.search(query, n, 1) as Matches, (key) => key);
  }
}

/**
 * What a snapshot directory describes. `watermark` says what it covers: the number of the last
 * vector write reflected (Store.vectorSeq), or, by default, the highest entry id it holds.
 */
export interface Manifest {
  /** 3 since files carry digests; a snapshot of format 2 is not loaded (the index is rebuilt once). */
  format: 3;
  dimensions: number;
  quantization: Quantization;
  m: number;
  tag: string;
  /** Names the database state the snapshot was made from; a snapshot is loaded only beside it. */
  token: string | null;
  watermark: number;
  flat: string;
  /** Length of the flat file and the vectors in it, checked when it is read. */
  flatBytes: number;
  flatVectors: number;
  graphs: { partition: string; file: string; size: number }[];
  /** The SHA-256 of each file, by name. */
  digests: Record<string, string>;
}

/** The SHA-256 of a file, read in chunks: a large graph is not held twice, nor refused as over 2 GB. */
function digestOf(file: string): string {
  const hash = createHash('sha256');
  const chunk = Buffer.allocUnsafe(8 << 20);
  const fd = openSync(file, 'r');
  try {
    for (let n; (n = readSync(fd, chunk, 0, chunk.length, null)) > 0;) hash.update(chunk.subarray(0, n));
  } finally {
    closeSync(fd);
  }
  return hash.digest('hex');
}

/**
 * Writes the index to `dir` (graphs in usearch's file format, small partitions as packed
 * float32 rows) so a restart loads it instead of rebuilding. The new snapshot is written beside
 * the old one (`dir.new`), made durable, and swapped in by two renames (`dir` to `dir.old`, then
 * `dir.new` to `dir`), so a crash leaves one whole snapshot or the other: a kill between the two
 * renames leaves no `dir`, but both beside it, and `findSnapshots` finds them there.
 * `tag` names what the vectors mean (the embedder); a snapshot with another tag is not loaded.
 * `token` names the state of the database it is made from (see loadSnapshot); none ties it to none.
 * `watermark` says what the index holds (see Manifest); loadSnapshot returns it.
 */
export function saveSnapshot(index: HybridIndex, dir: string, tag: string, token: string | null = null, watermark?: number): void {
  const [, tmp, old] = placesOf(dir) as [string, string, string];
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  const written = index.writeTo(tmp, tag, watermark);
  const files = [written.flat, ...written.graphs.map((g) => g.file)];
  const manifest: Manifest = { ...written, token, digests: Object.fromEntries(files.map((f) => [f, digestOf(path.join(tmp, f))])) };
  writeFileSync(path.join(tmp, 'manifest.json'), JSON.stringify(manifest));
  // On disk before the renames make it the snapshot, so a power loss cannot leave a short file.
  for (const f of readdirSync(tmp)) syncPath(path.join(tmp, f));
  syncPath(tmp);
  rmSync(old, { recursive: true, force: true });
  if (existsSync(dir)) renameSync(dir, old);
  renameSync(tmp, dir);
  syncPath(path.dirname(dir));
  rmSync(old, { recursive: true, force: true });
}

function syncPath(p: string): void {
  const fd = openSync(p, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Where a snapshot of `dir` may be: in place, and beside it after a save ended between its renames (see saveSnapshot). */
function placesOf(dir: string): string[] {
  return [dir, `${dir}.new`, `${dir}.old`];
}

/** A snapshot on disk (see findSnapshots): where it is, the token it was saved with, and its manifest. */
export interface FoundSnapshot {
  dir: string;
  token: string | null;
  manifest: Manifest;
}

/**
 * The snapshots at `dir` whose manifest can be read: the one there, then those a save ended
 * between its two renames leaves beside it, the new one (`dir.new`, whole by then) and the old one
 * (`dir.old`). Which of them is the database's is said by its token: the old one's until the new
 * one's is recorded (the embedded store records it after the save, PostgreSQL before).
 */
export function findSnapshots(dir: string): FoundSnapshot[] {
  const found: FoundSnapshot[] = [];
  for (const at of placesOf(dir)) {
    let manifest: Manifest;
    try {
      manifest = JSON.parse(readFileSync(path.join(at, 'manifest.json'), 'utf8')) as Manifest;
    } catch {
      continue;
    }
    found.push({ dir: at, token: typeof manifest.token === 'string' ? manifest.token : null, manifest });
  }
  return found;
}

/** Removes the snapshot at `dir`, and any a save or a load ended midway left beside it. */
export function dropSnapshot(dir: string): void {
  for (const at of [...placesOf(dir), `${dir}.loading`]) rmSync(at, { recursive: true, force: true });
}

/**
 * Loads a snapshot written by `saveSnapshot` into an empty index. Returns its watermark (what
 * came after it is to be read from the store), or null when there is no usable snapshot: none,
 * another tag or shape, or unreadable; an unreadable one is removed. With `keep`, a snapshot
 * loaded stays on disk (for a start after a crash, brought up to date from the store);
 * otherwise it is removed, and used once.
 *
 * It is moved aside before any of it is read, and put back only once it has loaded, and every
 * file is checked against its digest before it is parsed: a file damaged on disk would otherwise
 * be read as vectors (scores computed from bytes no embedder made) or abort the process in the
 * graphs' native loader, and, as the snapshot stayed where it was, at every start after.
 *
 * `token` is the one the database holds: a snapshot made with another (the database restored
 * from a backup, or replaced, since) describes entries that database does not have, and lacks
 * ones it has, which the watermark would keep from ever being read into the index. Of the
 * snapshots `found` (see findSnapshots: after a save ended between its renames, the new one and
 * the old one), the one saved with `token` is loaded, and put in place of the others.
 */
export function loadSnapshot(
  index: HybridIndex,
  dir: string,
  tag: string,
  token: string | null = null,
  keep = false,
  found: readonly FoundSnapshot[] = findSnapshots(dir),
): number | null {
  const loading = `${dir}.loading`;
  // A start that ended while loading (killed, or aborted by the loader) left this behind.
  rmSync(loading, { recursive: true, force: true });
  const chosen = found.find((f) => f.token === token) ?? found[0];
  if (!chosen) return null;
  const { manifest } = chosen;
  if (manifest.format !== 3 || manifest.tag !== tag || !index.accepts(manifest)) return null;
  try {
    renameSync(chosen.dir, loading);
    if (chosen.token !== token) throw new Error('snapshot made beside another state of the database');
    for (const file of [manifest.flat, ...manifest.graphs.map((g) => g.file)]) {
      if (digestOf(path.join(loading, file)) !== manifest.digests[file]) throw new Error(`snapshot ${file} does not match its digest`);
    }
    index.readFrom(loading, manifest);
    // What a save ended midway left beside it is of no use now.
    for (const at of placesOf(dir)) rmSync(at, { recursive: true, force: true });
    if (keep) {
      renameSync(loading, dir);
      syncPath(path.dirname(dir));
    }
  } catch {
    index.clear();
    return null;
  } finally {
    rmSync(loading, { recursive: true, force: true });
  }
  return manifest.watermark;
}
