import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Message } from '../src/cache/canonical.ts';
import type { Embedder } from '../src/embedding/interface.ts';

/** A labelled pair: a cached answer for `a` is right for `b` when label is 1. Lists are user turns. */
export interface Pair {
  a: string | string[];
  b: string | string[];
  label: 0 | 1;
  source: string;
}

/** The files of real chat conversations, in the order they are replayed. */
const PROMPT_FILES = ['prompts_arena_multiturn.jsonl', 'prompts_arena_hard.jsonl', 'prompts_mtbench.jsonl'];

/**
 * The real chat conversations of `dir` (`prompts_*.jsonl`), in the order both the benchmark's prompt
 * replay and `eval/replay.ts` replay them: their system, user and assistant messages with text.
 */
export function promptConversations(dir: string): Message[][] {
  const conversations: Message[][] = [];
  for (const f of PROMPT_FILES) {
    for (const line of readFileSync(path.join(dir, f), 'utf8').split('\n')) {
      if (!line.trim()) continue;
      const row = JSON.parse(line) as { messages: { role: string; content: unknown }[] };
      conversations.push(
        row.messages.filter((m): m is Message => ['system', 'user', 'assistant'].includes(m.role) && typeof m.content === 'string'),
      );
    }
  }
  return conversations;
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

/**
 * The labelled pairs of a file. Rows scored 0–5 instead of labelled (STS-B) count as the same
 * meaning from 4 ("mostly equivalent") up and as different below 3; rows in between are left out.
 */
export function loadPairs(file: string, limit?: number): Pair[] {
  const rows: Pair[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const r = JSON.parse(line) as Partial<Pair> & { score?: number };
    const label = r.label ?? (typeof r.score === 'number' ? (r.score >= 4 ? 1 : r.score < 3 ? 0 : undefined) : undefined);
    if (r.a === undefined || r.b === undefined || (label !== 0 && label !== 1)) continue;
    rows.push({ a: r.a, b: r.b, label, source: r.source ?? path.basename(file) });
  }
  // A limit takes rows evenly spaced through the file, not its first rows (files may be grouped
  // by label or source).
  if (limit === undefined || limit >= rows.length) return rows;
  return Array.from({ length: limit }, (_, i) => rows[Math.floor((i * rows.length) / limit)] as Pair);
}

/**
 * Splits texts into folds so that every pair's two texts fall in the same fold: texts joined by
 * any pair (either label), transitively, form a component, and a component's fold is a hash of
 * its first text in sorted order. A model trained on the other folds has then seen neither text
 * of a held-out pair, nor any other pair of either text. The split is the same on every run.
 */
export function componentFolds(pairs: readonly Pair[], folds: number): (text: string | string[]) => number {
  const sets = unionFind();
  const side = (x: string | string[]) => JSON.stringify(x);
  for (const p of pairs) sets.union(side(p.a), side(p.b));
  const first = new Map<string, string>();
  for (const t of sets.members().sort()) {
    const root = sets.find(t);
    if (!first.has(root)) first.set(root, t);
  }
  return (text) => {
    const h = createHash('sha256')
      .update(first.get(sets.find(side(text))) ?? side(text))
      .digest();
    return (h.readUInt32BE(0) >>> 0) % folds;
  };
}

/** Disjoint sets of strings: `find` gives a set's root, `union` joins two sets. */
export function unionFind(): { find(x: string): string; union(a: string, b: string): void; members(): string[] } {
  const parent = new Map<string, string>();
  const find = (x: string): string => {
    let root = x;
    while (parent.has(root) && parent.get(root) !== root) root = parent.get(root) as string;
    parent.set(x, root);
    return root;
  };
  return {
    find,
    union: (a, b) => {
      const ra = find(a);
      const rb = find(b);
      if (ra !== rb) parent.set(ra, rb);
    },
    members: () => [...parent.keys()],
  };
}

/**
 * Equivalence groups for crowded mode: texts joined by a label-1 pair, transitively, and texts
 * that are the same once case, spacing and punctuation are ignored. A served entry is right when
 * it is in the query's group.
 */
export function answerGroups(pairs: readonly Pair[]): (side: string | string[]) => string {
  const sets = unionFind();
  const norm = (side: string | string[]) =>
    (Array.isArray(side) ? side : [side])
      .map((t) =>
        t
          .toLowerCase()
          .replace(/[^\p{L}\p{N}]+/gu, ' ')
          .trim(),
      )
      .join('\u0000');
  for (const p of pairs) {
    if (p.label === 1) sets.union(norm(p.a), norm(p.b));
  }
  return (side) => sets.find(norm(side));
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
    const record = (len: number) => 4 + len + this.dimensions * 4;
    // A file cut off by an older, non-atomic save: keep the whole records before the cut.
    while (off + 4 <= buf.length && off + record(buf.readUInt32LE(off)) <= buf.length) {
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
    // Written aside and renamed: a run stopped mid-write, or two runs saving at once, never
    // leave a cut-off file for the next run to read.
    const aside = `${this.file}.${process.pid}.tmp`;
    writeFileSync(aside, Buffer.concat(parts));
    renameSync(aside, this.file);
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
