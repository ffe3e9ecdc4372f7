import { readVocabulary } from '../embedding/use-lite.model.ts';

/** Ids below this are reserved (unknown, control and user-defined symbols): no letters of a text. */
const RESERVED = 6;

const ASCII = /^[\x00-\x7f]*$/;

let covered: Set<string> | null = null;

/** The characters some piece of USE-lite's vocabulary is written with, read once. */
function coveredCharacters(): Set<string> {
  if (covered) return covered;
  covered = new Set();
  const vocabulary = readVocabulary();
  for (let id = RESERVED; id < vocabulary.length; id++) for (const ch of (vocabulary[id] as [string, number])[0]) covered.add(ch);
  return covered;
}

/**
 * The letters and digits of a text that USE-lite's vocabulary has no piece for, lower-cased and
 * run together: "" for an English text. The vocabulary is English (no piece of Han, Kana, Hangul,
 * Hebrew or Thai, a handful of Arabic and Cyrillic), and each run the tokenizer cannot cut is one
 * unknown piece whatever its letters, so "北京是哪个国家的首都？" and "东京是哪个国家的首都？", or two
 * Arabic questions that name other countries, embed exactly alike. Spaces and punctuation between
 * them do not count (Chinese and Japanese are written without spaces). Latin letters with accents
 * are read without them, as the encoder reads the words around them ("Việt" and "Viet" are left
 * to the scorer).
 */
export function unreadableLetters(text: string): string {
  // The vocabulary has every ASCII letter and digit; most texts are read without a look at each.
  if (ASCII.test(text)) return '';
  const readable = coveredCharacters();
  let out = '';
  for (const ch of text.normalize('NFKD')) {
    if (/[\p{L}\p{N}]/u.test(ch) && !readable.has(ch)) out += ch.toLowerCase();
  }
  return out;
}
