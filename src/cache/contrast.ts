import type { TextInfo } from './features.ts';

/**
 * Why two requests that embed alike ask different things, or null: they name different things of
 * one kind (`contrastingWords`), swap two things around the same words (`swappedRoles`), or name
 * different quantities (`differentQuantities`). The hit decision's cheap checks that a vector and
 * a small model weigh too lightly: "sort ascending" / "sort descending" scored 0.99.
 */
export function differentRequest(a: TextInfo, b: TextInfo): string | null {
  return contrastingWords(a, b) ?? swappedRoles(a, b) ?? differentQuantities(a.quantities, b.quantities);
}

/**
 * Words that name different things of one kind: a request that has one where another has a
 * different one asks something else ("sort ascending" / "sort descending", "the second highest"
 * / "the third highest", "convert to km" / "convert to grams"). Each inner list is one thing under
 * its spellings. Only words whose sense is the same wherever they appear in a request are here:
 * not "go" (the language and the verb), "edge", "fall", "swift".
 */
const SETS: readonly (readonly string[])[][] = [
  [
    ['ascending', 'asc'],
    ['descending', 'desc'],
  ],
  [
    ['increase', 'increasing', 'increment', 'raise'],
    ['decrease', 'decreasing', 'decrement', 'reduce', 'lower'],
  ],
  [
    ['upper', 'uppercase'],
    ['lower', 'lowercase'],
  ],
  [
    ['encrypt', 'encrypting', 'encryption'],
    ['decrypt', 'decrypting', 'decryption'],
  ],
  [
    ['encode', 'encoding'],
    ['decode', 'decoding'],
  ],
  [
    ['compress', 'compressing', 'compression'],
    ['decompress', 'decompressing', 'decompression'],
  ],
  [
    ['serialize', 'serialise', 'serialization'],
    ['deserialize', 'deserialise', 'deserialization'],
  ],
  [
    ['upload', 'uploading'],
    ['download', 'downloading'],
  ],
  [
    ['import', 'importing'],
    ['export', 'exporting'],
  ],
  [
    ['install', 'installing', 'installation'],
    ['uninstall', 'uninstalling'],
  ],
  [
    ['enable', 'enabling'],
    ['disable', 'disabling'],
  ],
  [['zip'], ['unzip']],
  [['lock'], ['unlock']],
  [['mount'], ['unmount']],
  [['subscribe'], ['unsubscribe']],
  [['block'], ['unblock']],
  [['follow'], ['unfollow']],
  [
    ['connect', 'connecting'],
    ['disconnect', 'disconnecting'],
  ],
  [
    ['login', 'log-in'],
    ['logout', 'log-out'],
  ],
  [['show', 'unhide'], ['hide']],
  [['expand'], ['collapse']],
  [
    ['horizontal', 'horizontally'],
    ['vertical', 'vertically'],
  ],
  [['left'], ['right']],
  [['top'], ['bottom']],
  [['up'], ['down']],
  [['inner'], ['outer']],
  [['above'], ['below']],
  [['inside'], ['outside']],
  [['input'], ['output']],
  [
    ['read', 'reading'],
    ['write', 'writing'],
  ],
  [
    ['send', 'sending'],
    ['receive', 'receiving'],
  ],
  [['client'], ['server']],
  [
    ['frontend', 'front-end'],
    ['backend', 'back-end'],
  ],
  [['positive'], ['negative']],
  [['odd'], ['even']],
  [['true'], ['false']],
  [['hot'], ['cold']],
  [['light'], ['dark']],
  [
    ['north', 'northern'],
    ['south', 'southern'],
    ['east', 'eastern'],
    ['west', 'western'],
  ],
  [['smallest'], ['largest', 'biggest']],
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
  [
    ['boy', 'boys'],
    ['girl', 'girls'],
  ],
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
  [['morning'], ['afternoon'], ['evening'], ['night']],
  [['summer'], ['winter'], ['spring'], ['autumn']],
  [['vegetarian'], ['vegan'], ['pescatarian']],
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
    ['km', 'kilometer', 'kilometers', 'kilometre', 'kilometres'],
    ['mile', 'miles'],
    ['meter', 'meters', 'metre', 'metres'],
    ['foot', 'feet', 'ft'],
    ['inch', 'inches'],
    ['yard', 'yards'],
    ['cm', 'centimeter', 'centimeters', 'centimetre', 'centimetres'],
    ['mm', 'millimeter', 'millimeters', 'millimetre', 'millimetres'],
  ],
  [['celsius', 'centigrade'], ['fahrenheit'], ['kelvin']],
  [
    ['kg', 'kilogram', 'kilograms', 'kilo', 'kilos'],
    ['pound', 'pounds', 'lb', 'lbs'],
    ['gram', 'grams'],
    ['ounce', 'ounces', 'oz'],
  ],
  [
    ['liter', 'liters', 'litre', 'litres'],
    ['gallon', 'gallons'],
    ['cup', 'cups'],
    ['ml', 'milliliter', 'milliliters', 'millilitre', 'millilitres'],
  ],
  [
    ['dollar', 'dollars', 'usd'],
    ['euro', 'euros', 'eur'],
    ['yen', 'jpy'],
    ['rupee', 'rupees', 'inr'],
    ['yuan', 'rmb', 'cny'],
    ['gbp', 'sterling', 'pound', 'pounds'],
  ],
  [
    ['second', 'seconds', 'sec', 'secs'],
    ['minute', 'minutes', 'mins'],
    ['hour', 'hours'],
    ['day', 'days'],
    ['week', 'weeks'],
    ['month', 'months'],
    ['year', 'years'],
  ],
  [
    ['hundred', 'hundreds'],
    ['thousand', 'thousands'],
    ['million', 'millions'],
    ['billion', 'billions'],
    ['trillion', 'trillions'],
  ],
];

/** Each word of the sets: the set it belongs to and the thing it names there. */
const MEMBERS = new Map<string, { set: number; member: number }[]>();
SETS.forEach((set, s) =>
  set.forEach((member, m) => {
    for (const word of member) {
      const list = MEMBERS.get(word) ?? [];
      list.push({ set: s, member: m });
      MEMBERS.set(word, list);
    }
  }),
);

/** The things each set names in a text: set → members. */
function namedThings(words: Set<string>): Map<number, Set<number>> {
  const out = new Map<number, Set<number>>();
  for (const w of words) {
    const hits = MEMBERS.get(w);
    if (!hits) continue;
    for (const { set, member } of hits) {
      let m = out.get(set);
      if (!m) out.set(set, (m = new Set()));
      m.add(member);
    }
  }
  return out;
}

/**
 * The first word pair by which the texts name different things of one kind: a thing only the
 * first names and another thing of the same kind only the second does. Null when there is none.
 */
export function contrastingWords(a: TextInfo, b: TextInfo): string | null {
  const ta = namedThings(a.wordSet);
  const tb = namedThings(b.wordSet);
  for (const [set, ma] of ta) {
    const mb = tb.get(set);
    if (!mb) continue;
    const onlyA = [...ma].filter((m) => !mb.has(m));
    const onlyB = [...mb].filter((m) => !ma.has(m));
    if (onlyA.length > 0 && onlyB.length > 0) {
      const s = SETS[set] as readonly (readonly string[])[];
      return `${(s[onlyA[0] as number] as readonly string[])[0]}/${(s[onlyB[0] as number] as readonly string[])[0]}`;
    }
  }
  return null;
}

/** Words that join two things without ordering them: "X and Y", "X or Y", "X vs Y". */
const CONNECTORS = new Set(['and', 'or', 'nor', 'vs', 'versus', 'plus', 'both', 'either', 'neither']);
/** Words of a request in which two things can change places and the request stays the same. */
const COMPARISON = new Set(
  'between compare compared comparing comparison different differ differs difference similar similarity same equal equals equivalent alike'.split(
    ' ',
  ),
);
/** Words left out when looking for a swap: "an int to a string" / "a string to an int". */
const DETERMINERS = new Set(['a', 'an', 'the', 'my', 'your', 'our', 'his', 'her', 'their', 'its', 'this', 'that', 'some']);
/** Steps of `swappedRoles` before it gives up (about 2 ms at most). */
const SWAP_BUDGET = 10_000;
const FUNCTION_WORDS = new Set(
  (
    'a an the and or but of to in on at by for with from into onto about as is are was were be been do does did i me my we ' +
    'you your he she it its they them their this that what which who how when where why can could should would will'
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
 * left out), and neither has both orders. Null when the words between only join the two ("X and
 * Y", "X or Y", "X vs Y"), or when the request compares ("the difference between X and Y", "how is
 * X different from Y", "compare X with Y"), where the order does not matter.
 */
export function swappedRoles(a: TextInfo, b: TextInfo): string | null {
  const x = a.words.filter((w) => !DETERMINERS.has(w));
  const y = b.words.filter((w) => !DETERMINERS.has(w));
  if (x.some((w) => COMPARISON.has(w)) || y.some((w) => COMPARISON.has(w))) return null;
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
            if (s1.join(' ') === s2.join(' ') || s2.every((w) => FUNCTION_WORDS.has(w))) continue;
            // "X and Y", "X or Y"; and lists: "2002, 2001 and 2000" / "2000, 2001 and 2002".
            if (m.every((w) => CONNECTORS.has(w)) || CONNECTORS.has(m[0] as string) || CONNECTORS.has(m[nm - 1] as string)) continue;
            if (s1.some((w) => s2.includes(w))) continue;
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

const NUMBER_WORDS = new Map(
  ['two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten', 'eleven', 'twelve'].map((w, i) => [w, String(i + 2)]),
);
const SCALE: Record<string, number> = { k: 1e3, thousand: 1e3, million: 1e6, mn: 1e6, billion: 1e9, bn: 1e9 };

/**
 * The quantities a text names, as numbers: "10,000", "10000" and "10k" are one quantity, "two"
 * and "2" another. Digits inside words ("mp3", "h2o") are not quantities.
 */
export function quantitiesOf(text: string): Set<string> {
  const out = new Set<string>();
  const re =
    /(?<![\p{L}\p{N}.,])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:\s*(k|thousand|million|mn|billion|bn)\b)?(?![\p{L}\p{N}]|\.\d)|(?<![\p{L}-])(two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\b/giu;
  for (const m of text.matchAll(re)) {
    if (m[4]) {
      out.add(NUMBER_WORDS.get(m[4].toLowerCase()) as string);
      continue;
    }
    const value = Number(`${(m[1] as string).replace(/,/g, '')}${m[2] ?? ''}`) * (m[3] ? (SCALE[m[3].toLowerCase()] ?? 1) : 1);
    out.add(String(value));
  }
  return out;
}

/** A quantity only one text names, and another only the other does: "for 2 people" / "for 20 people". */
export function differentQuantities(a: Set<string>, b: Set<string>): string | null {
  if (a.size === 0 || b.size === 0) return null;
  const x = [...a].find((n) => !b.has(n));
  const y = [...b].find((n) => !a.has(n));
  return x !== undefined && y !== undefined ? `${x}/${y}` : null;
}
