import { readFileSync } from 'node:fs';
import { Lru } from '../util/lru.ts';

/** A part of speech of WordNet: noun, verb, adjective, adverb. */
export type Pos = 'n' | 'v' | 'a' | 'r';

/** How many of a lemma's senses, the commonest first, are read for its kin. */
export const KIN_SENSES = 2;

/** src/cache/wordnet-kin.json, as scripts/wordnet-kin.ts writes it. */
export interface KinFile {
  source: string;
  license: string[];
  senses: number;
  /** By lemma and part of speech: "all|top|up|anti", each a list of synset numbers in base 36. */
  words: Record<string, Partial<Record<Pos, string>>>;
}

interface Kin {
  /** The synsets of every sense. */
  all: Set<string>;
  /** The synsets of the first senses (and an adjective's cluster heads). */
  top: Set<string>;
  /** Their direct hypernyms (nouns). */
  up: Set<string>;
  /** Their antonyms. */
  anti: Set<string>;
}

const POS: readonly Pos[] = ['n', 'v', 'a', 'r'];

/**
 * Endings that inflect a lemma, by part of speech, and what takes their place (WordNet's own
 * "morphy" rules, without its lists of irregular forms: "children" is found as no lemma).
 */
const ENDINGS: Record<Pos, readonly (readonly [string, string])[]> = {
  n: [
    ['s', ''],
    ['ses', 's'],
    ['xes', 'x'],
    ['zes', 'z'],
    ['ches', 'ch'],
    ['shes', 'sh'],
    ['men', 'man'],
    ['ies', 'y'],
  ],
  v: [
    ['s', ''],
    ['ies', 'y'],
    ['es', 'e'],
    ['es', ''],
    ['ed', 'e'],
    ['ed', ''],
    ['ing', 'e'],
    ['ing', ''],
  ],
  a: [
    ['er', ''],
    ['est', ''],
    ['er', 'e'],
    ['est', 'e'],
  ],
  r: [],
};

let table: KinFile['words'] | null = null;
/** Lemmas read from the table, by part of speech: a few thousand cover a cache's requests. */
const parsed = new Lru<string, Kin | null>(10_000);

/**
 * The table (2.8 MB of JSON, about 0.1 s to read), read once per process: by the hit scorer as it
 * is made, so that no check waits for it, or else on first use.
 */
export function loadKin(): KinFile['words'] {
  table ??= (JSON.parse(readFileSync(new URL('./wordnet-kin.json', import.meta.url), 'utf8')) as KinFile).words;
  return table;
}

function kinOf(lemma: string, pos: Pos): Kin | null {
  const key = `${pos}:${lemma}`;
  let kin = parsed.get(key);
  if (kin === undefined) {
    const entry = loadKin()[lemma]?.[pos];
    if (entry === undefined) kin = null;
    else {
      const [all, top, up, anti] = entry.split('|').map((f) => new Set(f === '' ? [] : f.split(','))) as [
        Set<string>,
        Set<string>,
        Set<string>,
        Set<string>,
      ];
      kin = { all, top, up, anti };
    }
    parsed.set(key, kin);
  }
  return kin;
}

/** The word and the lemmas its endings may stand for, in one part of speech: "badminton", "roses" → "rose". */
function forms(word: string, pos: Pos): string[] {
  const out = [word];
  for (const [ending, base] of ENDINGS[pos]) {
    if (word.length > ending.length + 1 && word.endsWith(ending)) out.push(word.slice(0, -ending.length) + base);
  }
  return out;
}

const meets = (x: Set<string>, y: Set<string>): boolean => {
  for (const v of x) if (y.has(v)) return true;
  return false;
};

/**
 * Whether two words, in lower case, name different things of one kind in WordNet, read in their
 * commonest senses: antonyms ("ascending" / "descending", "major" / "minor", "boiling" /
 * "freezing") or nouns under one hypernym ("tennis" / "badminton", "iron" / "calcium", "haiku" /
 * "sonnet", "anxiety" / "depression"). Null when they may say the same: forms of one lemma
 * ("roses" / "rose"), words that share a sense in any part of speech ("fall" / "autumn", "hard" /
 * "difficult"), one a kind of the other ("vegan" / "vegetarian", "fridge" / "freezer"), or a word
 * WordNet does not list. Numbers are another check's. Antonyms count only in the parts of speech
 * `antonymsIn` names (all by default).
 */
export function kinWords(x: string, y: string, antonymsIn: readonly Pos[] = POS): 'antonyms' | 'siblings' | null {
  if (x === y || /\d/.test(x) || /\d/.test(y)) return null;
  let found: 'antonyms' | 'siblings' | null = null;
  for (const pos of POS) {
    const fx = forms(x, pos);
    const fy = forms(y, pos);
    if (fx.some((f) => fy.includes(f))) return null;
    for (const lx of fx) {
      const kx = kinOf(lx, pos);
      if (kx === null) continue;
      for (const ly of fy) {
        const ky = kinOf(ly, pos);
        if (ky === null) continue;
        if (meets(kx.all, ky.all) || meets(kx.all, ky.up) || meets(ky.all, kx.up)) return null;
        if ((meets(kx.anti, ky.top) || meets(ky.anti, kx.top)) && antonymsIn.includes(pos)) found ??= 'antonyms';
        else if (meets(kx.up, ky.up)) found ??= 'siblings';
      }
    }
  }
  return found;
}

/**
 * Whether two words, in lower case, share a sense in WordNet in any part of speech, as written or
 * as the lemmas their endings may stand for: "one" / "single", "mistake" / "error", "brief" /
 * "short". Only lemmas of the table (`loadKin`) are known; any other word shares nothing.
 */
export function sameSense(x: string, y: string): boolean {
  if (x === y) return true;
  for (const pos of POS) {
    for (const lx of forms(x, pos)) {
      const kx = kinOf(lx, pos);
      if (kx === null) continue;
      for (const p of POS) {
        for (const ly of forms(y, p)) {
          const ky = kinOf(ly, p);
          if (ky !== null && meets(kx.all, ky.all)) return true;
        }
      }
    }
  }
  return false;
}

/**
 * The senses of words read so far (`senses`), forgotten all at once past 20,000 words: a few
 * thousand cover a cache's requests, and a plain map is read several times faster than an `Lru`
 * (a pair's features read the senses of every content word only one text has).
 */
const sensesRead = new Map<string, ReadonlySet<string>>();
const SENSES_KEPT = 20_000;

/**
 * Every WordNet sense of a word, in lower case, in any part of speech, as written or as the lemmas
 * its endings may stand for: two different words share one of them when `sameSense` says so. Empty
 * for a word the table does not list.
 */
export function senses(word: string): ReadonlySet<string> {
  let out = sensesRead.get(word);
  if (out === undefined) {
    const all = new Set<string>();
    for (const pos of POS) {
      for (const lemma of forms(word, pos)) for (const s of kinOf(lemma, pos)?.all ?? []) all.add(s);
    }
    out = all;
    if (sensesRead.size >= SENSES_KEPT) sensesRead.clear();
    sensesRead.set(word, out);
  }
  return out;
}
