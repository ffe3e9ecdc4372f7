/**
 * Measures hit quality on labelled pairs through the real CacheService (store, then check),
 * for the calibrated scorer and for raw cosine, in two modes:
 * - pairs: each pair alone in its own account: store `a`, check `b`;
 * - crowded: every `a` stored in one account, every `b` checked; a hit on the wrong entry is a
 *   wrong answer (how GPTCache reports: correct / wrong / miss).
 *
 *   npm run eval -- [--data FILE_OR_DIR] [--mode pairs|crowded|both] [--scorer calibrated|cosine|both]
 *                   [--limit N] [--json] [--explain [--threshold T]]
 *
 * --limit N runs N labelled rows of each file, evenly spaced through it.
 * --explain lists, after each table, every query with a right answer that is not served one at
 * threshold T (default 0.85) and every wrong answer served, with why (a check of another request
 * that passed over the right entry, a wrong entry nearer, the model's score, the neighbourhood
 * stage, the parts around a shared passage; `eval/explain.ts`), and their counts by cause.
 */
import { rmSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { statSync } from 'node:fs';
import { CalibratedScorer } from '../src/cache/calibrated.ts';
import type { Message } from '../src/cache/canonical.ts';
import { cosineScorer, type HitScorer } from '../src/cache/scorer.ts';
import type { CacheService } from '../src/cache/service.ts';
import { loadConfig } from '../src/config.ts';
import { createUseLiteEmbedder } from '../src/embedding/use-lite.ts';
import { createRuntime } from '../src/runtime.ts';
import type { Account } from '../src/store/interface.ts';
import { answerGroups, CachedEmbedder, defaultEvalDir, loadPairs, pairFiles, type Pair } from './data.ts';
import { explain, NotingScorer, type Explained } from './explain.ts';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';

const USAGE =
  'usage: npm run eval -- [--data FILE_OR_DIR] [--mode pairs|crowded|both] [--scorer calibrated|cosine|both] [--limit N] [--json] [--explain [--threshold T]]';

/** Stops with a one-line reason and the usage, exit code 2. */
function usageError(reason: string): never {
  console.error(`eval: ${reason}\n${USAGE}`);
  process.exit(2);
}

let parsed;
try {
  parsed = parseArgs({
    options: {
      data: { type: 'string' },
      mode: { type: 'string', default: 'both' },
      scorer: { type: 'string', default: 'both' },
      limit: { type: 'string' },
      json: { type: 'boolean', default: false },
      explain: { type: 'boolean', default: false },
      threshold: { type: 'string' },
    },
  });
} catch (err) {
  usageError((err as Error).message);
}
const { values } = parsed;
if (!['pairs', 'crowded', 'both'].includes(values.mode)) usageError(`--mode must be pairs, crowded or both, not ${values.mode}`);
if (!['calibrated', 'cosine', 'both'].includes(values.scorer))
  usageError(`--scorer must be calibrated, cosine or both, not ${values.scorer}`);
if (values.limit !== undefined && !/^[1-9]\d*$/.test(values.limit))
  usageError(`--limit must be a positive whole number, not ${values.limit}`);
if (values.threshold !== undefined && !values.explain) usageError('--threshold goes with --explain');
const explainAt = values.threshold === undefined ? 0.85 : Number(values.threshold);
if (!(explainAt >= 0 && explainAt <= 1) || values.threshold?.trim() === '')
  usageError(`--threshold must be a number from 0 to 1, not ${values.threshold}`);

const THRESHOLDS = Array.from({ length: 40 }, (_, i) => Math.round((0.6 + i * 0.01) * 100) / 100);
const SHOWN = [0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99];

/**
 * The files to run: the one given, or the pair files of a directory (`prompts_*` and the scored
 * `stsb*` file are left out of a directory; name a scored file to run it).
 */
function files(): string[] {
  const given = values.data ?? defaultEvalDir();
  if (!given) usageError('no evaluation data: pass --data FILE_OR_DIR (e.g. ../shared/eval)');
  let isDir: boolean;
  try {
    isDir = statSync(given).isDirectory();
  } catch {
    usageError(`--data ${given}: no such file or directory`);
  }
  const list = isDir ? pairFiles(given) : [given];
  for (const f of list) if (loadPairs(f, 1).length === 0) usageError(`${f}: no labelled pairs ({"a", "b", "label"} or a 0–5 "score")`);
  return list;
}

/** A pair side as a conversation: user turns, with a stand-in assistant reply between them. */
function conversation(side: string | string[]): Message[] {
  const turns = Array.isArray(side) ? side : [side];
  const out: Message[] = [];
  turns.forEach((t, i) => {
    if (i > 0) out.push({ role: 'assistant', content: '(reply)' });
    out.push({ role: 'user', content: t });
  });
  return out;
}
const keyOf = (side: string | string[]) => JSON.stringify(side);

interface Outcome {
  /** Score of the answer served at threshold 0, or null on a miss even then. */
  score: number | null;
  /** Whether the served entry is a right answer for the query. */
  right: boolean;
  label: 0 | 1;
  /** With --explain, why a right answer was not served at the threshold or a wrong one was. */
  why?: Explained;
}

/** What --explain needs of a stored entry: its text and vector as the index holds them. */
type StoredSide = { text: string; vector: Float32Array };

/** Why a check's outcome is not a right hit at the threshold, when it is worth explaining. */
function explained(
  scorer: HitScorer,
  query: string | string[],
  outcome: Outcome,
  served: StoredSide | null,
  rightEntries: StoredSide[],
  allEntries?: readonly StoredSide[],
): Explained | undefined {
  if (!values.explain || !(scorer instanceof NotingScorer)) return undefined;
  const hitRight = outcome.right && outcome.score !== null && outcome.score >= explainAt;
  const hitWrong = !outcome.right && outcome.score !== null && outcome.score >= explainAt;
  if (hitRight || (outcome.label === 0 && !hitWrong)) return undefined;
  const text = Array.isArray(query) ? query.join(' / ') : query;
  return explain(text, scorer.noted, served?.text ?? null, outcome.score, outcome.right, explainAt, rightEntries, allEntries);
}

async function withService<T>(
  scorer: HitScorer,
  embedder: CachedEmbedder,
  fn: (
    cache: CacheService,
    account: (name: string) => Promise<Account>,
    entry: (account: Account, publicId: number) => Promise<StoredSide | null>,
  ) => Promise<T>,
): Promise<T> {
  const dir = mkdtempSync(path.join(tmpdir(), 'reprise-eval-'));
  const config = loadConfig({ REPRISE_DATA_DIR: dir, REPRISE_SQLITE_SYNCHRONOUS: 'NORMAL', REPRISE_EMBEDDER: 'none' });
  const runtime = await createRuntime(config, { embedder, scorer });
  try {
    const store = runtime.ctx.store;
    const entry = async (acc: Account, publicId: number) => {
      if (!values.explain) return null;
      const e = await store.getEntry(acc.id, publicId);
      return e?.vector ? { text: e.queryText, vector: e.vector } : null;
    };
    return await fn(runtime.ctx.cache, (name) => store.createAccount(name, 'unlimited'), entry);
  } finally {
    await runtime.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function pairsMode(pairs: Pair[], scorer: HitScorer, embedder: CachedEmbedder): Promise<Outcome[]> {
  return withService(scorer, embedder, async (cache, account, entry) => {
    const out: Outcome[] = [];
    let i = 0;
    for (const p of pairs) {
      const acc = await account(`pair-${i++}`);
      const stored = await cache.store(acc, { messages: conversation(p.a), answer: 'a', model: 'eval' });
      if (scorer instanceof NotingScorer) scorer.reset();
      const r = await cache.check(acc, { messages: conversation(p.b), similarityThreshold: 0 });
      const o: Outcome = { score: r.cacheHit ? (r.similarityScore ?? 1) : null, right: p.label === 1, label: p.label };
      if (values.explain) {
        const a = await entry(acc, stored.entryId);
        o.why = explained(scorer, p.b, o, r.cacheHit ? a : null, p.label === 1 && a ? [a] : []);
      }
      out.push(o);
    }
    return out;
  });
}

async function crowdedMode(pairs: Pair[], scorer: HitScorer, embedder: CachedEmbedder): Promise<Outcome[]> {
  const group = answerGroups(pairs);
  const storedGroups = new Set(pairs.map((p) => group(p.a)));
  const queries = new Map<string, string | string[]>();
  for (const p of pairs) queries.set(keyOf(p.b), p.b);
  return withService(scorer, embedder, async (cache, account, entry) => {
    const acc = await account('crowded');
    const entryText = new Map<number, string>();
    const stored = new Set<string>();
    // With --explain, each group's entries as stored, and each entry by its id.
    const groupEntries = new Map<string, StoredSide[]>();
    const entries = new Map<number, StoredSide>();
    for (const p of pairs) {
      const a = keyOf(p.a);
      if (stored.has(a)) continue;
      stored.add(a);
      const r = await cache.store(acc, { messages: conversation(p.a), answer: a, model: 'eval' });
      entryText.set(r.entryId, group(p.a));
      const e = await entry(acc, r.entryId);
      if (e) {
        entries.set(r.entryId, e);
        groupEntries.set(group(p.a), [...(groupEntries.get(group(p.a)) ?? []), e]);
      }
    }
    const all = [...entries.values()];
    const out: Outcome[] = [];
    for (const side of queries.values()) {
      const g = group(side);
      if (scorer instanceof NotingScorer) scorer.reset();
      const r = await cache.check(acc, { messages: conversation(side), similarityThreshold: 0 });
      const right = r.cacheHit && entryText.get(r.entryId) === g;
      const o: Outcome = { score: r.cacheHit ? (r.similarityScore ?? 1) : null, right, label: storedGroups.has(g) ? 1 : 0 };
      o.why = explained(scorer, side, o, r.cacheHit ? (entries.get(r.entryId) ?? null) : null, groupEntries.get(g) ?? [], all);
      out.push(o);
    }
    return out;
  });
}

/** Ratios with nothing to divide by (no hits, no positives, no negatives) are null. */
interface Row {
  threshold: number;
  precision: number | null;
  recall: number | null;
  f1: number | null;
  /** Wrong hits among queries that have no right entry (label 0). */
  false_hit_rate: number | null;
  correct: number;
  wrong: number;
  miss: number;
}

function sweep(outcomes: Outcome[]): Row[] {
  const positives = outcomes.filter((o) => o.label === 1).length;
  const negatives = outcomes.length - positives;
  return THRESHOLDS.map((t) => {
    let correct = 0;
    let wrong = 0;
    let wrongOnNegative = 0;
    for (const o of outcomes) {
      if (o.score === null || o.score < t) continue;
      if (o.right) correct++;
      else {
        wrong++;
        if (o.label === 0) wrongOnNegative++;
      }
    }
    const precision = correct + wrong === 0 ? null : correct / (correct + wrong);
    const recall = positives === 0 ? null : correct / positives;
    const r3 = (x: number | null) => (x === null ? null : Math.round(x * 1000) / 1000);
    const f1 =
      precision === null || recall === null ? null : precision + recall === 0 ? 0 : (2 * precision * recall) / (precision + recall);
    return {
      threshold: t,
      precision: r3(precision),
      recall: r3(recall),
      f1: r3(f1),
      false_hit_rate: r3(negatives === 0 ? null : wrongOnNegative / negatives),
      correct,
      wrong,
      miss: positives - correct - outcomes.filter((o) => o.label === 1 && !o.right && o.score !== null && o.score >= t).length,
    };
  });
}

/** The explained outcomes, their counts by cause (most first), and each with its cause. */
function explainedOf(outcomes: Outcome[]): { threshold: number; causes: Record<string, number>; queries: Explained[] } {
  const queries = outcomes.flatMap((o) => (o.why ? [o.why] : []));
  const counts = new Map<string, number>();
  for (const q of queries) counts.set(q.cause, (counts.get(q.cause) ?? 0) + 1);
  const causes = Object.fromEntries([...counts].sort((x, y) => y[1] - x[1]));
  queries.sort((x, y) => x.cause.localeCompare(y.cause));
  return { threshold: explainAt, causes, queries };
}

function printExplained(e: ReturnType<typeof explainedOf>): void {
  console.log(`\nat ${e.threshold}, not served a right answer or served a wrong one, by cause:`);
  for (const [cause, n] of Object.entries(e.causes)) console.log(`  ${String(n).padStart(4)}  ${cause}`);
  for (const q of e.queries) {
    console.log(`- [${q.cause}] ${q.query}`);
    console.log(`    served ${q.served === null ? '(none)' : JSON.stringify(q.served)} at ${q.score ?? '–'}; ${q.detail}`);
  }
}

/** The first threshold whose precision, unrounded, is at least `p` (with at least one right hit). */
const firstReaching = (rows: Row[], p: number) =>
  rows.find((r) => r.correct > 0 && r.correct / (r.correct + r.wrong) >= p)?.threshold ?? null;

const dataFiles = files();
const embedder = new CachedEmbedder(await createUseLiteEmbedder({ memoSize: 0 }));
const scorers: [string, HitScorer][] = [];
const noting = (s: HitScorer): HitScorer => (values.explain ? new NotingScorer(s) : s);
if (values.scorer === 'calibrated' || values.scorer === 'both') scorers.push(['calibrated', noting(new CalibratedScorer())]);
if (values.scorer === 'cosine' || values.scorer === 'both') scorers.push(['cosine', noting(cosineScorer)]);
const modes = values.mode === 'both' ? ['pairs', 'crowded'] : [values.mode as string];
const limit = values.limit === undefined ? undefined : Number(values.limit);

const results: Record<string, unknown>[] = [];
for (const file of dataFiles) {
  const pairs = loadPairs(file, limit);
  // Embed every text once up front, in batches (the cache keeps them for later runs too).
  const texts = new Set<string>();
  for (const p of pairs)
    for (const side of [p.a, p.b]) for (const t of Array.isArray(side) ? [side.join('\n'), ...side] : [side]) texts.add(t);
  await embedder.embed([...texts]);
  embedder.save();
  for (const mode of modes) {
    for (const [name, scorer] of scorers) {
      const outcomes = mode === 'pairs' ? await pairsMode(pairs, scorer, embedder) : await crowdedMode(pairs, scorer, embedder);
      const rows = sweep(outcomes);
      const result = {
        data: path.basename(file),
        mode,
        scorer: name,
        queries: outcomes.length,
        positives: outcomes.filter((o) => o.label === 1).length,
        threshold_precision_0_95: firstReaching(rows, 0.95),
        threshold_precision_0_99: firstReaching(rows, 0.99),
        rows,
        ...(values.explain ? { explained: explainedOf(outcomes) } : {}),
      };
      results.push(result);
      if (!values.json) {
        console.log(`\n${result.data} · ${mode} · ${name} · ${result.queries} queries (${result.positives} with a right answer)`);
        console.log('threshold  precision  recall  f1     false-hit  correct  wrong  miss');
        const f = (x: number | null) => (x === null ? '–' : x.toFixed(3));
        for (const r of rows.filter((x) => SHOWN.includes(x.threshold))) {
          console.log(
            `${r.threshold.toFixed(2).padEnd(10)} ${f(r.precision).padEnd(10)} ${f(r.recall).padEnd(7)} ${f(r.f1).padEnd(6)} ${f(r.false_hit_rate).padEnd(10)} ${String(r.correct).padEnd(8)} ${String(r.wrong).padEnd(6)} ${r.miss}`,
          );
        }
        console.log(
          `precision ≥ 0.95 from threshold ${result.threshold_precision_0_95 ?? 'never'}; ≥ 0.99 from ${result.threshold_precision_0_99 ?? 'never'}`,
        );
        if (result.explained) printExplained(result.explained);
      }
    }
  }
}
await embedder.close();
if (values.json) console.log(JSON.stringify(results, null, 2));
