import type { Embedder } from '../embedding/interface.ts';
import { expandAcronyms } from './acronyms.ts';
import { plainWording } from './wording.ts';

/**
 * The form texts are embedded in: 1 as typed; 2 with common acronyms written out and each line's
 * polite wrapper taken off; 3 also without a chat opener ("Quick question: …") or a closing
 * courtesy ("…, if you don't mind me asking?"), and a word asked the meaning of set off by a dash
 * or a colon ("X - definition?") read as the other forms are; 4 also with two things set against each
 * other as keywords put as the question ("weather vs climate" as "What is the difference between
 * weather and climate?"). A stored vector carries the form it was made from in its id
 * (`vectorId`), and one of an older form is still searched, and re-embedded in the background
 * (`CacheService.reembed`).
 */
export const TEXT_FORM = 4;

/** How the id of a vector of this embedder, of some text form, starts (one stored as typed has its bare id). */
export function formPrefix(embedder: Embedder): string {
  return `${embedder.id}+text`;
}

/** The id stored with a vector this embedder makes now: the embedder's, and the text form. */
export function vectorId(embedder: Embedder): string {
  return `${formPrefix(embedder)}${TEXT_FORM}`;
}

/**
 * The id stored, without a vector, with an entry that this embedder could not embed when it was
 * stored (its server down): an entry to embed once it can (`Store.staleVectorIds`).
 */
export function pendingId(embedder: Embedder): string {
  return `${formPrefix(embedder)}pending`;
}

/** Whether a stored vector is this embedder's, of any text form. */
export function ofEmbedder(stored: string | null, embedder: Embedder): boolean {
  return stored !== null && (stored === embedder.id || stored.startsWith(formPrefix(embedder)));
}

/**
 * The vectors of texts as a semantic search reads them: with common acronyms written out
 * (`expandAcronyms`) and polite wrappers taken off (`plainWording`), so that "What is ML?" and
 * "What is machine learning?", "Do you know the capital of France?" and "What is the capital of
 * France?" embed alike. (The hit decision reads a pair with these written out or taken off where
 * the other text does: `CalibratedScorer`.)
 */
export function embedText(embedder: Embedder, texts: readonly string[], scope: string): Promise<Float32Array[]> {
  return embedder.embed(
    texts.map((t) => expandAcronyms(plainWording(t))),
    scope,
  );
}

/**
 * The vectors of a conversation's final message and, when it has earlier user turns, of those
 * (a `SemanticKey`, or a stored entry's texts).
 */
export function embedTurns(embedder: Embedder, turns: { queryText: string; prefixText: string }, scope: string): Promise<Float32Array[]> {
  return embedText(embedder, turns.prefixText ? [turns.queryText, turns.prefixText] : [turns.queryText], scope);
}
