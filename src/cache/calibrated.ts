import { readFileSync } from 'node:fs';
import { Lru } from '../util/lru.ts';
import { acronymsIn, expandAcronyms, namesWords, otherAcronyms } from './acronyms.ts';
import { otherCodeNames } from './code-names.ts';
import { differentRequest, otherInstruction, otherNames, synonyms } from './contrast.ts';
import { analyse, aroundShared, AUXILIARIES, FEATURE_NAMES, opensQuestion, pairFeatures, type TextInfo } from './features.ts';
import type { HitScorer, Side } from './scorer.ts';
import { unwrap, type Unwrapped } from './wording.ts';
import { unreadableLetters } from './unreadable.ts';
import { loadKin } from './wordnet.ts';

/** Texts up to this length have their analysis remembered, and are checked by `differs`. */
const MEMO_CHARS = 2048;
/** What a stored text is remembered by: its text within its scope (an account's texts are its own). */
const memoKey = (text: string, scope: string | undefined): string => (scope === undefined ? text : `${scope}\u0000${text}`);

/** One network: ReLU hidden layers, one output logit, and a linear path from the hand-made features. */
export interface HitNet {
  layers: { in: number; out: number; w: ArrayLike<number>; b: ArrayLike<number> }[];
  /** Weights of a linear path from the standardised hand-made features straight to the output. */
  skip?: ArrayLike<number>;
}

/**
 * The weights file written by `scripts/train-scorer.ts`: a small ensemble of feed-forward
 * networks over the standardised hand-made features followed by the element-wise product and
 * absolute difference of the two vectors.
 */
export interface HitModel {
  version: number;
  embedderId: string;
  features: string[];
  mean: number[];
  std: number[];
  /** The members of the ensemble; their logits are averaged. */
  nets: HitNet[];
  /**
   * A second stage, used when the partition holds another question besides the candidate: a
   * small network over the first stage's logit and how much nearer the candidate is than the
   * runner-up (`NEIGHBOURHOOD_FEATURES`, standardised with `mean` and `std`).
   */
  neighbourhood?: { features: string[]; mean: number[]; std: number[]; net: HitNet };
}

export const NEIGHBOURHOOD_FEATURES = [
  'logit',
  'margin',
  'cosine',
  'log_words',
  'question',
  'margin_x_log_words',
  'logit_x_log_words',
  'margin_x_question',
  'logit_x_question',
] as const;

/**
 * The second stage's raw inputs: the first stage's `logit` for the candidate, its `cosine`, its
 * margin over the `runnerUp` cosine of the nearest other question (capped: in a small account the
 * runner-up can be far off), and the query's length and form.
 */
export function neighbourhoodFeatures(logit: number, cosine: number, runnerUp: number, query: TextInfo): number[] {
  const l = Math.max(-12, Math.min(12, logit));
  const margin = Math.max(-MARGIN_CAP, Math.min(MARGIN_CAP, cosine - runnerUp));
  const words = Math.log1p(query.words.length);
  const question = query.question ? 1 : 0;
  return [l, margin, cosine, words, question, margin * words, l * words, margin * question, l * question];
}

/**
 * The second stage's input: its raw inputs standardised, and clipped to 4 standard deviations so
 * that an input far outside what the stage was fitted on cannot carry it anywhere.
 */
export function standardisedStage(stage: NonNullable<HitModel['neighbourhood']>, raw: number[]): Float64Array {
  const x = new Float64Array(raw.length);
  for (let i = 0; i < raw.length; i++) {
    const s = stage.std[i] as number;
    x[i] = s > 0 ? Math.max(-4, Math.min(4, ((raw[i] as number) - (stage.mean[i] as number)) / s)) : 0;
  }
  return x;
}

/** The second stage's logit from its raw inputs. */
export function neighbourhoodLogit(stage: NonNullable<HitModel['neighbourhood']>, raw: number[]): number {
  const share = stageShare(raw[1] as number);
  return share * forwardNet(stage.net, standardisedStage(stage, raw)) + (1 - share) * (raw[0] as number);
}

/** Margins at or beyond this say "by far the nearest": the first stage then decides alone. */
export const MARGIN_CAP = 0.3;

/**
 * How much of the logit is the second stage's, by the margin: all of it when the runner-up is as
 * near as the candidate, none when it is `MARGIN_CAP` further off. An unrelated entry far away
 * then changes nothing, as when the candidate is alone in its partition.
 */
export function stageShare(margin: number): number {
  return Math.min(1, Math.max(0, 1 - margin / MARGIN_CAP));
}

export function loadHitModel(url: URL = new URL('./hit-model.json', import.meta.url)): HitModel {
  const model = JSON.parse(readFileSync(url, 'utf8')) as HitModel;
  if (model.version !== 3 || !Array.isArray(model.nets) || model.nets.length === 0) {
    throw new Error(`hit model ${url.pathname} is not a version 3 model`);
  }
  if (model.features.join() !== FEATURE_NAMES.join()) {
    throw new Error(`hit model ${url.pathname} was trained on other features`);
  }
  const stage = model.neighbourhood;
  const k = NEIGHBOURHOOD_FEATURES.length;
  if (
    stage &&
    (stage.features.join() !== NEIGHBOURHOOD_FEATURES.join() ||
      stage.mean.length !== k ||
      stage.std.length !== k ||
      stage.net?.layers?.[0]?.in !== k ||
      (stage.net.skip !== undefined && stage.net.skip.length > k))
  ) {
    throw new Error(`hit model ${url.pathname} has a neighbourhood stage on other features`);
  }
  // Typed arrays: the forward pass reads them several times faster than JSON arrays.
  for (const net of stage ? [...model.nets, stage.net] : model.nets) {
    net.layers = net.layers.map((l) => ({ ...l, w: Float64Array.from(l.w), b: Float64Array.from(l.b) }));
    if (net.skip) net.skip = Float64Array.from(net.skip);
  }
  return model;
}

/** The network's input for a pair, written into `out` when it is given and long enough. */
export function inputVector(model: HitModel, hand: number[], u: Float32Array, v: Float32Array, out?: Float64Array): Float64Array {
  const h = hand.length;
  const d = Math.min(u.length, v.length);
  const x = out && out.length === h + 2 * d ? out : new Float64Array(h + 2 * d);
  for (let i = 0; i < h; i++) {
    const s = model.std[i] as number;
    x[i] = s > 0 ? ((hand[i] as number) - (model.mean[i] as number)) / s : 0;
  }
  for (let i = 0; i < d; i++) {
    const a = u[i] as number;
    const b = v[i] as number;
    x[h + i] = a * b;
    x[h + d + i] = Math.abs(a - b);
  }
  return x;
}

/**
 * The hidden layers' outputs, reused from one pass to the next (a pass runs to completion on one
 * thread), so scoring allocates nothing for the garbage collector to find.
 */
const hidden = new Map<number, Float64Array>();

function layerOutput(l: number, size: number): Float64Array {
  // Keyed by layer and size, so the two stages' networks each keep their own buffers.
  const key = l * 65_536 + size;
  let z = hidden.get(key);
  if (!z) hidden.set(key, (z = new Float64Array(size)));
  return z;
}

/** The output logit of one network. */
export function forwardNet(net: HitNet, x: Float64Array): number {
  let a: Float64Array = x;
  const last = net.layers.length - 1;
  for (let l = 0; l <= last; l++) {
    const layer = net.layers[l] as HitNet['layers'][number];
    const n = layer.in;
    const out = layer.out;
    const w = layer.w;
    const b = layer.b;
    const z = layerOutput(l, out);
    for (let o = 0; o < out; o++) {
      const off = o * n;
      // Four running sums: independent additions, so the loop is not one long dependency chain.
      let s0 = b[o] as number;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      let i = 0;
      for (; i + 3 < n; i += 4) {
        s0 += (w[off + i] as number) * (a[i] as number);
        s1 += (w[off + i + 1] as number) * (a[i + 1] as number);
        s2 += (w[off + i + 2] as number) * (a[i + 2] as number);
        s3 += (w[off + i + 3] as number) * (a[i + 3] as number);
      }
      for (; i < n; i++) s0 += (w[off + i] as number) * (a[i] as number);
      const sum = s0 + s1 + s2 + s3;
      z[o] = l < last ? Math.max(0, sum) : sum;
    }
    a = z;
  }
  let out = a[0] as number;
  const skip = net.skip;
  if (skip) for (let i = 0; i < skip.length; i++) out += (skip[i] as number) * (x[i] as number);
  return out;
}

/** The ensemble's logit: the mean of its networks' logits. */
export function forward(model: HitModel, x: Float64Array): number {
  let sum = 0;
  for (const net of model.nets) sum += forwardNet(net, x);
  return sum / model.nets.length;
}

/** What the hit decision reads of a text: its analysis, and the acronyms it types (`acronymsIn`). */
type Read = TextInfo & { acronyms: Set<string> };

/** A text's `Read`; with `only`, of the text with those of its acronyms written out. */
function read(text: string, only?: Set<string>): Read {
  const t = only ? expandAcronyms(text, only) : text;
  return Object.assign(analyse(t), { acronyms: acronymsIn(t) });
}

/** The acronyms written out in a read (`read`), as memo keys tell them apart. */
const onlyKey = (only?: Set<string>): string => (only ? [...only].join('|') : '');

/**
 * Two texts' words are the same but for one stretch: up to three words in the place of up to three
 * others, or up to two more on one side before words they share.
 */
function oneChange(x: string, y: string): boolean {
  const a = x.toLowerCase().match(/[\p{L}\p{N}'’]+/gu) ?? [];
  const b = y.toLowerCase().match(/[\p{L}\p{N}'’]+/gu) ?? [];
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let end = 0;
  while (end < a.length - start && end < b.length - start && a[a.length - 1 - end] === b[b.length - 1 - end]) end++;
  const restA = a.length - start - end;
  const restB = b.length - start - end;
  if (restA === 0 && restB === 0) return false;
  const onlyA = a.slice(start, a.length - end);
  const onlyB = b.slice(start, b.length - end);
  // Words that ask nothing more ("how can I" / "how do I", "are"), or one word for the other.
  if ([...onlyA, ...onlyB].every((w) => SAYS_LITTLE.has(w))) return false;
  if (onlyA.length === 1 && onlyB.length === 1 && synonyms(onlyA[0] as string, onlyB[0] as string)) return false;
  if (restA > 0 && restB > 0) return restA <= 3 && restB <= 3 && start + end > 0;
  return end > 0 && Math.max(restA, restB) <= 2;
}

/** Words that, changed or added, leave a request as it was. */
const SAYS_LITTLE = new Set([
  ...AUXILIARIES,
  ...'a an the i me my you your we our one to please pls just really actually exactly there it'.split(' '),
]);

/**
 * A line typed as keywords, put as a question: "when to prune roses" as "when to prune roses?",
 * "population of tokyo" as "what is population of tokyo?". Null for a line of one word or more than
 * 14, one that ends as a sentence or a question does, and one that opens with a capital and no
 * question word (a sentence or a title: "A man is playing a guitar").
 */
function keywordQuestion(text: string): string | null {
  if (text.length > 200 || text.includes('\n') || /[?.!:;]\s*$/.test(text)) return null;
  const words = text.trim().split(/\s+/);
  if (words.length < 2 || words.length > 14) return null;
  const first = (words[0] as string).toLowerCase();
  if (opensQuestion(first)) return `${text.trim()}?`;
  // Typed in lower case, as into a search box; a capital at its start is a sentence's or a title's.
  return /^\s*\p{Ll}/u.test(text) ? `what is ${text.trim()}?` : null;
}

/**
 * A difference of one word for another found in a nearer candidate of the same query that this
 * candidate has too: "how to tie a half windsor knot" passes over "how to tie a full windsor knot"
 * ("half" / "full"), and then over "How do I tie a full Windsor knot?", which says "full" where the
 * query says "half" in other words around them. Otherwise the next nearest is served, read by the
 * model alone (0.90 there).
 */
function carried(found: Map<string, string | null>, a: Read, b: Read): string | null {
  for (const why of found.values()) {
    const pair = why === null ? null : /^([^\s/"]+)\/([^\s/"]+)$/.exec(why);
    if (!pair) continue;
    const [, x, y] = pair as unknown as [string, string, string];
    if (a.wordSet.has(x) && !a.wordSet.has(y) && b.wordSet.has(y) && !b.wordSet.has(x)) return why;
  }
  return null;
}

/** Whether one text is a request of one line (`Unwrapped.asked`) and the other a question of one line. */
function requestAndQuestion(x: Unwrapped, xRead: Read, y: Unwrapped, yRead: Read): boolean {
  const question = (w: Unwrapped, info: Read) => !w.plain.includes('\n') && (info.question || opensQuestion(info.opening[0]));
  return (x.asked !== null && y.asked === null && question(y, yRead)) || (y.asked !== null && x.asked === null && question(x, xRead));
}

/**
 * The acronyms one text types that the other writes out: the pair is read with those written out
 * ("What is ML?" / "What is machine learning?" are the same words then). An acronym both type stays
 * as typed, as does one the other does not name: written out, it would add the same three or four
 * words to both ("NATO soldiers killed" / "NATO strike kills civilians") or to one alone ("the FBI
 * said" / "agents said").
 */
function writtenOutByOther(x: Read, y: Read): Set<string> {
  const found = new Set<string>();
  for (const words of x.acronyms) if (namesWords(y.normalised, words)) found.add(words);
  return found;
}

/**
 * Why two texts are other requests however near their vectors: the letters the encoder cannot
 * read differ (`unreadableLetters`: "北京是哪个国家的首都？" / "东京是哪个国家的首都？" embed alike, as
 * two unknown pieces). Null when they are the same, as in any two English texts.
 */
function otherUnreadable(a: string, b: string): string | null {
  const ua = unreadableLetters(a);
  const ub = unreadableLetters(b);
  return ua === ub ? null : `unreadable letters ${ua || '(none)'}/${ub || '(none)'}`;
}

/**
 * Why two texts of no words at all (emoji, signs: "😡" / "🙂", "👍" / "👎") are other requests when
 * they differ: the encoder has a piece for few such characters, so they embed nearly alike (0.998),
 * and the model, with no words to compare, read them as the same question. Null when either text
 * has a word.
 */
function otherWordless(a: Read, b: Read): string | null {
  return a.normalised === '' && b.normalised === '' && a.canonical !== b.canonical ? `no words: ${a.canonical}/${b.canonical}` : null;
}

/** Whether two texts are requests made with the same verb, as typed or without their wrappers ("Explain X" / "Explain Y"). */
function sameRequest(x: Unwrapped, y: Unwrapped, form: 'typed' | 'plain'): boolean {
  return (
    x.asked !== null && y.asked !== null && x.asked[`${form}Request`] !== '' && x.asked[`${form}Request`] === y.asked[`${form}Request`]
  );
}

/**
 * `similarity_score` as the calibrated probability that a cached answer for the candidate is a
 * right answer for the query, from a small model over the two vectors and cheap text checks
 * (numbers, negation, names, rare words, question words, word overlap). When the partition holds
 * another question, a second stage also weighs how much nearer the candidate is than that one.
 * Texts with the same words score 1 (0 when their operators or signs differ), an acronym one types
 * read written out where the other writes it out ("What is ML?" / "What is machine learning?");
 * requests that name different things of one kind, swap two things, name other quantities or other
 * acronyms score 0 (`differs`).
 */
export class CalibratedScorer implements HitScorer {
  readonly id = 'calibrated@8';
  private readonly info = new Lru<string, Read>(20_000);
  /** The network's input, rewritten for each pair. */
  private readonly input: Float64Array;

  constructor(private readonly model: HitModel = loadHitModel()) {
    this.input = new Float64Array((model.nets[0] as HitNet).layers[0]?.in ?? 0);
    loadKin();
  }

  /** A stored text's analysis; with `only`, of the text with those of its acronyms written out. */
  private analyse(text: string, scope: string | undefined, only?: Set<string>): Read {
    const key = only ? `${onlyKey(only)}\u0001${memoKey(text, scope)}` : memoKey(text, scope);
    const fresh = () => read(text, only);
    if (text.length > MEMO_CHARS) {
      // Only short texts are remembered, so the memo stays small in bytes as well as in count; a
      // long one is kept until the next, as a check reads its candidate twice (`score`, `around`),
      // and a document of a megabyte takes about 0.2 s to read.
      if (this.lastLong?.key !== key) this.lastLong = { key, info: fresh() };
      return this.lastLong.info;
    }
    let i = this.info.get(key);
    if (!i) this.info.set(key, (i = fresh()));
    return i;
  }

  /** The last long text's analysis (`analyse`). */
  private lastLong: { key: string; info: Read } | null = null;

  /**
   * A query's analyses (as typed, without its wrapper, with some acronyms written out), kept with
   * its `Side` for as long as the caller holds it: a check reads its query in `score` and again in
   * `around`, with the same object. (Not by its text: how fast a check is answered must say nothing
   * of other accounts' queries.)
   */
  private readonly queries = new WeakMap<Side, Map<string, Read>>();

  private analyseQuery(query: Side, text: string = query.text, only?: Set<string>): Read {
    let reads = this.queries.get(query);
    if (!reads) this.queries.set(query, (reads = new Map()));
    const key = `${onlyKey(only)}\u0001${text === query.text ? '' : text}`;
    let i = reads.get(key);
    if (!i) reads.set(key, (i = read(text, only)));
    return i;
  }

  /**
   * The two texts' analyses as the pair is read: without their polite wrappers where they differ
   * ("Can you tell me …" / "What is …", "Define X" / "What is the meaning of X") or where both are
   * questions without them ("Define 'affect'" / "Define 'effect'" as "What does … mean?"), as typed
   * where both have the same one and would be requests without it ("Can you sort …" / "Can you
   * reverse …": the first stage reads two requests that differ in one word as the same); and with
   * the acronyms one types and the other writes out written out in both (`writtenOutByOther`).
   */
  private pair(
    query: Side,
    candidate: Side,
    wrappedA = unwrap(query.text),
    wrappedB = unwrap(candidate.text),
    keywords = true,
  ): [Read, Read] {
    // Taking wrappers off costs about a microsecond a text: only the texts read are analysed.
    /** Taken off, the wrapper leaves a question. */
    const question = (w: Unwrapped, text: string) => w.plain !== text && /\?\s*$/.test(w.plain);
    const plain = wrappedA.wrapper !== wrappedB.wrapper || (question(wrappedA, query.text) && question(wrappedB, candidate.text));
    // Two requests that amount to questions, made with the same verb, are read as those questions
    // ("Explain recursion" / "Explain iteration" as "What is recursion?" / "What is iteration?"):
    // the first stage reads two requests that differ in one word as the same far more often than
    // the two questions. A request reworded with another verb, or against a question, is left as
    // it is, as the first stage reads such rewordings kindly and their questions strictly.
    const askedA = wrappedA.asked;
    const askedB = wrappedB.asked;
    const same = (form: 'typed' | 'plain') => sameRequest(wrappedA, wrappedB, form);
    // The same wrapper around two such requests ("Any idea how to sort a list?" / "… how to reverse
    // a list?") is read without it too.
    const form = !plain && same('typed') ? 'typed' : same('plain') ? 'plain' : null;
    let [textA, textB] =
      form !== null && askedA && askedB
        ? [askedA[form], askedB[form]]
        : [plain ? wrappedA.plain : query.text, plain ? wrappedB.plain : candidate.text];
    // Two lines typed as keywords, or as questions without their question mark, the same but for
    // one stretch ("when to prune hydrangeas" / "when to fertilize hydrangeas" 0.985, "regex to match
    // a US phone number" / "… a UK phone number" 0.96), are read as the questions they are: the
    // first stage, trained on questions and sentences, reads two such fragments as the same, and the
    // questions strictly (0.57, 0.22). Not for the checks of another request (`differs`), which read
    // the texts as typed, nor for two texts of the same words ("whats love" / "what is love", "hey,
    // how are you" / "hello how are you"), which the questions would make other words.
    if (form === null && keywords) {
      const kA = keywordQuestion(textA);
      const kB = kA === null ? null : keywordQuestion(textB);
      if (
        kA !== null &&
        kB !== null &&
        oneChange(textA, textB) &&
        this.analyseQuery(query, textA).canonical !== this.analyse(textB, candidate.scope).canonical
      )
        [textA, textB] = [kA, kB];
    }
    const a = this.analyseQuery(query, textA);
    const b = this.analyse(textB, candidate.scope);
    if (a.acronyms.size === 0 && b.acronyms.size === 0) return [a, b];
    const forA = writtenOutByOther(a, b);
    const forB = writtenOutByOther(b, a);
    return [forA.size > 0 ? this.analyseQuery(query, textA, forA) : a, forB.size > 0 ? this.analyse(textB, candidate.scope, forB) : b];
  }

  around(query: Side, candidate: Side): { a: string; b: string } | null {
    return aroundShared(...this.pair(query, candidate));
  }

  /**
   * What `differs` found for a query's candidates, kept with its `Side` like its analysis: a check
   * asks it of the entry it serves, and `score` asks it again.
   */
  private readonly differences = new WeakMap<Side, Map<string, string | null>>();

  /**
   * Why the candidate is another request (`differentRequest`), or null. Texts over 2,048 characters
   * (a document, pasted code) are not checked here: reading each candidate's would cost
   * milliseconds, and what differs around a long shared passage is scored alone (`around`).
   */
  differs(query: Side, candidate: Side): string | null {
    if (query.text.length > MEMO_CHARS || candidate.text.length > MEMO_CHARS) return null;
    let found = this.differences.get(query);
    if (!found) this.differences.set(query, (found = new Map()));
    const key = memoKey(candidate.text, candidate.scope);
    let why = found.get(key);
    if (why === undefined) {
      const wrappedA = unwrap(query.text);
      const wrappedB = unwrap(candidate.text);
      const [a, b] = this.pair(query, candidate, wrappedA, wrappedB, false);
      why =
        otherUnreadable(query.text, candidate.text) ??
        otherWordless(a, b) ??
        otherAcronyms(a, b) ??
        otherCodeNames(query.text, candidate.text) ??
        differentRequest(a, b);
      // A request against a question (read kindly by the first stage) that names another person or
      // place: "List the countries that border France" / "Which countries border Spain?".
      if (why === null && requestAndQuestion(wrappedA, a, wrappedB, b)) why = otherNames(a, b, true);
      // Two requests of one verb are read as questions ("Write a headline for this news. T" as
      // "What is a headline for this news. T?"), which the check of instructions leaves alone: it
      // reads them as typed too.
      if (why === null && (sameRequest(wrappedA, wrappedB, 'typed') || sameRequest(wrappedA, wrappedB, 'plain')))
        why = otherInstruction(this.analyseQuery(query), this.analyse(candidate.text, candidate.scope));
      why ??= carried(found, a, b);
      found.set(key, why);
    }
    return why;
  }

  score(query: Side, candidate: Side, cosine: number, runnerUp?: number): number {
    // Stored texts come back as candidates again and again; a query's text seldom does, and
    // remembering each would only fill the memo (and the garbage collector's work) with them.
    const [a, b] = this.pair(query, candidate);
    // The same words (contractions written out, greetings as one): the same question, unless
    // operators or signs tell them apart ("5+3", "5-3").
    if (a.canonical === b.canonical) return a.symbols === b.symbols ? 1 : 0;
    // Requests that name different things of one kind, swap two things or name other quantities.
    if (this.differs(query, candidate) !== null) return 0;
    const x = inputVector(this.model, pairFeatures(a, b, cosine), query.vector, candidate.vector, this.input);
    let logit = forward(this.model, x);
    const stage = this.model.neighbourhood;
    // A runner-up `MARGIN_CAP` or more further off leaves the first stage to decide alone.
    if (stage && runnerUp !== undefined && stageShare(cosine - runnerUp) > 0)
      logit = neighbourhoodLogit(stage, neighbourhoodFeatures(logit, cosine, runnerUp, a));
    return 1 / (1 + Math.exp(-logit));
  }
}
