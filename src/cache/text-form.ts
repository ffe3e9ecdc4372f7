import type { Embedder } from '../embedding/interface.ts';
import { expandAcronyms } from './acronyms.ts';
import { plainWording } from './wording.ts';

/**
 * The form texts are embedded in: 1 as typed; 2 with common acronyms written out and each line's
 * polite wrapper taken off. A stored vector carries the form it was made from in its id
 * (`vectorId`), and one of an older form is still searched, and re-embedded in the background
 * (`CacheService.reembed`).
 */
export const TEXT_FORM = 2;

/** The id stored with a vector this embedder makes now: the embedder's, and the text form. */
export function vectorId(embedder: Embedder): string {
  return `${embedder.id}+text${TEXT_FORM}`;
}

/** Whether a stored vector is this embedder's, of any text form (one stored as typed has its bare id). */
export function ofEmbedder(stored: string | null, embedder: Embedder): boolean {
  return stored !== null && (stored === embedder.id || stored.startsWith(`${embedder.id}+text`));
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
