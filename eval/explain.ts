/**
 * Why a check missed a right answer or served a wrong one (`npm run eval -- --explain`): a scorer
 * that wraps the real one and notes what the service asked of it during a check (the candidates
 * passed over by `differs` and why, the candidate scored, its first-stage score and its score with
 * the neighbourhood stage, what differs around a shared passage), read back into one cause.
 */
import { acronymsIn, otherAcronyms } from '../src/cache/acronyms.ts';
import {
  contrastingWords,
  differentQuantities,
  negated,
  otherDirection,
  otherInstruction,
  otherNames,
  otherPeriod,
  otherRank,
  replacedReordered,
  replacedWord,
  swappedRoles,
} from '../src/cache/contrast.ts';
import { analyse, type TextInfo } from '../src/cache/features.ts';
import { dot, type HitScorer, type Side } from '../src/cache/scorer.ts';

/** What the service asked of the scorer during one check. */
export interface Noted {
  /** Candidates passed over by `differs`, in the order asked, with why. */
  passedOver: { text: string; why: string }[];
  /** The candidate scored: its text, cosine, runner-up, the first stage's score alone and the score given. */
  scored: { query: Side; text: string; cosine: number; runnerUp?: number; first: number; score: number } | null;
  /** The score of what differs around a shared passage, when the texts share one. */
  around: { a: string; b: string } | null;
}

/** A scorer that notes what it is asked (`Noted`) for the check under way; `reset` starts another. */
export class NotingScorer implements HitScorer {
  readonly id: string;
  noted: Noted = { passedOver: [], scored: null, around: null };
  around?: HitScorer['around'];
  differs?: HitScorer['differs'];

  constructor(readonly inner: HitScorer) {
    this.id = inner.id;
    if (inner.around) {
      const around = inner.around.bind(inner);
      this.around = (q, c) => {
        const r = around(q, c);
        if (r) this.noted.around = r;
        return r;
      };
    }
    if (inner.differs) {
      const differs = inner.differs.bind(inner);
      this.differs = (q, c) => {
        this.query ??= q;
        const why = differs(q, c);
        if (why !== null && !this.noted.passedOver.some((p) => p.text === c.text)) this.noted.passedOver.push({ text: c.text, why });
        return why;
      };
    }
  }

  /** The check's query, as the service first asks `differs` of it. */
  private query: Side | null = null;

  reset(): void {
    this.noted = { passedOver: [], scored: null, around: null };
    this.query = null;
  }

  score(query: Side, candidate: Side, cosine: number, runnerUp?: number): number {
    const score = this.inner.score(query, candidate, cosine, runnerUp);
    // The candidate's score is the first asked for the query itself; others score the parts
    // around a shared passage, earlier turns, or two stored entries against each other.
    if (this.noted.scored === null && (query === this.query || !this.inner.differs)) {
      const first = runnerUp === undefined ? score : this.inner.score(query, candidate, cosine);
      this.noted.scored = { query, text: candidate.text, cosine, runnerUp, first, score };
    }
    return score;
  }
}

/** The rules of `differentRequest` and the scorer's own checks, by name, to say which one fired. */
type Analysed = TextInfo & { acronyms: Set<string> };
const RULES: [string, (a: Analysed, b: Analysed) => string | null][] = [
  ['acronyms', otherAcronyms],
  ['contrastingWords', contrastingWords],
  ['swappedRoles', swappedRoles],
  ['differentQuantities', (a, b) => differentQuantities(a.quantities, b.quantities)],
  ['otherNames', (a, b) => otherNames(a, b)],
  ['otherPeriod', otherPeriod],
  ['replacedWord', replacedWord],
  ['replacedReordered', replacedReordered],
  ['otherRank', otherRank],
  ['otherDirection', otherDirection],
  ['negated', negated],
  ['otherInstruction', otherInstruction],
];

/** The rule whose reason is `why` for the two texts, read as typed (a guess where the pair was read otherwise). */
export function ruleOf(query: string, candidate: string, why: string): string {
  const a = Object.assign(analyse(query), { acronyms: acronymsIn(query) });
  const b = Object.assign(analyse(candidate), { acronyms: acronymsIn(candidate) });
  for (const [name, rule] of RULES) {
    try {
      if (rule(a, b) === why) return name;
    } catch {
      // A rule that needs more of the read than a bare analysis: not this one.
    }
  }
  if (why.startsWith('unreadable letters')) return 'unreadableLetters';
  if (why.startsWith('no words')) return 'wordless';
  if (why.startsWith('instruction:')) return 'otherInstruction';
  if (why.startsWith('code ')) return 'otherCodeNames';
  return 'other (quoted, format, question word, carried)';
}

/** One query that was not served a right answer at the threshold, and why. */
export interface Explained {
  query: string;
  /** The cause, one of a few kinds (`cause`), and the detail behind it. */
  cause: string;
  detail: string;
  served: string | null;
  score: number | null;
}

/**
 * Why a query with a right entry among `rightTexts` was not served one at `threshold`, or why a
 * wrong entry was served: read from what the scorer noted during its check. `right` is whether the
 * served entry (`served`, null on a miss) is a right one; `rightVector` the query's cosine with
 * each right entry as stored (text and vector), to tell a nearer wrong entry from one passed over.
 */
export function explain(
  query: string,
  noted: Noted,
  served: string | null,
  score: number | null,
  right: boolean,
  threshold: number,
  rightEntries: { text: string; vector: Float32Array }[],
  allEntries: readonly { text: string; vector: Float32Array }[] = rightEntries,
): Explained {
  const out = (cause: string, detail: string): Explained => ({ query, cause, detail, served, score });
  const passedRight = noted.passedOver.find((p) => rightEntries.some((e) => e.text === p.text));
  const s = noted.scored;
  if (served !== null && right) {
    // The right entry was the candidate, scored under the threshold.
    if (!s) return out('below threshold', `score ${score}`);
    const aroundLower = s.score >= threshold && (score ?? 0) < threshold;
    if (aroundLower) return out('around a shared passage', `score ${s.score.toFixed(3)}, around ${JSON.stringify(noted.around)}`);
    if (s.first >= threshold) {
      // The runner-up, found again among the entries by its cosine with the query.
      const runnerUp =
        s.runnerUp === undefined
          ? undefined
          : allEntries.find((e) => Math.abs(dot(s.query.vector, e.vector) - (s.runnerUp as number)) < 1e-6);
      return out(
        'neighbourhood stage',
        `first stage ${s.first.toFixed(3)} → ${s.score.toFixed(3)} (cosine ${s.cosine.toFixed(3)}, runner-up ${s.runnerUp?.toFixed(3)}${runnerUp ? ` ${JSON.stringify(runnerUp.text)}` : ''})`,
      );
    }
    return out(
      'model score below threshold',
      `first stage ${s.first.toFixed(3)}${s.runnerUp === undefined ? '' : ` → ${s.score.toFixed(3)}`} (cosine ${s.cosine.toFixed(3)})`,
    );
  }
  if (passedRight)
    return out(`passed over: ${ruleOf(query, passedRight.text, passedRight.why)}`, `${passedRight.why} | ${passedRight.text}`);
  // The nearest right entry, by its cosine with the query.
  const nearestRight = s
    ? rightEntries.map((e) => ({ e, cosine: dot(s.query.vector, e.vector) })).sort((x, y) => y.cosine - x.cosine)[0]
    : undefined;
  if (served === null && !s) return out('no candidate', `all passed over: ${noted.passedOver.map((p) => p.why).join('; ')}`);
  if (rightEntries.length === 0) return out('wrong hit (no right entry)', `first stage ${s?.first.toFixed(3)} → ${s?.score.toFixed(3)}`);
  return out(
    served !== null && (score ?? 0) >= threshold ? 'wrong entry nearer (served)' : 'wrong entry nearer (missed)',
    `candidate cosine ${s?.cosine.toFixed(3)} first stage ${s?.first.toFixed(3)} → ${s?.score.toFixed(3)}; right entry cosine ${nearestRight?.cosine.toFixed(3)} ${JSON.stringify(nearestRight?.e.text)}`,
  );
}
