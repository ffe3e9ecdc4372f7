import nlp from 'compromise/two';
import { AUXILIARIES, opensQuestion, rarity, sharedEnds, stem, UNSEEN, type TextInfo } from './features.ts';
import { kinWords, sameSense, type Pos } from './wordnet.ts';

/**
 * Why two requests that embed alike ask different things, or null: they name different things of
 * one kind (`contrastingWords`), swap two things around the same words (`swappedRoles`), name
 * different quantities (`differentQuantities`), without capitals on their names or a few words
 * apart, other people or places (`otherNames`), ask for a date in another format (`otherFormat`),
 * place the same period elsewhere relative to the present (`otherPeriod`: "this year" / "next year"),
 * are the same words but for one of a pair too common in other senses for the sets or of kin in
 * WordNet (`replacedWord`: "turn on" / "turn off", "drive on the left" / "on the right", "tennis" /
 * "badminton"), or the same content words in another order but for such a word
 * (`replacedReordered`), rank a superlative the other leaves unranked (`otherRank`: "the second
 * highest salary" / "the highest salary"), convert between two units the other way round
 * (`otherDirection`), add a negation to the same words (`negated`), open with other question
 * words (`otherQuestion`: "when" / "where"), or carry the same passage with instructions that ask
 * for different things (`otherInstruction`: "Classify the sentiment: T" / "Classify the topic: T"). The
 * hit decision's cheap checks that a vector and a small model weigh too lightly: "sort ascending" /
 * "sort descending" scored 0.99.
 */
export function differentRequest(a: TextInfo, b: TextInfo): string | null {
  // The same words: the same request ("10,000" and "10 000", "[1,2]" and "[1, 2]").
  if (a.canonical === b.canonical) return null;
  return (
    contrastingWords(a, b) ??
    swappedRoles(a, b) ??
    differentQuantities(a.quantities, b.quantities) ??
    otherNames(a, b) ??
    otherQuoted(a, b) ??
    otherFormat(a, b) ??
    otherPeriod(a, b) ??
    replacedWord(a, b) ??
    replacedReordered(a, b) ??
    otherRank(a, b) ??
    otherDirection(a, b) ??
    negated(a, b) ??
    otherQuestion(a, b) ??
    otherInstruction(a, b)
  );
}

/** The parts of a date or time format, as words: "YYYY-MM-DD" is "yyyy mm dd", "HH:mm" is "hh mm". */
const FORMAT_PARTS = new Set(['yyyy', 'yy', 'mm', 'mmm', 'mmmm', 'dd', 'ddd', 'dddd', 'hh', 'ss']);

/** A text's runs of two or more parts of a format, in order ("yyyy mm dd"), or "". */
function formatRuns(t: TextInfo): string {
  const runs: string[] = [];
  let run: string[] = [];
  for (const w of [...t.words, '']) {
    if (FORMAT_PARTS.has(w)) run.push(w);
    else {
      if (run.length >= 2) runs.push(run.join(' '));
      run = [];
    }
  }
  return runs.join(', ');
}

/**
 * Two texts that ask for a date or a time in other formats: "js get current date in YYYY-MM-DD
 * format" / "… DD/MM/YYYY …" (0.95), "python format date as dd/mm/yyyy" / "… mm/dd/yyyy". The same
 * parts in the same order with other separators are left to the model.
 */
function otherFormat(a: TextInfo, b: TextInfo): string | null {
  const x = formatRuns(a);
  if (x === '') return null;
  const y = formatRuns(b);
  return y === '' || x === y ? null : `${x}/${y}`;
}

/** Words that place a period before, at or after the present, by where they place it. */
const RELATIVE = new Map([
  ['this', 'this'],
  ['current', 'this'],
  ['next', 'next'],
  ['coming', 'next'],
  ['upcoming', 'next'],
  ['last', 'last'],
  ['previous', 'last'],
  ['past', 'last'],
]);
/** Periods that a word of `RELATIVE` places ("this weekend", "next summer", "last Monday"). */
const PERIODS = new Set(
  (
    'day night morning afternoon evening week weekend month year quarter season semester decade century ' +
    'spring summer autumn fall winter monday tuesday wednesday thursday friday saturday sunday'
  ).split(' '),
);

/** The periods a text places relative to the present ("next week"), each with where it places it. */
function periodsOf(words: readonly string[]): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (let i = 0; i + 1 < words.length; i++) {
    const when = RELATIVE.get(words[i] as string);
    if (when === undefined) continue;
    // "this week's news" places the week too.
    const w = (words[i + 1] as string).replace(/['’]s$/, '');
    const period = PERIODS.has(w) ? w : w.endsWith('s') && PERIODS.has(w.slice(0, -1)) ? w.slice(0, -1) : null;
    // A year after it names the period whatever places it: "this season 2016-2017" is "next
    // season 2016-2017" (QQP labels the two questions the same).
    if (period === null || /^\d{4}/.test(words[i + 2] ?? '')) continue;
    const whens = out.get(period) ?? new Set<string>();
    whens.add(when);
    out.set(period, whens);
  }
  return out;
}

/**
 * Two texts that place the same period elsewhere relative to the present: "Best stocks to buy this
 * year" / "… next year" (0.99), "Top news this weekend" / "Top news last weekend" (0.99), "What
 * holidays are this month?" / "… next month?". Words that place it alike are one ("last" / "past",
 * "next" / "coming"; "this past weekend" is the last one).
 */
export function otherPeriod(a: TextInfo, b: TextInfo): string | null {
  const x = periodsOf(a.words);
  if (x.size === 0) return null;
  const y = periodsOf(b.words);
  for (const [period, whenX] of x) {
    const whenY = y.get(period);
    if (whenY === undefined) continue;
    const onlyX = [...whenX].find((w) => !whenY.has(w));
    const onlyY = [...whenY].find((w) => !whenX.has(w));
    if (onlyX !== undefined && onlyY !== undefined) return `${onlyX} ${period}/${onlyY} ${period}`;
  }
  return null;
}

/**
 * Two texts the same but for what they quote: the quote is what is asked about ("What does 'SMH'
 * mean in texting" / "… 'TBH' …", "Translate "see you later" into Spanish" / "… "see you
 * tomorrow" …", "Define 'affect'" / "Define 'effect'"). The first stage read such pairs as the same
 * (0.89–0.98): a quote is a few words among the same others.
 */
function otherQuoted(a: TextInfo, b: TextInfo): string | null {
  if (a.quoted === '' || b.quoted === '' || a.quoted === b.quoted || a.unquoted !== b.unquoted) return null;
  return `"${a.quoted}"/"${b.quoted}"`;
}

/**
 * Question words that ask for different things ("when was it discovered" / "where is it kept"),
 * besides "who" (and "whom"), which opens a question before any word.
 */
const ASKING = new Set(['when', 'where', 'why']);

/** The question word ("who" or one of `ASKING`) a text's last line opens a question with, if any. */
function askedWith(info: TextInfo): string | null {
  const [first, next] = info.opening;
  if (first === 'who' || first === 'whom') return 'who';
  return ASKING.has(first) && AUXILIARIES.has(next) ? first : null;
}

/**
 * Whether two questions open with different question words of `askedWith` (a follow-up read after its context:
 * the last line), neither asking the other's anywhere ("When/where does glycolysis occur?" asks
 * "where" too). "What" and "how" are left out, as they ask for any of these ("what year", "how
 * come"), and so is "when" opening a statement ("When I run npm install I get an error"). A
 * question and a request typed as keywords differ the same way when the keywords name what they
 * ask for as another kind of answer (`otherAnswer`).
 */
function otherQuestion(a: TextInfo, b: TextInfo): string | null {
  const x = askedWith(a);
  const y = askedWith(b);
  if (x === null || y === null) return otherAnswer(a, b) ?? otherAnswer(b, a);
  if (x === y) return null;
  const asks = (info: TextInfo, w: string) => info.questionWords.has(w) || (w === 'who' && info.questionWords.has('whom'));
  return asks(a, y) || asks(b, x) ? null : `${x}/${y}`;
}

/** What a question word of `askedWith` asks for. */
const QUESTION_KINDS = new Map([
  ['who', 'person'],
  ['whom', 'person'],
  ['when', 'time'],
  ['where', 'place'],
  ['why', 'reason'],
]);
/**
 * The kind of answer a noun of a request typed as keywords names. In keywords, "who", "when" and
 * "where" join a clause ("percentage of scientists who believe in evolution") and name nothing.
 */
const ANSWER_KINDS = new Map<string, string>([
  ...'inventor founder creator author writer director designer architect discoverer painter composer builder maker developer owner'
    .split(' ')
    .map((w): [string, string] => [w, 'person']),
  ...'year date century decade era birthday anniversary'.split(' ').map((w): [string, string] => [w, 'time']),
  ...'place location birthplace whereabouts headquarters address venue city town'.split(' ').map((w): [string, string] => [w, 'place']),
  ...'cause reason purpose motive'.split(' ').map((w): [string, string] => [w, 'reason']),
  ...'number count total percentage toll population amount price cost height length size weight depth width distance age capacity speed duration lifespan'
    .split(' ')
    .map((w): [string, string] => [w, 'amount']),
]);
/** Verbs after "what" that ask for a reason ("what caused it"). */
const CAUSED = new Set(['caused', 'causes', 'cause', 'led', 'leads', 'triggered', 'triggers', 'sparked']);
/** Words after "how" that ask for an amount or a measure ("how many", "how tall"). */
const HOW_MUCH = new Set('many much tall long big large heavy deep far high wide old fast'.split(' '));

/**
 * The kind of answer a text's last line opens a question for: that of `askedWith`'s word, an
 * amount ("how many", "how tall"), or the kind a word after "what" or "which" names ("what
 * year"). Null for any other opening ("what is", "how does").
 */
function askedFor(info: TextInfo): string | null {
  const word = askedWith(info);
  if (word !== null) return QUESTION_KINDS.get(word) ?? null;
  const [first, next] = info.opening;
  if (first === 'how') return HOW_MUCH.has(next) ? 'amount' : null;
  // "What caused it?", "what led to the war": a reason.
  if (first === 'what' && CAUSED.has(next)) return 'reason';
  return first === 'what' || first === 'which' ? (ANSWER_KINDS.get(next) ?? null) : null;
}
/** Words in a request typed as keywords: a short last line ("year of its invention", "its architect"). */
const KEYWORD_LINE_WORDS = 8;

/**
 * Whether a question that asks for a kind of answer (`askedFor`: "who invented it") and a request
 * typed as keywords (not put as a question: "year of its invention") ask for different kinds of
 * answer: the keywords name a person, a time, a place, a reason or an amount, and none of them is
 * what the question asks for or names anywhere ("when was he born" / "his date of birth" ask for
 * a time; "who invented it and when" asks for a time too). Keywords that name no such kind ("its
 * largest moon", "origin of sushi") say nothing. Read with their context, the two embed nearly
 * alike and share their words' stems, and the hit decision served "who invented it" / "year of
 * its invention" at 0.97.
 */
function otherAnswer(question: TextInfo, keywords: TextInfo): string | null {
  const kind = askedFor(question);
  if (kind === null) return null;
  const line = keywords.lastLine;
  if (line.length === 0 || line.length > KEYWORD_LINE_WORDS || opensQuestion(line[0] as string)) return null;
  const named = new Set<string>();
  for (const word of line) {
    // "founders", "founder's": the noun itself.
    const w = bare(word);
    const noun = ANSWER_KINDS.get(w) ?? (w.endsWith('s') ? ANSWER_KINDS.get(w.slice(0, -1)) : undefined);
    if (noun !== undefined) named.add(noun);
  }
  if (named.size === 0) return null;
  const asked = new Set<string>([kind]);
  for (const w of question.questionWords) {
    const also = QUESTION_KINDS.get(w);
    if (also !== undefined) asked.add(also);
  }
  for (const k of named) if (asked.has(k)) return null;
  return `${kind}/${[...named].join('+')}`;
}

type NameKind = 'person' | 'place' | 'organisation' | 'team';
/**
 * The kinds of name of compromise's lexicon that `otherNames` compares, by its tags. Cities,
 * countries and regions are one kind: the lexicon files some cities as regions or countries ("new
 * york", "singapore"), and "a visa for paris" / "for france", which then differ, is a miss, where
 * "best pizza in new york" / "in chicago" as one would be a wrong answer.
 */
const NAME_KINDS = new Map<string, NameKind>([
  ['FirstName', 'person'],
  ['FemaleName', 'person'],
  ['MaleName', 'person'],
  ['LastName', 'person'],
  ['Person', 'person'],
  ['Country', 'place'],
  ['Region', 'place'],
  ['City', 'place'],
  ['Place', 'place'],
  ['Organization', 'organisation'],
  ['SportsTeam', 'team'],
]);
/** Two names of one person or place, read as the second. */
const SAME_NAME = new Map(
  [
    // Short forms of first names: "mike tyson" / "michael tyson".
    ['michael', 'mike', 'mikey'],
    ['thomas', 'tom', 'tommy'],
    ['joseph', 'joe', 'joey'],
    ['james', 'jim', 'jimmy'],
    ['john', 'johnny', 'jack'],
    ['robert', 'rob', 'robbie', 'bob', 'bobby'],
    ['william', 'will', 'willy', 'bill', 'billy'],
    ['richard', 'rick', 'ricky', 'dick'],
    ['david', 'dave'],
    ['daniel', 'dan', 'danny'],
    ['christopher', 'chris'],
    ['matthew', 'matt'],
    ['nicholas', 'nick', 'nicolas'],
    ['anthony', 'tony'],
    ['stephen', 'steven', 'steve'],
    ['benjamin', 'ben'],
    ['abraham', 'abe'],
    ['samuel', 'sam'],
    ['alexander', 'alex'],
    ['andrew', 'andy', 'drew'],
    ['edward', 'ed', 'eddie'],
    ['timothy', 'tim'],
    ['ronald', 'ron'],
    ['donald', 'don'],
    ['patrick', 'pat'],
    ['jeffrey', 'jeff', 'jeffery'],
    ['joshua', 'josh'],
    ['catherine', 'katherine', 'kathryn', 'kate', 'katie', 'cathy', 'kathy'],
    ['elizabeth', 'liz', 'lizzie', 'beth', 'betty'],
    ['margaret', 'maggie', 'meg', 'peggy'],
    ['jennifer', 'jen', 'jenny'],
    ['susan', 'sue', 'suzy'],
    ['rebecca', 'becky'],
    ['jessica', 'jess'],
    // Places of two names or spellings.
    ['usa', 'america', 'united states'],
    ['united kingdom', 'great britain', 'uk', 'britain', 'england'],
    ['new zealand', 'nz'],
    ['united arab emirates', 'uae', 'dubai'],
    ['nyc', 'new york'],
    ['beijing', 'peking'],
    ['kyiv', 'kiev'],
    ['myanmar', 'burma'],
    ['bengaluru', 'bangalore'],
    ['macau', 'macao'],
    ['gujarat', 'gujrat'],
    ['chattogram', 'chittagong'],
    ['czechia', 'czech republic'],
    ['ivory coast', 'cote de ivoire'],
  ].flatMap(([first, ...others]) => (others as string[]).map((o) => [o, first as string] as const)),
);
/** Short names of countries, read as their full names (`SAME_NAME`). */
const COUNTRY_ABBREVIATIONS = ['uk', 'nz', 'uae'];
/** Words before "america" that make it a continent, not the USA. */
const CONTINENT = new Set(['south', 'north', 'latin', 'central']);
/**
 * Cities, states and countries that compromise's lexicon lacks or files only as people or last
 * names ("sydney", "houston", "austin", "victoria", "jordan", "chad"), from a check of about 300
 * cities, the states of the USA and the countries against it. Those it files as people are read as
 * both: "weather in houston" / "weather in dallas", "how old is sydney sweeney" / "how old is
 * zendaya".
 */
const ALSO_PLACES = new Set(
  (
    'santiago houston alexandria sydney adelaide austin orlando charlotte florence sofia victoria lincoln madison ' +
    'jackson savannah virginia chad jordan laos philippines pune fukuoka columbus cincinnati minneapolis tampa ' +
    'casablanca marrakech charleston tucson omaha louisville'
  ).split(' '),
);
/** Names of up to this many words are read. */
const NAME_WORDS = 4;
/**
 * The names of people, places, organisations and teams in compromise's lexicon, one word or more
 * ("los angeles", "bill gates"), with their kind; and the first words of the longer ones. Left out:
 * places of five letters or fewer that are not cities, countries or regions, which there are
 * airport codes and abbreviations ("ist", "lhr", "calif", "penn").
 */
const { NAMES, NAME_STARTS } = (() => {
  const lexicon = (nlp.model() as { one: { lexicon: Record<string, string | string[]> } }).one.lexicon;
  const names = new Map<string, NameKind>();
  const starts = new Set<string>();
  for (const [name, tags] of Object.entries(lexicon)) {
    const words = name.split(' ');
    if (words.length > NAME_WORDS || !words.every((w) => /^[a-z]{2,}$/.test(w)) || name.length < 3) continue;
    const list = typeof tags === 'string' ? [tags] : tags;
    const tag = list.find((t) => NAME_KINDS.has(t));
    if (tag === undefined || (tag === 'Place' && name.length <= 5 && name !== 'york')) continue;
    names.set(name, NAME_KINDS.get(tag) as NameKind);
    if (words.length > 1) starts.add(words[0] as string);
  }
  // Countries the lexicon holds only by their full names.
  for (const short of COUNTRY_ABBREVIATIONS) names.set(short, 'place');
  // Places the lexicon lacks, or files only as people ("sydney", "houston", "jordan"): those are
  // read as both (`ALSO_PLACES`).
  for (const place of ALSO_PLACES) if (!names.has(place)) names.set(place, 'place');
  return { NAMES: names as ReadonlyMap<string, NameKind>, NAME_STARTS: starts as ReadonlySet<string> };
})();

/** A word without a possessive. */
const bare = (w: string): string => (w.endsWith("'s") ? w.slice(0, -2) : w);

/** The one spelling of a text's word: "america" is "usa", but "south america" stays a continent. */
function spellingAt(words: readonly string[], i: number): string {
  const w = words[i] as string;
  const before = words[i - 1];
  if (w === 'america' && before !== undefined && CONTINENT.has(before)) return `${before} ${w}`;
  return SAME_NAME.get(w) ?? w;
}

/**
 * What `read` makes of a text, kept for as long as its analysis is: a stored text is read against
 * every query it is a candidate for.
 */
function memoised<T>(read: (t: TextInfo) => T): (t: TextInfo) => T {
  const memo = new WeakMap<TextInfo, T>();
  return (t) => {
    let v = memo.get(t);
    if (v === undefined && !memo.has(t)) memo.set(t, (v = read(t)));
    return v as T;
  };
}

/**
 * The names of a text with their kind, each under one spelling: a name of several words and the
 * names among its words ("barack obama" and "obama"). One-word names that are whole pieces of the
 * tokenizer's vocabulary are left out, as they are as often common words ("mark", "grant",
 * "chase", "jersey"). With them, in one pass, the text's words under one spelling and its names:
 * where another text's names are looked for.
 */
const namesOf = memoised(readNames);

function readNames(t: TextInfo): { names: Map<string, NameKind>; words: Set<string> } {
  const names = new Map<string, NameKind>();
  const spelt = new Set<string>();
  const words = t.words.map(bare);
  words.forEach((w, i) => {
    spelt.add(spellingAt(words, i));
    if (NAME_STARTS.has(w)) {
      for (let n = NAME_WORDS; n > 1; n--) {
        const name = words.slice(i, i + n).join(' ');
        const kind = NAMES.get(name);
        if (kind !== undefined) names.set(SAME_NAME.get(name) ?? name, kind);
      }
    }
    const kind = NAMES.get(w);
    if (kind === undefined || rarity(w) < UNSEEN) return;
    // "new york" is read whole; "york" alone is the English city.
    if (w !== 'york' || words[i - 1] !== 'new') names.set(spellingAt(words, i), kind);
  });
  for (const name of names.keys()) spelt.add(name);
  return { names, words: spelt };
}

/**
 * Whether a text names a thing: by that name, or by all its words ("barack hussein obama" names
 * "barack obama", "william gates" names "bill gates").
 */
const named = (name: string, words: Set<string>): boolean =>
  words.has(name) || name.split(' ').every((w) => words.has(SAME_NAME.get(w) ?? w));

/**
 * A person, place, organisation or team named only in one text where the other names another of
 * the same kind, when one of them is typed in lower case, or with capitals only at a sentence's
 * start and in "I" (`sentenceCase`: "how tall is lebron james" / "how tall is stephen curry",
 * "What is the capital of england" / "What is the capital of new zealand"): without capitals the
 * model cannot tell such names from other words, and scored these 0.86–0.97. Texts with capitals
 * on their names are left to the model, which reads them (there a gazetteer took right pairs from
 * news sentences that name a person two ways), unless they are the same words but for a few
 * (`oneStretchApart`).
 */
export function otherNames(a: TextInfo, b: TextInfo, however = false): string | null {
  const [start, end] = sharedEnds(a.words, b.words);
  if (!however && !a.sentenceCase && !b.sentenceCase && !oneStretchApart(a, b, start, end)) return null;
  const oneWord = a.words.length === b.words.length && start + end === a.words.length - 1;
  // The second text first: a stored candidate's names are remembered, and most name nothing.
  const { names: y, words: yWords } = namesOf(b);
  if (y.size === 0) return null;
  const { names: x, words: xWords } = namesOf(a);
  if (x.size === 0) return null;
  // The first name of each kind that only the second text has: one pass over each.
  // Where the texts are the same words but for one, a name of any kind for another: the lexicon
  // files some cities as people ("sydney", "austin"): "time difference between london and tokyo" /
  // "… and sydney".
  const kindsOf = (name: string, kind: NameKind): string[] => (oneWord ? ['any'] : ALSO_PLACES.has(name) ? [kind, 'place'] : [kind]);
  const onlyB = new Map<string, string>();
  for (const [name, kind] of y) {
    if (named(name, xWords)) continue;
    for (const k of kindsOf(name, kind)) if (!onlyB.has(k)) onlyB.set(k, name);
  }
  for (const [name, kind] of x) {
    if (named(name, yWords)) continue;
    for (const k of kindsOf(name, kind)) {
      const other = onlyB.get(k);
      if (other !== undefined) return `${name}/${other}`;
    }
  }
  return null;
}

/** Words, at most, that differ in `oneStretchApart`; and words around them that do not. */
const STRETCH_WORDS = 3;
const AROUND_WORDS = 3;

/**
 * Whether two texts, sharing `start` words at their start and then `end` at their end
 * (`sharedEnds`), are the same words but for one stretch of a few ("What is the capital city of
 * Australia?" / "… of Austria?"): there a name differs in what is asked, however it is written.
 * Texts with capitals on their names are otherwise left to the model, as news sentences name one
 * person or place two ways.
 */
function oneStretchApart(a: TextInfo, b: TextInfo, start: number, end: number): boolean {
  return start + end >= AROUND_WORDS && a.words.length - start - end <= STRETCH_WORDS && b.words.length - start - end <= STRETCH_WORDS;
}

/**
 * Languages, and what a cuisine or a people is called. English, Polish and Latin are not among them,
 * as they name the language a request is asked in ("what does 'merci' mean in English" / "translate
 * the French word 'merci'") or are common words ("polish my cover letter").
 */
const LANGUAGES: readonly (readonly string[])[] = [
  ['french'],
  ['german'],
  ['spanish'],
  ['italian'],
  ['portuguese'],
  ['russian'],
  ['chinese', 'mandarin'],
  ['cantonese'],
  ['japanese'],
  ['korean'],
  ['arabic'],
  ['hindi'],
  ['dutch'],
  ['swedish'],
  ['norwegian'],
  ['danish'],
  ['finnish'],
  ['greek'],
  ['turkish'],
  ['hebrew'],
  ['vietnamese'],
  ['thai'],
  ['indonesian'],
  ['ukrainian'],
  ['persian', 'farsi'],
  ['urdu'],
  ['bengali'],
  ['swahili'],
];

/**
 * Words that name different things of one kind: a request that has one where another has a
 * different one asks something else ("sort ascending" / "sort descending", "the second highest"
 * / "the third highest", "convert to km" / "convert to grams"). Each inner list is one thing under
 * its spellings; inflections are found by `member` ("encrypts", "Mondays", "today's"). Left out:
 * words a request uses in other senses as often ("up" / "down" in "speed up" and "slow down",
 * "show" / "hide" in "show me how to hide", "right" in "right now", "true", "even", "write" in
 * "write a script to read a CSV", "above" / "below" for where a pasted text is), which count only
 * as the one word two requests differ in (`REPLACED`), and units of time, which requests convert
 * freely ("a 7-day plan" / "a plan for one week").
 */
const SETS: readonly (readonly (readonly string[])[])[] = [
  [
    ['ascending', 'asc'],
    ['descending', 'desc'],
  ],
  [
    ['increase', 'increment', 'raise'],
    ['decrease', 'decrement', 'reduce', 'lower'],
  ],
  [
    ['upper', 'uppercase'],
    ['lower', 'lowercase'],
  ],
  [['higher'], ['lower']],
  [
    ['encrypt', 'encryption'],
    ['decrypt', 'decryption'],
  ],
  [['encode'], ['decode']],
  [
    ['compress', 'compression'],
    ['decompress', 'decompression'],
  ],
  [
    ['serialize', 'serialise', 'serialization'],
    ['deserialize', 'deserialise', 'deserialization'],
  ],
  [['upload'], ['download']],
  [['import'], ['export']],
  [['install', 'installation'], ['uninstall']],
  [['enable'], ['disable']],
  [['zip'], ['unzip']],
  [['lock'], ['unlock']],
  [['mount'], ['unmount']],
  [['subscribe'], ['unsubscribe']],
  [['block'], ['unblock']],
  [['follow'], ['unfollow']],
  [['connect'], ['disconnect']],
  [['login'], ['logout']],
  [['start'], ['stop']],
  [['buy'], ['sell']],
  [['before'], ['after']],
  [['best'], ['worst']],
  [
    ['min', 'minimum'],
    ['max', 'maximum'],
  ],
  [['faster'], ['slower']],
  [['expand'], ['collapse']],
  [
    ['horizontal', 'horizontally'],
    ['vertical', 'vertically'],
  ],
  [['top'], ['bottom']],
  [['inner'], ['outer']],
  [['inside'], ['outside']],
  [['input'], ['output']],
  [['send', 'sent'], ['receive']],
  [['client'], ['server']],
  [['frontend'], ['backend']],
  [['positive'], ['negative']],
  [['hot'], ['cold']],
  [['oily'], ['dry']],
  [['light'], ['dark']],
  [
    ['north', 'northern'],
    ['south', 'southern'],
    ['east', 'eastern'],
    ['west', 'western'],
  ],
  [['smallest'], ['largest', 'biggest']],
  // A country's capital is often not its largest city (Canberra, Ottawa, Ankara).
  [['capital'], ['largest', 'biggest', 'populous']],
  [['shortest'], ['longest']],
  [['highest'], ['lowest']],
  [['oldest'], ['youngest', 'newest']],
  [['earliest'], ['latest']],
  [['fastest'], ['slowest']],
  [['cheapest'], ['dearest']],
  [
    ['men', 'man'],
    ['women', 'woman'],
  ],
  [['boy'], ['girl']],
  [['husband'], ['wife']],
  [
    ['father', 'dad'],
    ['mother', 'mom', 'mum'],
  ],
  [['son'], ['daughter']],
  [['brother'], ['sister']],
  [['king'], ['queen']],
  [['yesterday'], ['today'], ['tomorrow']],
  [['breakfast'], ['lunch'], ['dinner']],
  [['morning'], ['afternoon'], ['evening', 'night', 'tonight']],
  [['summer'], ['winter'], ['spring'], ['autumn']],
  [['vegetarian'], ['vegan'], ['pescatarian']],
  [['junior'], ['senior']],
  // Nouns only: "does smoking cause cancer" / "does smoking have an effect on cancer" ask the same.
  [['causes'], ['effects', 'consequences']],
  [
    ['start', 'began', 'begin', 'beginning'],
    ['end', 'ended', 'ending'],
  ],
  // What a question asks of its topic: "What are the symptoms of ADHD?" / "What causes ADHD?",
  // "Explain the risks of AI" / "Explain the history of AI". ("causes" as above, not "cause";
  // "advantages" and "risks" only in the plural: "take advantage of" and "lower my risk of heart
  // disease" ask none of them; "pros" and "cons" only so, not "pro" or "con".)
  [
    ['symptom', 'sign'],
    ['causes', 'reason'],
    ['treatment', 'treat', 'cure', 'remedy', 'remedies'],
    ['prevention', 'prevent'],
    ['diagnosis', 'diagnose'],
    ['history', 'origin'],
    ['advantages', 'benefit', 'pros'],
    ['disadvantages', 'drawback', 'downside', 'cons', 'risks', 'danger'],
    ['example'],
  ],
  [
    ['born', 'birth', 'birthday', 'birthplace'],
    ['die', 'died', 'death'],
  ],
  [['sun'], ['moon'], ['earth'], ['mercury'], ['venus'], ['mars'], ['jupiter'], ['saturn'], ['uranus'], ['neptune'], ['pluto']],
  [
    ['first', '1st'],
    ['second', '2nd'],
    ['third', '3rd'],
    ['fourth', '4th'],
    ['fifth', '5th'],
    ['sixth', '6th'],
    ['seventh', '7th'],
    ['eighth', '8th'],
    ['ninth', '9th'],
    ['tenth', '10th'],
  ],
  [['monday'], ['tuesday'], ['wednesday'], ['thursday'], ['friday'], ['saturday'], ['sunday']],
  [
    ['january', 'jan'],
    ['february', 'feb'],
    ['march'],
    ['april', 'apr'],
    ['june'],
    ['july'],
    ['august', 'aug'],
    ['september', 'sept'],
    ['october', 'oct'],
    ['november', 'nov'],
    ['december', 'dec'],
  ],
  [['red'], ['green'], ['blue'], ['yellow'], ['orange'], ['purple'], ['pink'], ['black'], ['white'], ['brown'], ['gray', 'grey']],
  [
    ['python'],
    ['java'],
    ['javascript', 'js'],
    ['typescript', 'ts'],
    ['ruby'],
    ['rust'],
    ['golang'],
    ['php'],
    ['kotlin'],
    ['scala'],
    ['perl'],
    ['haskell'],
    ['bash'],
    ['powershell'],
    ['matlab'],
  ],
  [['windows'], ['mac', 'macos', 'osx'], ['linux']],
  [['ubuntu'], ['debian'], ['fedora'], ['centos']],
  [['ios', 'iphone'], ['android']],
  [['mysql'], ['postgres', 'postgresql'], ['sqlite'], ['mongodb', 'mongo'], ['redis']],
  [['chrome'], ['firefox'], ['safari']],
  [
    ['km', 'kilometer', 'kilometre'],
    ['mile'],
    ['meter', 'metre'],
    ['foot', 'feet', 'ft'],
    ['inch', 'inches'],
    ['yard'],
    ['cm', 'centimeter', 'centimetre'],
    ['mm', 'millimeter', 'millimetre'],
  ],
  [['celsius', 'centigrade'], ['fahrenheit'], ['kelvin']],
  [['kg', 'kilogram', 'kilo'], ['pound', 'lb', 'lbs'], ['gram'], ['ounce', 'oz']],
  [['liter', 'litre'], ['gallon'], ['cup'], ['ml', 'milliliter', 'millilitre']],
  [
    ['teaspoon', 'tsp'],
    ['tablespoon', 'tbsp'],
  ],
  [
    ['dollar', 'usd'],
    ['euro', 'eur'],
    ['yen', 'jpy'],
    ['rupee', 'inr'],
    ['yuan', 'rmb', 'cny'],
    ['gbp', 'sterling', 'pound'],
  ],
  [['hundred'], ['thousand'], ['million'], ['billion'], ['trillion']],
  // Languages, and what a cuisine or a people is called: "translate it to french" / "to german".
  // (Not the countries: "imported in Japan" / "in Germany" is a question QQP calls the same.
  // English, Polish and Latin count only as the one word replaced: `REPLACED`.)
  LANGUAGES,
  // Ways of cooking; baking and roasting, grilling and broiling are one.
  [
    ['boil', 'boiled', 'boiling'],
    ['fry', 'fried', 'frying'],
    ['scramble', 'scrambled'],
    ['poach', 'poached', 'poaching'],
    ['bake', 'baked', 'baking', 'roast', 'roasted', 'roasting'],
    ['grill', 'grilled', 'grilling', 'broil', 'broiled', 'broiling'],
    ['steam', 'steamed', 'steaming'],
    ['raw'],
  ],
  // Limbs and joints: "how many bones are in the hand" / "in the foot", "pain in my knee" / "elbow".
  // (Not the head, the back or the eyes, which requests name in other senses as often.)
  [
    ['hand', 'hands'],
    ['foot', 'feet'],
    ['arm', 'arms'],
    ['leg', 'legs'],
    ['knee', 'knees'],
    ['elbow', 'elbows'],
    ['shoulder', 'shoulders'],
    ['ankle', 'ankles'],
    ['wrist', 'wrists'],
    ['hip', 'hips'],
    ['finger', 'fingers'],
    ['toe', 'toes'],
  ],
  // What a food holds, in its nutrition facts: "how many calories are in an avocado" / "how much
  // protein is in an avocado". (Sodium is an element, below.)
  [
    ['calories', 'calorie', 'kcal'],
    ['protein', 'proteins'],
    ['fat', 'fats'],
    ['carbs', 'carb', 'carbohydrates', 'carbohydrate'],
    ['sugar', 'sugars'],
    ['fiber', 'fibre'],
    ['cholesterol'],
    ['caffeine'],
  ],
  // Changes of state: "what happens during evaporation" / "during condensation".
  [
    ['evaporation', 'evaporate', 'evaporates', 'evaporating'],
    ['condensation', 'condense', 'condenses', 'condensing'],
    ['sublimation', 'sublimate', 'sublimates'],
    ['melting', 'melt', 'melts'],
    ['freezing', 'freeze', 'freezes'],
  ],
  [
    ['hydrogen'],
    ['helium'],
    ['lithium'],
    ['carbon'],
    ['nitrogen'],
    ['oxygen'],
    ['sodium'],
    ['magnesium'],
    ['aluminum', 'aluminium'],
    ['silicon'],
    ['phosphorus'],
    ['sulfur', 'sulphur'],
    ['chlorine'],
    ['potassium'],
    ['calcium'],
    ['iron'],
    ['copper'],
    ['zinc'],
    ['silver'],
    ['gold'],
    ['mercury'],
    ['lead'],
    ['uranium'],
    ['plutonium'],
    ['neon'],
    ['argon'],
    ['titanium'],
    ['nickel'],
    ['platinum'],
  ],
  [['aws'], ['azure'], ['gcp'], ['heroku'], ['digitalocean'], ['vercel'], ['netlify']],
  [['sunrise'], ['sunset']],
  [['mute'], ['unmute']],
  // Common medicines, each under its generic and brand names.
  [
    ['ibuprofen', 'advil', 'motrin', 'nurofen'],
    ['acetaminophen', 'paracetamol', 'tylenol', 'panadol'],
    ['aspirin'],
    ['naproxen', 'aleve'],
    ['diphenhydramine', 'benadryl'],
    ['loratadine', 'claritin'],
    ['cetirizine', 'zyrtec'],
    ['omeprazole', 'prilosec'],
    ['metformin'],
    ['amoxicillin'],
    ['melatonin'],
  ],
  [['react', 'reactjs'], ['vue', 'vuejs'], ['angular'], ['angularjs'], ['svelte'], ['django'], ['flask'], ['fastapi'], ['laravel']],
];

/** Each word of some sets: the set it belongs to and the thing it names there. */
function membersOf(sets: readonly (readonly (readonly string[])[])[]): Map<string, { set: number; member: number }[]> {
  const members = new Map<string, { set: number; member: number }[]>();
  sets.forEach((set, s) =>
    set.forEach((member, m) => {
      for (const word of member) {
        const list = members.get(word) ?? [];
        list.push({ set: s, member: m });
        members.set(word, list);
      }
    }),
  );
  return members;
}
const MEMBERS = membersOf(SETS);

/** The first spelling of a thing of the sets (or of another table of them, `REPLACED`). */
function firstSpelling(set: number, member: number, sets = SETS): string {
  return ((sets[set] as readonly (readonly string[])[])[member] as readonly string[])[0] as string;
}

/**
 * The first spelling of the thing a word names in the sets, or in `REPLACED` as written ("int" is
 * "integer": "convert an integer to a string" / "convert string to int" swap two things), or the
 * word itself.
 */
function swapSpelling(word: string): string {
  const hit = member(word)?.[0];
  if (hit) return firstSpelling(hit.set, hit.member);
  const replaced = REPLACED_MEMBERS.get(word)?.[0];
  return replaced ? firstSpelling(replaced.set, replaced.member, REPLACED) : word;
}

/** Words that look like an inflection of a set's word and are not ("mind", "mining", "seconds"). */
const NOT_INFLECTED = new Set(['mind', 'mining', 'mins', 'seconds', 'signed', 'signing']);

/** A word's entries in the sets, as written or without an inflection ("reads", "encrypted", "today's"). */
function member(word: string): { set: number; member: number }[] | undefined {
  const direct = MEMBERS.get(word);
  if (direct || NOT_INFLECTED.has(word)) return direct;
  const w = bare(word);
  for (const form of [
    w,
    w.replace(/s$/, ''),
    w.replace(/es$/, ''),
    w.replace(/ed$/, ''),
    w.replace(/d$/, ''),
    w.replace(/ing$/, ''),
    w.replace(/ing$/, 'e'),
  ]) {
    const hit = form.length > 1 ? MEMBERS.get(form) : undefined;
    if (hit) return hit;
  }
  return undefined;
}

/** The things each set names in a text: set → members. */
function namedThings(text: TextInfo): Map<number, Set<number>> {
  const out = new Map<number, Set<number>>();
  for (const w of text.wordSet) {
    const hits = member(w);
    if (!hits) continue;
    for (const { set, member: m } of hits) {
      let found = out.get(set);
      if (!found) out.set(set, (found = new Set()));
      found.add(m);
    }
  }
  return out;
}

/**
 * The first word pair by which the texts name different things of one kind: a thing only the
 * first names and another thing of the same kind only the second does. Null when there is none.
 */
export function contrastingWords(a: TextInfo, b: TextInfo): string | null {
  const ta = namedThings(a);
  const tb = namedThings(b);
  for (const [set, ma] of ta) {
    const mb = tb.get(set);
    if (!mb) continue;
    const onlyA = [...ma].filter((m) => !mb.has(m));
    const onlyB = [...mb].filter((m) => !ma.has(m));
    if (onlyA.length > 0 && onlyB.length > 0) return `${firstSpelling(set, onlyA[0] as number)}/${firstSpelling(set, onlyB[0] as number)}`;
  }
  return null;
}

/** Words that join two things without ordering them: "X and Y", "X or Y", "X vs Y". */
const CONNECTORS = new Set(['and', 'or', 'nor', 'vs', 'versus', 'v', 'plus', 'times', 'x', 'both', 'either', 'neither', 'with']);
/** Requests in which "with" orders two things: "replace tabs with spaces" / "replace spaces with tabs". */
const ORDERED_WITH = new Set(['replace', 'replacing', 'substitute', 'substituting', 'fill', 'filling', 'cover']);
/** Words of a request in which two things can change places and the request stays the same. */
const COMPARISON = new Set(
  (
    'between compare compared comparing comparison different differ differs difference similar similarity same equal equals ' +
    'equivalent alike opposite antonym synonym related relation relationship married far distance apart drive driving ' +
    'multiply multiplied product sum add added'
  ).split(' '),
);
const HOW_MANY = new Set(['many', 'much']);
/** Units of length as `spelling` reads them: "how many km from X to Y" is a distance, either way. */
const LENGTHS = new Set(['km', 'mile', 'meter', 'foot', 'inch', 'yard', 'cm', 'mm']);
/** Units of a journey: "how many hours from Tokyo to Osaka" is one either way, between two places. */
const JOURNEY = new Set(['hour', 'minute', 'day', 'stop']);
/** What "how many" or "how much" asks for in a text: its unit's set, or null. */
function measureOf(w: readonly string[]): 'length' | 'journey' | null {
  for (let k = 0; k + 2 < w.length; k++) {
    if (w[k] !== 'how' || !HOW_MANY.has(w[k + 1] as string)) continue;
    const unit = (w[k + 2] as string).replace(/s$/, '');
    if (LENGTHS.has(unit)) return 'length';
    if (JOURNEY.has(unit)) return 'journey';
  }
  return null;
}
/**
 * Whether "from S1 to S2" in a text that asks "how many" of a length, or of a journey between two
 * places, reads the same either way ("how many hours from 9am to 5pm" does not).
 */
function eitherWay(x: readonly string[], y: readonly string[], s1: readonly string[], s2: readonly string[]): boolean {
  const measure = measureOf(x) ?? measureOf(y);
  if (measure === 'length') return true;
  return measure === 'journey' && NAMES.get(s1.join(' ')) === 'place' && NAMES.get(s2.join(' ')) === 'place';
}
/** Words left out when looking for a swap: "an int to a string" / "a string to an int". */
const DETERMINERS = new Set(['a', 'an', 'the', 'my', 'your', 'our', 'his', 'her', 'their', 'its', 'this', 'that', 'some']);
/** Steps of `swappedRoles` before it gives up (about 2 ms at most). */
const SWAP_BUDGET = 10_000;
const FUNCTION_WORDS = new Set(
  (
    'a an the and or but of to in on at by for with from into onto about as is are was were be been do does did i me my we ' +
    'you your he she it its they them their this that what which who how when where why can could should would will minus'
  ).split(' '),
);

const same = (x: readonly string[], i: number, y: readonly string[], j: number, n: number): boolean => {
  if (i < 0 || j < 0 || i + n > x.length || j + n > y.length) return false;
  for (let k = 0; k < n; k++) if (x[i + k] !== y[j + k]) return false;
  return true;
};

/** Does `x` hold `p`, then `m`, then `q`, back to back? */
function holds(x: readonly string[], p: readonly string[], m: readonly string[], q: readonly string[]): boolean {
  const all = [...p, ...m, ...q];
  for (let i = 0; i + all.length <= x.length; i++) if (same(x, i, all, 0, all.length)) return true;
  return false;
}

/**
 * Two things that change places around the same words: "10 miles to km" / "10 km to miles", "is
 * Python faster than Java" / "is Java faster than Python", "flights from Boston to New York" / "from
 * New York to Boston", "20 is what percent of 80" / "80 is what …". The first text has "S1 M S2" and
 * the second "S2 M S1" (S1 and S2 of one to three words, M of one to five, articles and possessives
 * left out, spellings of one thing in the sets read as one), and neither has both orders. Null when
 * the words between only join the two ("X and Y", "X or Y", "X vs Y", "X with Y" unless something
 * is replaced or filled), when they are two phrases of one preposition ("in Paris in June"), or
 * when the request compares, measures a distance, adds or multiplies ("the difference between X
 * and Y", "how far is X from Y", "how many km from X to Y", "7 times 8"), where the order does not
 * matter.
 */
export function swappedRoles(a: TextInfo, b: TextInfo): string | null {
  // Spellings of one thing read as one: "10 miles to km" / "10 kilometres to miles".
  const x = a.words.filter((w) => !DETERMINERS.has(w)).map(swapSpelling);
  const y = b.words.filter((w) => !DETERMINERS.has(w)).map(swapSpelling);
  if (x.some((w) => COMPARISON.has(w)) || y.some((w) => COMPARISON.has(w))) return null;
  const ordered = x.some((w) => ORDERED_WITH.has(w)) || y.some((w) => ORDERED_WITH.has(w));
  const joins = (w: string) => CONNECTORS.has(w) && !(w === 'with' && ordered);
  // Where each word of the second text is, so that a swap is looked for only where S1 recurs.
  const at = new Map<string, number[]>();
  y.forEach((w, j) => {
    const list = at.get(w);
    if (list) list.push(j);
    else at.set(w, [j]);
  });
  // A bound on the work, whatever the texts: a word repeated all through both ("foo bar foo bar …")
  // would otherwise be tried at every pair of places. Past it the texts are taken as no swap.
  let budget = SWAP_BUDGET;
  for (let i = 0; i < x.length; i++) {
    if (FUNCTION_WORDS.has(x[i] as string)) continue;
    for (const q of at.get(x[i] as string) ?? []) {
      // S1 is x[i, i + n1) and y[q, q + n1); M follows it in x and precedes it in y; S2 follows M in
      // x and precedes M in y.
      for (let n1 = 1; n1 <= 3 && same(x, i, y, q, n1); n1++) {
        for (let nm = 1; nm <= 5; nm++) {
          if (--budget < 0) return null;
          if (!same(x, i + n1, y, q - nm, nm)) continue;
          for (let n2 = 1; n2 <= 3; n2++) {
            if (!same(x, i + n1 + nm, y, q - nm - n2, n2)) continue;
            budget -= 10;
            const s1 = x.slice(i, i + n1);
            const m = x.slice(i + n1, i + n1 + nm);
            const s2 = x.slice(i + n1 + nm, i + n1 + nm + n2);
            // The same thing on both sides ("art print … art print") is no swap.
            if (s1.some((w) => s2.includes(w)) || s2.every((w) => FUNCTION_WORDS.has(w))) continue;
            // "X and Y", "X or Y"; and lists: "2002, 2001 and 2000" / "2000, 2001 and 2002".
            if (m.every(joins) || joins(m[0] as string) || joins(m[nm - 1] as string)) continue;
            // Two phrases of one preposition in another order: "in Paris in June" / "in June in Paris";
            // and a list in another order, its commas gone: "react, vue, angular" / "angular, vue, react".
            if (nm === 1 && (x[i - 1] === m[0] || (n1 === 1 && n2 === 1 && !FUNCTION_WORDS.has(m[0] as string)))) continue;
            // "how many ml in 2 cups" / "2 cups in ml": the same conversion, asked both ways.
            if (nm === 1 && m[0] === 'in' && HOW_MANY.has(x[i - 1] as string) !== HOW_MANY.has(y[q - nm - n2 - 1] as string)) continue;
            // "how many km from Tokyo to Osaka" / "… from Osaka to Tokyo": a distance, either way.
            if (
              nm === 1 &&
              m[0] === 'to' &&
              x[i - 1] === 'from' &&
              y[q - nm - n2 - 1] === 'from' &&
              eitherWay(x, y, x.slice(i, i + n1), x.slice(i + n1 + nm, i + n1 + nm + n2))
            )
              continue;
            budget -= x.length + y.length;
            if (holds(x, s2, m, s1) || holds(y, s1, m, s2)) continue;
            return [...s1, ...m, ...s2].join(' ');
          }
        }
      }
    }
  }
  return null;
}

const UNITS =
  'zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen'.split(
    ' ',
  );
const TENS = 'twenty thirty forty fifty sixty seventy eighty ninety'.split(' ');
const WORD_VALUE = new Map<string, number>([...UNITS.map((w, i) => [w, i] as const), ...TENS.map((w, i) => [w, 20 + 10 * i] as const)]);
const SCALE: Record<string, number> = { hundred: 100, thousand: 1e3, million: 1e6, mn: 1e6, billion: 1e9, bn: 1e9 };
/** A scale glued to a number: "10k", "2.5M", "$3b". */
const LETTER_SCALE: Record<string, number> = { k: 1e3, m: 1e6, b: 1e9 };
const NUMBER_WORD = `(?:${[...UNITS, ...TENS, 'hundred', 'thousand', 'million', 'billion'].join('|')})`;
const WORDS_RE = new RegExp(
  `(?<![\\p{L}-])(?:a\\s+(?=(?:hundred|thousand|million|billion)\\b))?${NUMBER_WORD}(?:(?:[\\s-]+(?:and[\\s-]+)?)${NUMBER_WORD})*(?!\\p{L}|-(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth)\\b)`,
  'giu',
);
/** Whether a text may have a number in words: a cheap look before `WORDS_RE`. */
const ANY_NUMBER_WORD = new RegExp(NUMBER_WORD, 'i');
const DIGITS_RE =
  /(?<![\p{L}\p{N}.,:/])(?:(\d{1,2})(?:[:.](\d{2}))?\s*([ap])\.?m\b\.?|(\d{1,2}):(\d{2})(?![\d:])|(\d+(?:\/\d+)+)(?!\d)|(\d+(?:,\d+)*)(?:\.(\d+))?(?:[\s-]*(thousand|million|mn|billion|bn)s?\b|-?(k|m|b)(?!\p{L}))?)/giu;

const ROMAN: Record<string, number> = Object.fromEntries(
  'i ii iii iv v vi vii viii ix x xi xii xiii xiv xv xvi xvii xviii xix xx'.split(' ').map((r, i) => [r, i + 1]),
);
/**
 * Roman numerals after a name: "World War II", "Henry VIII", "henry viii". "I", "V" and "X" count only
 * after a capitalised word that follows another word ("World War I", not "Can I"); in lower case
 * only the forms no word has ("vii", "xiv").
 */
const ROMAN_RE =
  /(?<![\p{L}\p{N}])(?:II|III|IV|VI|VII|VIII|IX|XI|XII|XIII|XIV|XV|XVI|XVII|XVIII|XIX|XX|iii|vii|viii|xii|xiii|xiv|xvi|xvii|xviii|xix|(?<=\p{L}[ \t]\p{Lu}\p{L}*[ \t])[IVX])(?![\p{L}\p{N}])/gu;

/**
 * The text with each run of number words that names one number written as that number in digits
 * ("Give me ten tips" as "Give me 10 tips", "twenty-five" as "25", "a hundred" as "100"); "one"
 * alone, a pronoun as often, and runs of several numbers ("two or three") are left as typed.
 */
export function numberWordsAsDigits(text: string): string {
  if (!ANY_NUMBER_WORD.test(text)) return text;
  return text.replace(WORDS_RE, (run) => {
    const values = wordNumbers(run);
    return values.length === 1 ? String(values[0]) : run;
  });
}

/**
 * The numbers of a run of number words: "twenty-five", "a hundred and fifty", "two thousand and
 * one" are one each; "five and seven", "two or three" are two.
 */
function wordNumbers(run: string): number[] {
  const words = run.toLowerCase().split(/[\s-]+/);
  // "one" alone is a pronoun as often as a number ("which one"); it counts in a longer run.
  if (words.length === 1 && words[0] === 'one') return [];
  const out: number[] = [];
  let total = 0;
  let current = 0;
  let has = false;
  let previous = '';
  const flush = () => {
    if (has) out.push(total + current);
    total = 0;
    current = 0;
    has = false;
  };
  for (const w of words) {
    const v = WORD_VALUE.get(w);
    if (w === 'a') {
      current = 1;
      has = true;
    } else if (w === 'and') {
      // "a hundred and fifty" is one number, "five and seven" two.
      if (!(previous in SCALE)) flush();
    } else if (v !== undefined) {
      const previousValue = WORD_VALUE.get(previous);
      // "twenty five" is one number; "five seven" two.
      if (previousValue !== undefined && !(previousValue >= 20 && previousValue % 10 === 0 && v < 10)) flush();
      current += v;
      has = true;
    } else if (w === 'hundred') {
      current = (current || 1) * 100;
      has = true;
    } else {
      if (!has) return out;
      total += (current || 1) * (SCALE[w] as number);
      current = 0;
    }
    previous = w;
  }
  flush();
  return out;
}

/**
 * The quantities a text names. One quantity however it is written: "10,000", "10000", "10k" and
 * "ten thousand"; "25" and "twenty-five"; "1/2" and "0.5"; "3 pm", "3pm" and "15:00"; "4th" and
 * "4"; "2.5kg" and "2.5 kg". A form that reads two ways gives both readings, so that either
 * matches: "10k" is also 10 ("a 10k race"), "2.5m" also 2.5 (metres), "1,5" also 1.5 and "1/2"
 * also 1 and 2 (a date), "3:00" also 15:00. Decimals keep their digits ("3.10" and "3.1" are two
 * versions). Digits after a letter ("mp3", "h2o", "v2") are not quantities. Each quantity comes
 * with what it counts (`unitAfter`: "2.5kg": "kg"; "for 20 guests": "person"; "for 2": none); a
 * time counts time, and a Roman numeral other numerals.
 */
export function quantitiesOf(text: string): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  let context = '';
  const add = (value: string) => {
    let contexts = out.get(value);
    if (!contexts) out.set(value, (contexts = new Set()));
    contexts.add(context);
  };
  for (const m of text.matchAll(DIGITS_RE)) {
    // A time counts time, whatever word follows it.
    context = m[1] !== undefined || m[4] !== undefined ? 't' : unitAfter(text, (m.index as number) + m[0].length);
    if (m[1] !== undefined) {
      const h = Number(m[1]) % 12;
      add(`t${(m[3]?.toLowerCase() === 'p' ? h + 12 : h) * 60 + Number(m[2] ?? 0)}`);
    } else if (m[4] !== undefined) {
      const h = Number(m[4]);
      add(`t${h * 60 + Number(m[5])}`);
      if (h >= 1 && h < 12) add(`t${(h + 12) * 60 + Number(m[5])}`);
    } else if (m[6] !== undefined) {
      const parts = m[6].split('/');
      for (const part of parts) add(String(Number(part)));
      if (parts.length === 2 && Number(parts[1]) !== 0) add(String(Number((Number(parts[0]) / Number(parts[1])).toFixed(4))));
    } else {
      const digits = m[7] as string;
      const parts = digits.split(',');
      let whole: string;
      if (parts.length === 1 || /^\d{1,3}(?:,\d{3})+$/.test(digits)) whole = String(Number(parts.join('')));
      else {
        // "1,5" (a decimal comma) or a list without spaces, "3,1,2".
        for (const part of parts) add(String(Number(part)));
        if (parts.length === 2 && (parts[1] as string).length <= 2 && m[8] === undefined) add(`${Number(parts[0])}.${parts[1]}`);
        continue;
      }
      const value = m[8] !== undefined ? `${whole}.${m[8]}` : whole;
      const word = m[9]?.toLowerCase();
      const letter = m[10]?.toLowerCase();
      if (word) add(String(Number(value) * (SCALE[word] as number)));
      else {
        add(value);
        if (letter) add(String(Number(value) * (LETTER_SCALE[letter] as number)));
      }
    }
  }
  for (const m of text.matchAll(ROMAN_RE)) {
    // A numeral of a name (a war, a king, a sequel) compares with another such numeral only.
    context = 'roman';
    add(String(ROMAN[m[0].toLowerCase()]));
  }
  for (const m of text.matchAll(WORDS_RE)) {
    context = unitAfter(text, (m.index as number) + m[0].length);
    for (const v of wordNumbers(m[0])) add(String(v));
  }
  return out;
}

/**
 * What a quantity counts: the word right after it (glued, or past spaces or a hyphen), lower-cased,
 * without a plural, one spelling for a few units (`UNIT_WORDS`); none for a word such as "in".
 */
function unitAfter(text: string, at: number): string {
  const m = /^[ \t-]*(%|\p{L}+)/u.exec(text.slice(at, at + 40));
  if (!m) return '';
  const word = (m[1] as string).toLowerCase();
  if (UNIT_WORDS[word]) return UNIT_WORDS[word];
  // A word like "in" or "of" after a number says nothing of what it counts ("in 1789 in France").
  if (FUNCTION_WORDS.has(word)) return '';
  return word.replace(/(?<=(?:ch|sh|x|ss))es$/, '').replace(/(?<=..[^s])s$/, '');
}

/** Words that name one unit, for the word after a quantity. */
const UNIT_WORDS: Record<string, string> = {
  percent: '%',
  per: '%',
  min: 'minute',
  mins: 'minute',
  hr: 'hour',
  hrs: 'hour',
  people: 'person',
  persons: 'person',
  guests: 'person',
  guest: 'person',
  feet: 'foot',
  ft: 'foot',
  children: 'child',
  kids: 'child',
  kid: 'child',
  yrs: 'year',
  yr: 'year',
};

/**
 * A quantity only one text names, and another only the other does, of the same thing: "for 2
 * people" / "for 20 people", "in 1789" / "in 1793". Quantities of different things are left to the
 * model, as they are often one amount in two units ("a 90 minute nap" / "a 1.5 hour nap", "4g" /
 * "4000 mg").
 */
export function differentQuantities(a: Map<string, Set<string>>, b: Map<string, Set<string>>): string | null {
  if (a.size === 0 || b.size === 0) return null;
  // What each quantity only the second names counts, to look up rather than compare pairwise.
  const onlyB = new Map<string, string>();
  for (const [y, cy] of b) if (!a.has(y)) for (const c of cy) if (!onlyB.has(c)) onlyB.set(c, y);
  for (const [x, cx] of a) {
    if (b.has(x)) continue;
    for (const c of cx) {
      const y = onlyB.get(c);
      if (y !== undefined) return `${x}/${y}`;
    }
  }
  return null;
}

/**
 * Things of one kind named by words that a request as often uses in other senses ("right now",
 * "set a variable", "even if", "turn up"), so they are in no set of `contrastingWords` and count
 * only as the one word two requests differ in.
 */
const REPLACED: readonly (readonly (readonly string[])[])[] = [
  [['left'], ['right']],
  // Joins of SQL: "sql left join example" / "sql inner join example".
  [['inner'], ['outer'], ['left'], ['right'], ['full'], ['cross']],
  [['up'], ['down']],
  [['in', 'into'], ['out']],
  [['on'], ['off']],
  [['even'], ['odd']],
  [
    ['open', 'opening'],
    ['close', 'closing'],
  ],
  [['true'], ['false']],
  [
    ['read', 'reading'],
    ['write', 'writing'],
  ],
  [
    ['get', 'getter'],
    ['set', 'setter'],
  ],
  [
    ['key', 'keys'],
    ['value', 'values'],
  ],
  [
    ['row', 'rows'],
    ['column', 'columns', 'col', 'cols'],
  ],
  [['width'], ['height']],
  [['first'], ['last']],
  [['next'], ['previous', 'prev']],
  [['start', 'beginning', 'begin'], ['end']],
  [
    ['add', 'adding', 'insert', 'inserting', 'append', 'appending'],
    ['remove', 'removing', 'delete', 'deleting', 'drop', 'dropping'],
  ],
  [['more'], ['less', 'fewer']],
  // "coffee with milk calories" / "coffee without milk calories" 0.99.
  [['with'], ['without']],
  // "Arguments for the death penalty" / "Arguments against the death penalty" 0.99.
  [['for'], ['against']],
  [['over'], ['under']],
  [['above'], ['below']],
  [['front'], ['back']],
  [['push'], ['pull']],
  [['public'], ['private']],
  [['local'], ['global', 'remote']],
  [['static'], ['dynamic']],
  [
    ['sync', 'synchronous'],
    ['async', 'asynchronous'],
  ],
  [
    ['string', 'str', 'strings'],
    // A list and an array, a number and an integer, are asked for alike.
    ['list', 'lists', 'array', 'arrays'],
    ['set', 'sets'],
    ['dictionary', 'dict', 'dictionaries', 'dicts'],
    ['tuple', 'tuples'],
    ['integer', 'int', 'integers', 'ints', 'number', 'numbers'],
    ['float', 'floats'],
    ['boolean', 'bool', 'booleans'],
  ],
  [['sum', 'total'], ['average', 'mean'], ['median'], ['mode']],
  [
    ['show', 'showing', 'unhide'],
    ['hide', 'hiding'],
  ],
  [['value'], ['reference']],
  // A language where nothing else differs: "translate it to english" / "to swedish".
  [['english'], ['polish'], ['latin'], ...LANGUAGES],
  [
    ['accept', 'accepting', 'accepted', 'approve', 'approving', 'approved'],
    ['decline', 'declining', 'declined', 'reject', 'rejecting', 'rejected', 'refuse', 'refusing'],
  ],
  [
    ['keep', 'keeping', 'kept'],
    ['discard', 'discarding', 'discarded'],
  ],
  [
    ['synonym', 'synonyms'],
    ['antonym', 'antonyms'],
  ],
  // The singular and the verb too, here, where they are the one word replaced ("main cause of the
  // war" / "main consequence of the war"); the sets hold only the plural nouns.
  [
    ['cause', 'causes', 'caused'],
    ['consequence', 'consequences', 'effect', 'effects', 'result', 'results'],
  ],
  // What a request asks done to a text, code or data it gives: "Explain this code: …" / "Optimize
  // this code: …" 0.96, "Sort these numbers: 5, 3, 9, 1" / "Sum these numbers: …" 0.98. The words of
  // one member ask the same ("Rephrase" / "Reword", "Fix" / "Debug"); "improve" is both kinds of
  // rework.
  [
    ['explain', 'explaining', 'describe', 'describing', 'interpret', 'interpreting'],
    ['summarize', 'summarise', 'summarizing', 'summarising', 'condense', 'condensing', 'shorten', 'shortening'],
    ['translate', 'translating'],
    ['paraphrase', 'paraphrasing', 'rephrase', 'rephrasing', 'reword', 'rewording', 'rewrite', 'rewriting'],
    ['optimize', 'optimise', 'optimizing', 'optimising', 'improve', 'improving'],
    ['refactor', 'refactoring', 'improve', 'improving'],
    ['fix', 'fixing', 'debug', 'debugging', 'correct', 'correcting', 'proofread', 'proofreading'],
    ['comment', 'commenting', 'annotate', 'annotating', 'document', 'documenting'],
    ['sort', 'sorting'],
    ['sum', 'summing'],
    ['count', 'counting'],
    ['reverse', 'reversing'],
    ['classify', 'classifying', 'categorize', 'categorise', 'categorizing', 'categorising'],
    ['complete', 'completing', 'continue', 'continuing', 'finish', 'finishing'],
  ],
  // The tone a text is asked in, and whom it is for: "Make it more formal." / "Make it more
  // casual." 0.96, "Make it for kids." / "Make it for adults." 0.94 (after the same poem).
  [
    ['formal', 'professional'],
    ['casual', 'informal', 'friendly', 'friendlier', 'conversational'],
    ['funny', 'funnier', 'humorous', 'humourous'],
    ['serious'],
  ],
  [
    ['kids', 'kid', 'children', 'child'],
    ['teens', 'teen', 'teenagers', 'teenager'],
    ['adults', 'adult', 'grownups'],
    ['beginners', 'beginner', 'novices', 'novice'],
    ['experts', 'expert'],
  ],
];
const REPLACED_MEMBERS = membersOf(REPLACED);

/**
 * Words after which two of `REPLACED` say the same, right after them or one word later: "fill in" /
 * "fill out" a form, "based on" / "based off", "break it down" / "break it up".
 */
const ALIKE_AFTER = new Map([
  ['fill', new Set(['in', 'out'])],
  ['filling', new Set(['in', 'out'])],
  ['type', new Set(['in', 'out'])],
  ['based', new Set(['on', 'off'])],
  ['break', new Set(['up', 'down'])],
  ['close', new Set(['up', 'down'])],
  ['write', new Set(['up', 'down'])],
  // Whether a service is up or down: "is reddit down" / "is reddit up".
  ['is', new Set(['up', 'down'])],
  ['are', new Set(['up', 'down'])],
]);
/** Whether the word at `i` says the same as its pair after the word one or two before it ("break it down"). */
const alikeAfter = (w: readonly string[], i: number): boolean =>
  ALIKE_AFTER.get(w[i - 1] as string)?.has(w[i] as string) === true || ALIKE_AFTER.get(w[i - 2] as string)?.has(w[i] as string) === true;
/** Words that are no kind of data before "of": "a list of questions" / "a set of questions". */
const COLLECTIONS = new Set(['list', 'lists', 'set', 'sets', 'array', 'group', 'collection']);

const count = (words: readonly string[], w: string): number => words.reduce((n, v) => (v === w ? n + 1 : n), 0);

/** A letter standing alone ("vitamin d", "solve for x"); not "a" nor "i". */
const LETTER = /^[b-hj-z]$/;

/** Whether two words name different things of one kind of `REPLACED`. */
function replacedPair(x: string, y: string): boolean {
  const mx = REPLACED_MEMBERS.get(x);
  const my = REPLACED_MEMBERS.get(y);
  if (!mx || !my) return false;
  return (
    mx.some((p) => my.some((q) => p.set === q.set && p.member !== q.member)) &&
    !mx.some((p) => my.some((q) => p.set === q.set && p.member === q.member))
  );
}

/**
 * Whether two words name different things of one kind in WordNet (`kinWords`: "tennis" /
 * "badminton", "iron" / "calcium", "boiling" / "freezing"), unless the sets call them one thing
 * ("evening" / "night") or either is a function word. Antonyms count in the parts of speech
 * `antonymsIn` names (all by default).
 */
function kinPair(x: string, y: string, antonymsIn?: readonly Pos[]): boolean {
  // "at" and "in" are also astatine and indium.
  if (FUNCTION_WORDS.has(x) || FUNCTION_WORDS.has(y) || AUXILIARIES.has(x) || AUXILIARIES.has(y)) return false;
  const mx = member(x);
  const my = member(y);
  if (mx && my && mx.some((p) => my.some((q) => p.set === q.set && p.member === q.member))) return false;
  return kinWords(x, y, antonymsIn) !== null;
}

/**
 * The pair of words by which two requests that are otherwise the same, word for word in the same
 * places (articles and possessives left out), name different things of one kind of `REPLACED`:
 * "how do I turn on Bluetooth" / "turn off", "zoom in on a mac" / "zoom out on a mac", "sort a
 * dictionary by key" / "by value", "convert a list to a string" / "to a set". Other words that
 * differ in the same places must be function words ("sign in to gmail" / "sign out of gmail").
 * Null otherwise: these words are read only where nothing else differs.
 */
export function replacedWord(a: TextInfo, b: TextInfo): string | null {
  const x = a.words.map(bare).filter((w) => !DETERMINERS.has(w));
  const y = b.words.map(bare).filter((w) => !DETERMINERS.has(w));
  if (x.length !== y.length) return null;
  let found: string | null = null;
  for (let i = 0; i < x.length; i++) {
    const wx = x[i] as string;
    const wy = y[i] as string;
    if (wx === wy) continue;
    if (alikeAfter(x, i) && alikeAfter(y, i)) continue;
    if (x[i + 1] === 'of' && y[i + 1] === 'of' && COLLECTIONS.has(wx) && COLLECTIONS.has(wy)) continue;
    // One letter for another names another thing: "vitamin d" / "vitamin c", "plan b" / "plan c".
    if (replacedPair(wx, wy) || (LETTER.test(wx) && LETTER.test(wy)) || kinPair(wx, wy)) {
      // Not the same words in another order: "spanish and portuguese" / "portuguese and spanish".
      if (count(x, wx) > count(y, wx) && count(y, wy) > count(x, wy)) found ??= `${wx}/${wy}`;
    } else if (!FUNCTION_WORDS.has(wx) || !FUNCTION_WORDS.has(wy)) return movedParticle(x, y);
  }
  return found;
}

/** Particles that can stand after the thing they act on: "turn on Bluetooth" / "turn Bluetooth off". */
const PARTICLES = new Set(['on', 'off', 'in', 'out', 'up', 'down']);

/**
 * A particle of a pair that moved as well as changed ("turn on Bluetooth" / "turn Bluetooth off"):
 * without it, the two texts are the same words in the same order.
 */
function movedParticle(x: readonly string[], y: readonly string[]): string | null {
  const px = x.findIndex((w) => PARTICLES.has(w) && count(x, w) > count(y, w));
  const py = y.findIndex((w) => PARTICLES.has(w) && count(y, w) > count(x, w));
  if (px < 0 || py < 0) return null;
  const wx = x[px] as string;
  const wy = y[py] as string;
  if (!replacedPair(wx, wy) || alikeAfter(x, px) || alikeAfter(y, py)) return null;
  const restX = x.filter((_, i) => i !== px);
  const restY = y.filter((_, i) => i !== py);
  return restX.every((w, i) => w === restY[i]) ? `${wx}/${wy}` : null;
}

/** A text's words without function words, articles and possessives, in order. */
const contentWords = memoised((t) => t.words.map(bare).filter((w) => !DETERMINERS.has(w) && !FUNCTION_WORDS.has(w) && !AUXILIARIES.has(w)));

/** Words that point rather than name: "are there still nazis" / "are the nazis still here". */
const POINTING = new Set(['here', 'there']);

/**
 * The pair of words by which two requests that have the same content words in another order name
 * different things of one kind: one of a `REPLACED` pair ("python read csv file into a list" /
 * "python write a list to a csv file", "the difference between median and mode" / "… mean and
 * median") or nouns that WordNet files under one hypernym ("import csv into mysql table" / "export
 * mysql table to csv", "how does blockchain work" / "what are the uses of blockchain"). Function
 * words may differ too. Antonyms of WordNet are not read so, as a question turned around reads
 * them as the same one ("What is wrong with X?" / "Is X right?"). Null unless each text has 3
 * content words or more and one each that the other lacks.
 */
export function replacedReordered(a: TextInfo, b: TextInfo): string | null {
  const x = contentWords(a);
  const y = contentWords(b);
  // One word each that the other lacks, and the rest the same: as many words.
  if (x.length < 3 || x.length !== y.length) return null;
  // How many more times each word is in the first text than in the second.
  const more = new Map<string, number>();
  for (const w of x) more.set(w, (more.get(w) ?? 0) + 1);
  for (const w of y) more.set(w, (more.get(w) ?? 0) - 1);
  const onlyX: string[] = [];
  const onlyY: string[] = [];
  for (const [w, n] of more) {
    if (n > 0) onlyX.push(w);
    if (n < 0) onlyY.push(w);
    if (n > 1 || n < -1 || onlyX.length > 1 || onlyY.length > 1) return null;
  }
  if (onlyX.length !== 1 || onlyY.length !== 1) return null;
  const wx = onlyX[0] as string;
  const wy = onlyY[0] as string;
  if (POINTING.has(wx) || POINTING.has(wy)) return null;
  return replacedPair(wx, wy) || kinPair(wx, wy, []) ? `${wx}/${wy}` : null;
}

/** An ordinal that ranks: "second" in "the second highest salary" (not "first": "the first largest"). */
const RANK = /^(?:second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|nth|(?!1st$)\d+(?:st|nd|rd|th))$/;
/** A superlative: "highest", "largest", "most", "best". */
const SUPERLATIVE = /^(?:\p{L}{2,}est|most|least|best|worst)$/u;

/** The superlatives a text ranks ("second highest" → "highest") and those it names without a rank. */
const superlatives = memoised((t): { ranked: Map<string, string>; bare: Set<string> } => {
  const words = t.words;
  const ranked = new Map<string, string>();
  const bare = new Set<string>();
  words.forEach((w, i) => {
    if (!SUPERLATIVE.test(w)) return;
    const before = words[i - 1] ?? '';
    if (RANK.test(before)) ranked.set(w, before);
    else bare.add(w);
  });
  return { ranked, bare };
});

/**
 * One text ranks a superlative that the other asks for unranked: "SQL query to find the second
 * highest salary" / "… the highest salary" (0.99), "the third largest country" / "the largest
 * country". Another rank on both sides is a thing of the sets ("second" / "third").
 */
export function otherRank(a: TextInfo, b: TextInfo): string | null {
  const x = superlatives(a);
  const y = superlatives(b);
  for (const [w, rank] of x.ranked) if (y.bare.has(w) && !y.ranked.has(w)) return `${rank} ${w}/${w}`;
  for (const [w, rank] of y.ranked) if (x.bare.has(w) && !x.ranked.has(w)) return `${w}/${rank} ${w}`;
  return null;
}

/** The sets of units one converts between: lengths, temperatures, weights, volumes, spoons, money. */
const UNIT_SETS = new Set(['km', 'celsius', 'kg', 'liter', 'teaspoon', 'dollar'].map((w) => (MEMBERS.get(w) as { set: number }[])[0]?.set));
/** The spellings of the units of `UNIT_SETS`. */
const UNIT_SPELLINGS = new Set(SETS.filter((_, i) => UNIT_SETS.has(i)).flatMap((set) => set.flat()));
/** Words that lead from the unit converted to the unit asked for: "5 miles to km", "100 f in celsius". */
const INTO = new Set(['to', 'into', 'in', 'as']);

/** The units of a text, in order, with each one's sets and members: "5 miles to km" → mile, km. */
function unitsOf(words: readonly string[]): { at: number; of: { set: number; member: number }[] }[] {
  const out: { at: number; of: { set: number; member: number }[] }[] = [];
  words.forEach((w, at) => {
    // Most words are no unit: only a spelling of one, or its plural, is looked up in the sets.
    if (!UNIT_SPELLINGS.has(w) && !UNIT_SPELLINGS.has(w.replace(/s$/, '')) && !UNIT_SPELLINGS.has(w.replace(/es$/, ''))) return;
    const of = member(w)?.filter((m) => UNIT_SETS.has(m.set));
    if (of && of.length > 0) out.push({ at, of });
  });
  return out;
}

/**
 * What a text converts, as "set:from:to" of two units of one set: "how many km is 5 miles" and
 * "5 miles in km" convert miles to km, "Convert 5 kilometers to miles" and "km to miles" km to
 * miles. "How many" (or "how much") names the unit asked for, the next unit of its set the one
 * converted; otherwise the first unit, then "to", "into", "in" or "as", then the other. Null when
 * the text names no such two units, or compares them ("the difference between km and miles").
 */
const conversionOf = memoised((t: TextInfo): string | null => {
  const w = t.words;
  if (w.some((v) => COMPARISON.has(v))) return null;
  const units = unitsOf(w);
  for (let i = 0; i < units.length; i++) {
    const u = units[i] as (typeof units)[number];
    // "how many km", "how many degrees celsius".
    const before = w[u.at - 1] === 'degrees' ? u.at - 1 : u.at;
    const howMany = w[before - 2] === 'how' && HOW_MANY.has(w[before - 1] as string);
    for (let j = i + 1; j < units.length; j++) {
      const v = units[j] as (typeof units)[number];
      const pair = u.of.flatMap((p) => v.of.filter((q) => q.set === p.set && q.member !== p.member).map((q) => [p, q] as const))[0];
      if (!pair) continue;
      const [p, q] = pair;
      if (howMany) return `${p.set}:${q.member}:${p.member}`;
      if (w.slice(u.at + 1, v.at).some((x) => INTO.has(x))) return `${p.set}:${p.member}:${q.member}`;
      return null;
    }
  }
  return null;
});

/**
 * Two texts that convert between the same two units, the other way round, however each puts it:
 * "how many km is 5 miles" / "Convert 5 kilometers to miles" (0.94), "celsius to fahrenheit" /
 * "how many degrees celsius is 100 fahrenheit". The same words around a swap are `swappedRoles`'s.
 */
export function otherDirection(a: TextInfo, b: TextInfo): string | null {
  const x = conversionOf(a);
  const y = conversionOf(b);
  if (x === null || y === null) return null;
  const [set, from, to] = x.split(':').map(Number) as [number, number, number];
  return y === `${set}:${to}:${from}`
    ? `${firstSpelling(set, from)} to ${firstSpelling(set, to)}/${firstSpelling(set, to)} to ${firstSpelling(set, from)}`
    : null;
}

/** Words that negate what follows them. */
const NEGATING = new Set(['not', 'no', 'never']);
/** Verbs that carry a negation without saying anything of their own: "do not ignore" is "not ignore". */
const DO = new Set(['do', 'does', 'did']);

/**
 * The negation one text adds to the other's words: the same words in the same order (contractions
 * written out, articles left out) but for "not", "no" or "never" (with a "do" before it):
 * "Excel formula to count cells that are not blank" / "… that are blank" (0.98), "git don't ignore
 * a file" / "git ignore a file". Null when the shorter text negates anything itself.
 */
export function negated(a: TextInfo, b: TextInfo): string | null {
  const x = a.canonical.split(' ').filter((w) => w !== '' && !DETERMINERS.has(w));
  const y = b.canonical.split(' ').filter((w) => w !== '' && !DETERMINERS.has(w));
  const [long, short] = x.length > y.length ? [x, y] : [y, x];
  const more = long.length - short.length;
  if (more < 1 || more > 2 || short.some((w) => NEGATING.has(w))) return null;
  const isShort = (words: string[]) => words.length === short.length && words.every((w, i) => w === short[i]);
  const unnegated = long.filter((w) => !NEGATING.has(w));
  const undone = long.filter((w, i) => !NEGATING.has(w) && !(DO.has(w) && NEGATING.has(long[i + 1] as string)));
  return isShort(unnegated) || isShort(undone) ? `${long.find((w) => NEGATING.has(w))} added` : null;
}

/**
 * Words that stand for one another in chat requests: "add" / "append" an item, "delete" / "remove"
 * a row, the "quickest" / "fastest" way.
 */
const SYNONYMS: readonly (readonly string[])[] = [
  ['add', 'append', 'insert'],
  ['delete', 'remove', 'erase'],
  ['sum', 'total'],
  ['quickest', 'fastest'],
  ['quick', 'fast', 'quickly'],
  ['start', 'begin'],
  ['started', 'began'],
  ['check', 'see', 'find', 'view', 'tell', 'know'],
  ['shortcut', 'hotkey'],
  ['turn', 'switch'],
  ['latest', 'last', 'newest'],
  ['big', 'large'],
  ['small', 'little', 'tiny'],
  ['buy', 'purchase'],
  ['fix', 'repair', 'solve', 'resolve'],
  ['cheap', 'inexpensive', 'affordable'],
  ['movie', 'film'],
  ['movies', 'films'],
  ['picture', 'photo', 'image'],
  ['pictures', 'photos', 'images'],
  ['choose', 'pick', 'select'],
  ['show', 'display', 'list'],
  ['make', 'create'],
  ['good', 'great', 'best', 'top'],
  ['easy', 'simple', 'easiest', 'simplest'],
  ['use', 'utilize'],
  ['kid', 'child'],
  ['kids', 'children'],
  ['mom', 'mother'],
  ['dad', 'father'],
];
const SYNONYM_OF = new Map<string, number>(SYNONYMS.flatMap((group, i) => group.map((w) => [w, i] as const)));
/** Whether two words are of one group of `SYNONYMS`. */
export const synonyms = (x: string, y: string): boolean => SYNONYM_OF.has(x) && SYNONYM_OF.get(x) === SYNONYM_OF.get(y);

/** A passage two prompts carry is this many words or more (`otherInstruction`). */
const PASSAGE_WORDS = 5;
/** The words in which two instructions over one passage differ, on either side, at most. */
const INSTRUCTION_WORDS = 10;

let asksNothing: Set<string> | null = null;
/**
 * Words of an instruction that ask for nothing of their own: function words, the verbs a request
 * is put with ("give me", "can you", "make it", "write"), and words that point at the passage the
 * instruction is about ("this text", "the following code"). "Who", "when", "where" and "why" ask
 * for something, and so do negations. Made on first use: features.ts, which defines `AUXILIARIES`,
 * imports this module.
 */
const ASKS_NOTHING = (): Set<string> =>
  (asksNothing ??= new Set([
    ...[...FUNCTION_WORDS].filter((w) => w !== 'who' && !ASKING.has(w)),
    ...AUXILIARIES,
    ...DETERMINERS,
    ...(
      'am been being has have had shall may might must us ours him hers them they me i you please pls plz kindly just also ' +
      'now then here there so up out down off over all any some each following below above given text passage input content ' +
      'code snippet give provide make do write help want need like let get whose suggest generate produce create come idea ideas'
    ).split(' '),
  ]));

/**
 * Words that open a statement about something rather than an instruction: "The guides are
 * organized into six sections: …", "His reply: …".
 */
const STATING = new Set('the a an this that these those my our his her their its he she it they there'.split(' '));

/** Endings that leave a word's root: "summary" / "summarize". */
const DERIVED = /(?:e|y)$/;

/**
 * Whether two words of instructions ask for the same: the same word but for an inflection
 * ("comment" / "comments"), of one root (`oneRoot`: "summarize" / "summary", "shorten" /
 * "shorter"), the same number in words or digits ("three" / "3"), words of one group of
 * `SYNONYMS`, spellings of one thing of the sets (`contrastingWords`, `REPLACED`: "fix" /
 * "correct", "rephrase" / "reword"), words that share a sense in WordNet ("one" / "single"), or a
 * word misspelt (`misspelt`: "corect" / "correct").
 */
function askSame(x: string, y: string): boolean {
  if (x === y || stem(x) === stem(y)) return true;
  const vx = WORD_VALUE.get(x);
  const vy = WORD_VALUE.get(y);
  if ((vx !== undefined && (String(vx) === y || vx === vy)) || (vy !== undefined && String(vy) === x)) return true;
  if (oneRoot(x, y) || synonyms(x, y) || misspelt(x, y)) return true;
  const mx = member(x);
  const my = member(y);
  if (mx && my && mx.some((p) => my.some((q) => p.set === q.set && p.member === q.member))) return true;
  const rx = REPLACED_MEMBERS.get(x);
  const ry = REPLACED_MEMBERS.get(y);
  if (rx && ry && rx.some((p) => ry.some((q) => p.set === q.set && p.member === q.member))) return true;
  return /^\p{L}+$/u.test(x) && /^\p{L}+$/u.test(y) && sameSense(x, y);
}

/**
 * Whether two words are of one root: the shorter, without a final "e" or "y", starts the longer
 * ("summary" / "summarize", "short" / "shorten", "correct" / "correction"), or they share their
 * first 6 letters or more, all of the shorter but 3 ("shorter" / "shorten", "describe" /
 * "description", "grammar" / "grammatical"). Not "formal" / "format", "translate" / "transform".
 */
function oneRoot(x: string, y: string): boolean {
  const [s, l] = x.length <= y.length ? [x, y] : [y, x];
  const root = s.replace(DERIVED, '');
  if (root.length >= 4 && l.startsWith(root)) return true;
  let p = 0;
  while (p < s.length && s[p] === l[p]) p++;
  return p >= 6 && p >= s.length - 3;
}

/**
 * Whether one of two words of 5 letters or more is the other misspelt: one letter left out, added,
 * changed or two swapped, and one of them no word the tokenizer knows ("corect" / "correct",
 * "speling" / "spelling"; not "affect" / "effect").
 */
function misspelt(x: string, y: string): boolean {
  if (x.length < 5 || y.length < 5 || Math.abs(x.length - y.length) > 1) return false;
  if (rarity(x) < UNSEEN && rarity(y) < UNSEEN) return false;
  let i = 0;
  while (i < x.length && x[i] === y[i]) i++;
  const rest = (dx: number, dy: number) => x.slice(i + dx) === y.slice(i + dy);
  if (x.length === y.length) return rest(1, 1) || (x[i] === y[i + 1] && x[i + 1] === y[i] && rest(2, 2));
  return x.length > y.length ? rest(1, 0) : rest(0, 1);
}

/** An instruction's words that ask for something (not `ASKS_NOTHING`), written out: "don't" as "not". */
function askingWords(words: readonly string[]): string[] {
  const out: string[] = [];
  for (const word of words) {
    const w = word.endsWith("n't") || word === 'cannot' ? 'not' : bare(word).replace(/'.*$/, '');
    if (w === 'whom') out.push('who');
    else if (w !== '' && !ASKS_NOTHING().has(w)) out.push(w);
  }
  return out;
}

/** Words of two instructions read for what they ask, at most, beyond those both have. */
const ASKED_WORDS = 12;

/**
 * The words that ask for something (`askingWords`) in each of two instructions and in no word of
 * the other (`askSame`): each word the other lacks is compared with the other's words the first
 * lacks, as a rewording puts one word in the place of another. Null when either has more than
 * `ASKED_WORDS` words the other lacks: they are no two wordings of one short instruction.
 */
function unmatched(x: readonly string[], y: readonly string[]): [string[], string[]] | null {
  const ax = new Set(askingWords(x));
  const ay = new Set(askingWords(y));
  const restX = [...ax].filter((w) => !ay.has(w));
  const restY = [...ay].filter((w) => !ax.has(w));
  if (restX.length > ASKED_WORDS || restY.length > ASKED_WORDS) return null;
  return [restX.filter((w) => !restY.some((v) => askSame(w, v))), restY.filter((w) => !restX.some((v) => askSame(w, v)))];
}

/**
 * Whether two instructions ask for the same in other words: no word of either asks for something
 * that no word of the other asks for too (`unmatched`): "Summarize this" / "Give me a summary of
 * this", "in one sentence" / "in a single sentence", "Fix" / "Correct".
 */
export function askedAlike(x: readonly string[], y: readonly string[]): boolean {
  const only = unmatched(x, y);
  return only !== null && only[0].length === 0 && only[1].length === 0;
}

/**
 * The words of each of two instructions that ask for something no word of the other asks for
 * (`unmatched`), or null when one of them has none: the other asks for no other thing, only more
 * ("Find the bug" / "Find the bug in this code"). One number with or without separators ("1,204" /
 * "1204") is no other thing.
 */
export function otherAsked(x: readonly string[], y: readonly string[]): [string[], string[]] | null {
  const only = unmatched(x, y);
  if (only === null || only[0].length === 0 || only[1].length === 0) return null;
  const digits = (words: readonly string[]) => words.filter(isNumber).join('');
  if (only[0].every(isNumber) && only[1].every(isNumber) && digits(x) === digits(y)) return null;
  return only;
}

const isNumber = (w: string): boolean => /^\d+$/.test(w);

/**
 * What two prompts that carry the same passage (a text, a review, code: `PASSAGE_WORDS` words or
 * more, after a line break or a colon in both, or before one) say besides it, where they differ in
 * a short stretch (up to `INSTRUCTION_WORDS` words on each side): the instructions around the
 * passage, or null where they differ more. Null otherwise, and when either is put as a question
 * ("What is the population of Tokyo?\nhow has it changed" / "How many people live in
 * Tokyo?\nhow has it changed", a follow-up read after the same turn: "when was it discovered" /
 * "discovery year of the stone"), which is reworded more freely than an instruction and is the
 * other checks' and the model's to read, or opens as a statement. Undefined where the two texts
 * break at no place around such a passage.
 */
function instructionsAround(a: TextInfo, b: TextInfo): [string[], string[]] | null | undefined {
  const x = a.words;
  const y = b.words;
  const [start, end] = sharedEnds(x, y);
  let found: [string[], string[]] | null | undefined;
  // The instructions before the passage, from the first place where both break (the longest passage).
  for (let k = end; k >= PASSAGE_WORDS; k--) {
    if (a.breaks.has(x.length - k) && b.breaks.has(y.length - k)) {
      found =
        x.length - k - start <= INSTRUCTION_WORDS && y.length - k - start <= INSTRUCTION_WORDS
          ? [x.slice(0, x.length - k), y.slice(0, y.length - k)]
          : null;
      break;
    }
  }
  // Or after it.
  if (!found) {
    for (let k = start; k >= PASSAGE_WORDS; k--) {
      if (a.breaks.has(k) && b.breaks.has(k)) {
        found = x.length - k - end <= INSTRUCTION_WORDS && y.length - k - end <= INSTRUCTION_WORDS ? [x.slice(k), y.slice(k)] : null;
        break;
      }
    }
  }
  if (!found) return found;
  // A statement about something ("The guides are organized into six sections: …"), and questions.
  const [x0, y0] = found;
  return STATING.has(bare(x0[0] ?? '')) || STATING.has(bare(y0[0] ?? '')) || putAsAQuestion(x0) || putAsAQuestion(y0) ? null : found;
}

/** Requests put as questions: "can you …", "could you …". */
const REQUESTING = new Set(['can', 'could', 'would', 'will']);

/**
 * Whether words open a question (a question word or an auxiliary verb: "how many chambers does it
 * have", "is it safe"), not a request put as one ("can you find the bug").
 */
function putAsAQuestion(words: readonly string[]): boolean {
  const first = bare(words[0] ?? '');
  return opensQuestion(first) && !(REQUESTING.has(first) && words[1] === 'you');
}

/** Words that may open a request before its verb: "please summarize", "can you translate", "now list". */
const LEAD_IN = new Set(['please', 'pls', 'plz', 'kindly', 'now', 'also', 'then', 'and', 'just', 'so']);

/** The words of `REPLACED` for what a request asks done to a text: "translate", "proofread", "reword". */
const TASK_VERBS = new Set(REPLACED.find((set) => set.some((member) => member.includes('translate')))?.flat() ?? []);

/**
 * Whether words open a request: a verb in its base form, after words that may lead in to one
 * ("please", "can you"), as compromise tags it in these words ("summarize the following article",
 * "classify the sentiment"; not "said", "shares closed higher"), or a word of `TASK_VERBS` that it
 * reads as a noun ("proofread", "paraphrase"). Tagging costs about 50 µs: read last.
 */
function opensRequest(words: readonly string[]): boolean {
  let i = 0;
  while (REQUESTING.has(words[i] ?? '') ? words[i + 1] === 'you' : LEAD_IN.has(words[i] ?? '')) {
    i += REQUESTING.has(words[i] ?? '') ? 2 : 1;
  }
  const first = words[i];
  if (first === undefined) return false;
  return TASK_VERBS.has(first) || nlp(words.slice(i, i + 8).join(' ')).has('^(#Infinitive|#Imperative)');
}

/** The words `requestsAround` compares, at most, in looking for a passage: about a third of a millisecond. */
const PASSAGE_BUDGET = 100_000;

/** Two prompts' instructions around a shared passage, and whether each is a request (read last: `opensRequest`). */
interface Around {
  words: [string[], string[]];
  requests: () => boolean;
}

/**
 * What two prompts that carry the same passage set off otherwise than by a line break or a colon
 * (`TextInfo.bounds`: in quotes, after the end of a sentence, or before it) say besides it: the
 * longest run of `PASSAGE_WORDS` words or more that both have, each of its ends a bound, a break or
 * the text's own end in both, and the words of each text before and after it, where they differ in
 * a short stretch (up to `INSTRUCTION_WORDS` words on each side). "Translate 'T' into French" /
 * "… into German", "Summarize the following article in one sentence. T" / "… in three bullet
 * points. T", "T Summarize this." / "T Translate this to French.". Such ends are found in statements
 * and questions as often (news sentences quote what someone said), so neither part, before or
 * after, may be a question or a statement, and each text must open a request before the passage or
 * after it (`Around.requests`). A run from both texts' start may hold the start of the request
 * ("Rewrite" in "Rewrite 'T' in passive voice" / "Rewrite 'T' in future tense"): its words up to
 * the first place where both break or are bound inside it are read as a request too.
 */
function requestsAround(a: TextInfo, b: TextInfo): Around | null {
  const x = a.words;
  const y = b.words;
  const edges = (t: TextInfo, n: number) => new Set([0, n, ...t.breaks, ...t.bounds]);
  const ex = edges(a, x.length);
  const ey = edges(b, y.length);
  // The edges of the second text, by the word after them.
  const starts = new Map<string, number[]>();
  for (const p of ey) {
    const w = y[p];
    if (w !== undefined) starts.set(w, [...(starts.get(w) ?? []), p]);
  }
  let best: { i: number; p: number; n: number } | null = null;
  let steps = 0;
  for (const i of ex) {
    for (const p of starts.get(x[i] ?? '') ?? []) {
      let m = 0;
      while (i + m < x.length && p + m < y.length && x[i + m] === y[p + m]) m++;
      // Texts of a sentence repeated hundreds of times would take seconds: they are left to the model.
      steps += 2 * m;
      if (steps > PASSAGE_BUDGET) return null;
      for (let n = m; n >= PASSAGE_WORDS && n > (best?.n ?? 0); n--) {
        if (ex.has(i + n) && ey.has(p + n)) {
          best = { i, p, n };
          break;
        }
      }
    }
  }
  if (best === null) return null;
  const { i, p, n } = best;
  const before = [x.slice(0, i), y.slice(0, p)] as const;
  const after = [x.slice(i + n), y.slice(p + n)] as const;
  const ix = [...before[0], ...after[0]];
  const iy = [...before[1], ...after[1]];
  const [start, end] = sharedEnds(ix, iy);
  if (ix.length - start - end > INSTRUCTION_WORDS || iy.length - start - end > INSTRUCTION_WORDS) return null;
  for (const part of [...before, ...after]) {
    if (part.length > 0 && (STATING.has(bare(part[0] ?? '')) || putAsAQuestion(part))) return null;
  }
  // The run's words up to the first place inside it where both texts break or are bound.
  let k = 1;
  while (k <= INSTRUCTION_WORDS && !(ex.has(i + k) && ey.has(p + k))) k++;
  const opening = i === 0 && p === 0 && k <= INSTRUCTION_WORDS && n - k >= PASSAGE_WORDS ? x.slice(0, k) : [];
  const request = (before: string[], after: string[]) =>
    before.length > 0 ? opensRequest(before) || opensRequest(after) : opensRequest(after) || opensRequest(opening);
  return { words: [ix, iy], requests: () => request(before[0], after[0]) && request(before[1], after[1]) };
}

/**
 * Two prompts that carry the same passage with instructions around it that ask for different
 * things (`instructionsAround`, `requestsAround`, `otherAsked`): each instruction has a word that
 * asks for something and that no word of the other asks for too: "Classify the sentiment: T" /
 * "Classify the topic: T", "Rewrite in passive voice: T" / "Rewrite in future tense: T",
 * "T\n\nFind the bug" / "T\n\nAdd comments", "Translate 'T' into French" / "… into German",
 * "Summarize the following article in one sentence. T" / "… in three bullet points. T". The passage
 * outweighs the instruction in the vectors, so the first stage served such pairs at 0.87 to 0.99.
 * The same instruction reworded ("Summarize this:" / "Give me a summary of this:", "Translate into
 * French:" / "Translate to French:", "Fix the grammar:" / "Correct the grammar:") leaves no such
 * word on both sides, nor does an instruction that only adds to the other ("Find the bug" / "Find
 * the bug in this code"): those are left to the model.
 */
export function otherInstruction(a: TextInfo, b: TextInfo): string | null {
  if (a.breaks.size + a.bounds.size === 0 || b.breaks.size + b.bounds.size === 0) return null;
  // A passage set off by a line break or a colon in both is read so; only where there is none are its other edges read.
  const atBreaks = a.breaks.size > 0 && b.breaks.size > 0 ? instructionsAround(a, b) : undefined;
  const around = atBreaks === undefined ? requestsAround(a, b) : null;
  const found = atBreaks ?? around?.words;
  const other = found && otherAsked(...found);
  if (!other || (around && !around.requests())) return null;
  return `instruction: ${other[0].join(' ')}/${other[1].join(' ')}`;
}
