import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Embedder } from '../src/embedding/interface.ts';

/** A labelled pair: a cached answer for `a` is right for `b` when label is 1. Lists are user turns. */
export interface Pair {
  a: string | string[];
  b: string | string[];
  label: 0 | 1;
  source: string;
}

/** `../shared/eval` beside the project, when it exists. */
export function defaultEvalDir(): string | null {
  const dir = fileURLToPath(new URL('../../shared/eval', import.meta.url));
  return existsSync(dir) ? dir : null;
}

export function pairFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.jsonl') && !f.startsWith('prompts_') && !f.startsWith('stsb'))
    .sort()
    .map((f) => path.join(dir, f));
}

export function loadPairs(file: string, limit?: number): Pair[] {
  const rows: Pair[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const r = JSON.parse(line) as Partial<Pair> & { score?: number };
    if (r.a === undefined || r.b === undefined || (r.label !== 0 && r.label !== 1)) continue;
    rows.push({ a: r.a, b: r.b, label: r.label, source: r.source ?? path.basename(file) });
    if (limit !== undefined && rows.length >= limit) break;
  }
  return rows;
}

/** Splits rows into folds by a hash of their text, so a split is the same on every run. */
export function foldOf(p: Pair, folds: number): number {
  const h = createHash('sha256')
    .update(JSON.stringify([p.a, p.b]))
    .digest();
  return (h.readUInt32BE(0) >>> 0) % folds;
}

/**
 * An embedder that remembers vectors on disk between runs (in the system's temp directory),
 * so evaluation and training do not embed the same sentences again.
 */
export class CachedEmbedder implements Embedder {
  readonly id: string;
  readonly dimensions: number;
  readonly maxBatch: number;
  private readonly cache = new Map<string, Float32Array>();
  private readonly file: string;
  private dirty = false;

  constructor(private readonly inner: Embedder) {
    this.id = inner.id;
    this.dimensions = inner.dimensions;
    this.maxBatch = inner.maxBatch;
    const dir = path.join(tmpdir(), 'reprise-eval-cache');
    mkdirSync(dir, { recursive: true });
    this.file = path.join(dir, `${inner.id.replace(/[^\w.-]/g, '_')}.bin`);
    if (existsSync(this.file)) this.read();
  }

  private read(): void {
    const buf = readFileSync(this.file);
    let off = 0;
    while (off < buf.length) {
      const len = buf.readUInt32LE(off);
      const text = buf.toString('utf8', off + 4, off + 4 + len);
      off += 4 + len;
      const v = new Float32Array(this.dimensions);
      for (let i = 0; i < this.dimensions; i++) v[i] = buf.readFloatLE(off + i * 4);
      off += this.dimensions * 4;
      this.cache.set(text, v);
    }
  }

  save(): void {
    if (!this.dirty) return;
    const parts: Buffer[] = [];
    for (const [text, v] of this.cache) {
      const t = Buffer.from(text, 'utf8');
      const head = Buffer.alloc(4);
      head.writeUInt32LE(t.length);
      parts.push(head, t, Buffer.from(v.buffer, v.byteOffset, v.byteLength));
    }
    writeFileSync(this.file, Buffer.concat(parts));
    this.dirty = false;
  }

  async embed(texts: readonly string[]): Promise<Float32Array[]> {
    const missing = [...new Set(texts.filter((t) => !this.cache.has(t)))];
    for (let i = 0; i < missing.length; i += 256) {
      const chunk = missing.slice(i, i + 256);
      const vs = await this.inner.embed(chunk);
      chunk.forEach((t, j) => this.cache.set(t, vs[j] as Float32Array));
      this.dirty = true;
    }
    return texts.map((t) => this.cache.get(t) as Float32Array);
  }

  async close(): Promise<void> {
    this.save();
    await this.inner.close();
  }
}
