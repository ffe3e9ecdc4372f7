/**
 * Polite wrappers around a request, read as the request itself: "Can you tell me the capital of
 * France?", "Do you know the capital of France?" and "I'd like to know the capital of France" ask
 * "What is the capital of France?", "Could you explain photosynthesis?" asks "Explain
 * photosynthesis", and "What is the meaning of ephemeral?", "Define ephemeral" and "ephemeral
 * meaning" ask "What does ephemeral mean?". The embedding and the hit decision read them far apart
 * (0.44 for "Do you know …" against "What is …", 0.26 for "What is the definition of ubiquitous?"
 * against "What does ubiquitous mean?"), so texts are embedded with each line's wrapper taken off
 * (`unwrap`), and the hit decision reads two texts so where their wrappers differ or leave two
 * questions.
 *
 * Only a line's opening (and a closing "…, do you know?") is rewritten, and only wrappers that
 * leave the request as it was: a verb of asking after "can you" ("Can you swim?" is left alone),
 * "do you know" before what is asked ("Do you know Python?" is left alone), a word or short phrase
 * asked the meaning of. Texts over 2,048 characters are left as they are.
 *
 * A request of one line that amounts to a question ("Explain recursion", "Tell me how to boil an
 * egg") is also given as that question (`Unwrapped.asked`), for the hit decision to read two
 * requests made with the same verb by.
 */

/** An optional greeting before the wrapper, kept as typed. */
const GREETING = String.raw`(?:(?:hi|hello|hey)(?:\s+there)?[,!.]*\s+)?`;
/** "can you", "could you please", "would you kindly". */
const ASK = String.raw`(?:(?:can|could|would|will)\s+(?:you|u)|(?:would|will)\s+you\s+be\s+able\s+to|are\s+you\s+able\s+to|(?:is|would)\s+it\s+be\s+possible\s+(?:for\s+you\s+)?to|is\s+it\s+possible\s+(?:for\s+you\s+)?to)\s+(?:(?:please|pls|plz|kindly|possibly|just)\s+)*`;
/** Verbs of a request to the assistant: "Can you explain …" asks what "Explain …" asks. */
const VERBS = (
  'tell explain describe show give list name define summarize summarise suggest recommend help write translate provide ' +
  'find share teach create generate compare outline clarify calculate solve check correct fix rewrite convert draft compose'
).split(' ');
const VERB = String.raw`(?:${VERBS.join('|')})\b`;
/** Each verb's form after "would you mind": "explaining" is "explain". */
const GERUNDS = new Map(VERBS.map((v) => [v.endsWith('e') ? `${v.slice(0, -1)}ing` : `${v}ing`, v]));
/** What "do you know" or "I wonder" is followed by when it wraps a question. */
const ASKED = String.raw`(?=(?:what|who|whom|whose|where|when|why|how|which|if|whether|the|a|an|any|some)\b)`;
/** A word or a short phrase (up to four words) whose meaning is asked. */
const TERM = String.raw`(?:the\s+(?:word|term|phrase|expression)\s+)?(["“”'‘\p{L}\p{N}][\p{L}\p{N}'‘’"“”-]*(?:\s+["“”'‘\p{L}\p{N}][\p{L}\p{N}'‘’"“”-]*){0,3})`;
const END = String.raw`\s*[?.!]*\s*$`;

/**
 * A chat opener before what is asked, set off by punctuation: "Quick question: …", "Just
 * wondering, …", "Out of curiosity, …", "Sorry to bother you, but …".
 */
const OPENER = new RegExp(
  String.raw`^(?:(?:(?:a|one|my)\s+)?(?:quick|honest|random|simple|stupid|dumb|silly|small|noob|newbie|basic)\s+(?:question|q)|question|(?:just\s+)?(?:wondering|curious)|(?:i(?:'m|’m|\s+am|m)|i\s+was)\s+(?:just\s+)?(?:curious|wondering)|out\s+of\s+(?:pure\s+)?curiosity|(?:i\s+)?have\s+a\s+(?:quick\s+)?question|real\s+quick|(?:ok(?:ay)?\s+)?so|btw|by\s+the\s+way|sorry(?:\s+to\s+bother(?:\s+you)?|\s+if\s+this\s+is\s+(?:a\s+)?(?:dumb|stupid|silly|basic|noob)(?:\s+question)?)?)\s*(?:[:,–—!.]|\s-)[\s:,–—-]*(?:but\s+)?(?=\p{L})`,
  'iu',
);

/** Wrappers taken off the opening of a line, in turn, until none is left; each with its kind. */
const WRAPPERS: [RegExp, string | ((match: string, verb: string) => string), string][] = [
  [OPENER, '', 'opener'],
  [new RegExp(String.raw`^(?:please|pls|plz|kindly)\s+(?=\p{L})`, 'iu'), '', 'please'],
  [
    new RegExp(String.raw`^(?:would|do)\s+(?:you|u)\s+mind\s+(?:(?:please|just)\s+)?(${[...GERUNDS.keys()].join('|')})\b`, 'iu'),
    (_: string, gerund: string) => GERUNDS.get(gerund.toLowerCase()) as string,
    'ask',
  ],
  [
    new RegExp(
      String.raw`^(?:i\s+(?:was|am)|i'm|i’m|im)\s+(?:just\s+)?(?:wondering|curious)\s+(?:if|whether)\s+(?:you|u)\s+(?:can|could|would|might)\s+(?:please\s+)?(?=${VERB})`,
      'iu',
    ),
    '',
    'wonder',
  ],
  [new RegExp(String.raw`^${ASK}(?=${VERB})`, 'iu'), '', 'ask'],
  [
    new RegExp(String.raw`^(?:(?:do|did)\s+(?:you|u)\s+(?:happen\s+to\s+)?know|any\s+idea|(?:can|may)\s+i\s+ask)\s+${ASKED}`, 'iu'),
    'tell me ',
    'know',
  ],
  [
    new RegExp(String.raw`^i\s*(?:want|wanna|need|would\s+like|'d\s+like|’d\s+like|d\s+like)\s+to\s+know\s+${ASKED}`, 'iu'),
    'tell me ',
    'want',
  ],
  [
    new RegExp(String.raw`^(?:i\s+(?:was|am)\s+wondering|i'm\s+wondering|i’m\s+wondering|i\s+wonder)\s+${ASKED}`, 'iu'),
    'tell me ',
    'wonder',
  ],
];

/**
 * Two things set against each other, typed as keywords: "weather vs climate", "let vs const js",
 * "major vs minor key difference". Not a question put otherwise ("Which is better, tea vs coffee?").
 */
const VERSUS =
  /^(?!(?:what|which|who|whom|whose|where|when|why|how|is|are|was|were|do|does|did|can|could|should|would|will)\b)([^\n?:;,]*?[\p{L}\p{N})])\s+(?:vs\.?|versus)\s+([^\n?:;,]*?[\p{L}\p{N})])(?:\s*[-–—,]?\s*(?:difference|differences|comparison))?\s*\??\s*$/iu;

/** "Tell me the …": what is asked, as a question ("What is the …?"). */
const TOLD = /^tell\s+me\s+the\s+(\S.*?)\s*[?.!]*\s*$/iu;

/** A question's tail that asks whether it is known: "What's the population of Canada, do you know?" */
const TRAILING = /\s*[,;-]?\s*(?:do\s+you\s+know|any\s+idea)\s*[?.!]*\s*$/iu;

/**
 * A courtesy that closes a line, after what is asked: "…, if you don't mind me asking?", "… please",
 * "… Thanks in advance!". What ends the request before it (or after it: "?") is kept.
 */
const COURTESY =
  /(?<=\S)(?:\s*[,;-]\s*|\s+)(?:if\s+(?:you\s+)?(?:don'?t|don’t|do\s+not)\s+mind(?:\s+(?:me\s+)?asking)?|if\s+(?:you\s+can|possible)|please|pls|plz|(?:thanks|thank\s+you|thx|ty)(?:\s+(?:so\s+much|a\s+lot|in\s+advance))?)(?![\p{L}\p{N}])\s*([?.!]*)\s*$/iu;

/** A wrapper that puts a request as a question: "can you …", "do you know …". */
const ASKING = new RegExp(
  String.raw`^(?:(?:please|pls|plz|kindly)\s+)?(?:can|could|would|will|do|did|is|are|any|may|i\s+(?:was|am)|i'm|i’m|im)\b`,
  'iu',
);

/** The kinds of wrapper that ask a request as a question (not an opener or a courtesy). */
const ASKED_BY = new Set(['ask', 'know', 'want', 'wonder']);

/** A question of what a word means, in its forms, and the word: "What is the meaning of X?" */
const MEANING: RegExp[] = [
  new RegExp(String.raw`^what(?:\s+is|'s|’s|s)\s+the\s+(?:meaning|definition)\s+of\s+${TERM}${END}`, 'iu'),
  new RegExp(String.raw`^what(?:\s+is|'s|’s)\s+meant\s+by\s+${TERM}${END}`, 'iu'),
  new RegExp(String.raw`^what\s+does\s+${TERM}\s+mean${END}`, 'iu'),
  new RegExp(String.raw`^tell\s+me\s+what\s+${TERM}\s+means${END}`, 'iu'),
  new RegExp(String.raw`^(?:define|(?:the\s+)?definition\s+of|(?:the\s+)?meaning\s+of)\s+${TERM}${END}`, 'iu'),
  new RegExp(String.raw`^${TERM}\s*(?:\s[-–—]|[:,]|\s)\s*(?:meaning|definition)${END}`, 'iu'),
];
/** Words that do not end a term asked the meaning of ("What does it mean?" is a follow-up). */
const NOT_A_TERM = /^(?:it|this|that|they|these|those|he|she|you|i|we|the|a|an)$/i;

/** A text with its wrappers taken off, and what was taken off (`unwrap`). */
export interface Unwrapped {
  /** Without its wrappers. */
  plain: string;
  /** The kinds of wrapper taken off, line by line ("ask", "know", "meaning 2"); empty when none was. */
  wrapper: string;
  /**
   * A request of one line that amounts to a question, put as that question (`asQuestion`): as
   * typed and without its wrapper. Null when the text is no such request.
   */
  asked: { typed: string; plain: string; typedRequest: string; plainRequest: string } | null;
}

/** One line with its wrapper taken off; the first letter keeps its case. */
function unwrapLine(line: string, whole: boolean): Unwrapped {
  const lead = LEAD.exec(line)?.[0] ?? '';
  const typed = line.slice(lead.length);
  let rest = typed;
  const kinds: string[] = [];
  for (let round = 0; round < 3; round++) {
    const before = rest;
    for (const [re, by, kind] of WRAPPERS) {
      const next = typeof by === 'string' ? rest.replace(re, by) : rest.replace(re, by);
      if (next !== rest) kinds.push(kind);
      rest = next;
    }
    if (rest === before) break;
  }
  const after = TRAILING.exec(rest);
  if (after) {
    rest = `${rest.slice(0, after.index)}?`;
    kinds.push('know');
  }
  const courtesy = COURTESY.exec(rest);
  // What is left is a request of three words or more ("Say please" is left alone).
  if (courtesy && rest.slice(0, courtesy.index).split(/\s+/).length >= 3) {
    const head = rest.slice(0, courtesy.index);
    rest = /[?.!]$/.test(head) ? head : head + (courtesy[1] ?? '');
    kinds.push('courtesy');
  }
  // A question only in its wrapper ("Can you tell me …?") is a request: "Tell me …".
  if (kinds.some((k) => ASKED_BY.has(k)) && ASKING.test(typed.replace(OPENER, ''))) rest = rest.replace(/\s*\?+\s*$/, '');
  // "Tell me the capital of France" asked as the question it is: the hit decision tells "What is
  // the derivative of x^2?" from "… the integral …" far better than the same as requests. (A
  // clause after "tell me" stays a request: "when World War I started?" reads as no question.)
  // "weather vs climate" asked as the question it is: "What is the difference between weather and
  // climate?" (0.43 typed against that question).
  const versus = VERSUS.exec(rest);
  if (versus && (versus[1] as string).split(/\s+/).length <= 6 && (versus[2] as string).split(/\s+/).length <= 6) {
    rest = `what is the difference between ${versus[1]} and ${versus[2]}?`;
    kinds.push('versus');
  }
  const told = TOLD.exec(rest);
  if (told) {
    rest = `what is the ${told[1]}?`;
    kinds.push('tell');
  }
  for (const [i, re] of MEANING.entries()) {
    const m = re.exec(rest);
    const term = m?.[1];
    // "Define" a word asks what it means, and a phrase what the thing is: "Define machine learning"
    // is left to read as "What is machine learning?" does.
    if (term !== undefined && !NOT_A_TERM.test(term) && !(/\s/.test(term) && /^define\b/i.test(rest))) {
      rest = `what does ${term} mean?`;
      kinds.push(`meaning ${i}`);
      break;
    }
  }
  const first = typed.charAt(0);
  const upper = first !== first.toLowerCase();
  const cased = (t: string) => lead + (upper ? t.charAt(0).toUpperCase() : t.charAt(0).toLowerCase()) + t.slice(1);
  const plain = cased(rest);
  const typedAsked = whole ? asQuestion(typed) : null;
  const plainAsked = whole ? asQuestion(rest) : null;
  return {
    plain: plain === line ? line : plain,
    wrapper: plain === line ? '' : kinds.join(' '),
    asked:
      typedAsked === null && plainAsked === null
        ? null
        : {
            typed: typedAsked === null ? line : cased(typedAsked.question),
            plain: plainAsked === null ? plain : cased(plainAsked.question),
            typedRequest: typedAsked?.request ?? '',
            plainRequest: plainAsked?.request ?? '',
          },
  };
}

/** What "explain" or "tell me about" is not followed by when it asks what a thing is. */
const NOT_A_THING = String.raw`(?:what|how|why|when|where|who|whom|whose|which|if|whether|me|you|yourself|it|this|that|them|him|her|us|these|those|the\s+following|following|more|something|anything|everything|a\s+joke|a\s+story)\b`;
/** Verbs of a task, read as what it asks for beside a task of the same verb ("Give me a recipe for scones"). */
const TASK = String.raw`(?:give|list|name|suggest|recommend|summari[sz]e|write|translate|convert|compare|create|generate|draft|plan|calculate|find|rewrite|fix|correct|make|provide|outline)\b`;
/** A request that amounts to a question ("Explain recursion", "Tell me how to …"), and the question. */
const REQUESTS: [RegExp, (m: RegExpExecArray) => string][] = [
  [
    /^(?:(?:tell|show|teach)\s+me|explain(?:\s+to\s+me)?|describe|i\s+(?:want|would\s+like|'d\s+like|’d\s+like)\s+to\s+learn|help\s+me\s+(?:learn|understand))\s+how\s+to\s+([^\n:]*?[^\s:?.!])\s*[?.!]*\s*$/iu,
    (m) => `how to ${m[1]}?`,
  ],
  [
    /^(?:explain|describe|help\s+me\s+understand|tell\s+me)(?:\s+to\s+me)?\s+what\s+([^\n:]+?)\s+(is|are|was|were)\s*[?.!]*\s*$/iu,
    (m) => `what ${m[2]} ${m[1]}?`,
  ],
  [
    new RegExp(
      String.raw`^(?:explain|describe|define|tell\s+me\s+about|help\s+me\s+understand|teach\s+me\s+about|give\s+me\s+an\s+overview\s+of)(?:\s+to\s+me)?\s+(?!${NOT_A_THING})([^\n:]*?[^\s:?.!])\s*[?.!]*\s*$`,
      'iu',
    ),
    (m) => `what is ${m[1]}?`,
  ],
  [
    /^(?:explain|describe|tell\s+me)(?:\s+to\s+me)?\s+(how|why|what|which|who|when|where)\s+([^\n:]*?[^\s:?.!])\s*[?.!]*\s*$/iu,
    (m) => `${m[1]} ${m[2]}?`,
  ],
  [new RegExp(String.raw`^${TASK}(?:\s+me)?\s+(?!${NOT_A_THING})([^\n:]*?[^\s:?.!])\s*[?.!]*\s*$`, 'iu'), (m) => `what is ${m[1]}?`],
];

/**
 * A request that amounts to a question, put as that question: "Explain recursion" as "What is
 * recursion?", "Tell me how to boil an egg" as "How to boil an egg?", "Explain what a prime number
 * is" as "What is a prime number?", and a task as what it asks for: "Give me a recipe for scones"
 * as "What is a recipe for scones?" (read only beside a task of the same verb, for what differs
 * in what is asked for); null for any other text. The hit decision was trained on
 * questions and sentences, and calls two requests that differ in one word the same far more often
 * than the two questions: "Explain recursion in programming" / "Explain iteration in programming"
 * 0.99, "What is recursion in programming?" / "What is iteration …?" 0.15. `request` is its verb
 * ("explain", "tell", "give"), which two requests read as questions share.
 */
function asQuestion(line: string): { question: string; request: string } | null {
  for (const [re, question] of REQUESTS) {
    const m = re.exec(line);
    if (m) return { question: question(m), request: line.slice(0, line.search(/\s|$/)).toLowerCase() };
  }
  return null;
}

/** An optional greeting that opens a line, kept as typed. */
const LEAD = new RegExp(`^\\s*${GREETING}`, 'iu');
/** Texts longer than this (a document) are left as they are: a wrapper would change little of them. */
const PLAIN_CHARS = 2048;
/** A line that opens with what may be a wrapper. */
const MAY_WRAP = new RegExp(
  String.raw`(?:^|\n)\s*(?:(?:hi|hello|hey)\b[^\n]{0,12})?(?:(?:please|pls|plz|kindly|can|could|would|will|do|did|is|are|any|may|i|tell|what|define|definition|meaning|the\s+(?:meaning|definition)|explain|describe|show|teach|help|a|one|my|quick|honest|random|simple|stupid|dumb|silly|small|noob|newbie|basic|question|just|wondering|curious|out|have|real|ok|okay|so|btw|by|sorry)\b|${TASK})|\b(?:meaning|definition|know|idea|mind|asking|can|possible|please|pls|plz|thanks|you|thx|ty|advance|much|lot)\W*$|\s(?:vs\.?|versus)\s`,
  'im',
);

/**
 * The text with each line's polite wrapper taken off ("Can you explain …" as "Explain …", "Do you
 * know who …" as "Tell me who …", "Tell me the …" as "What is the …?") and a question of what a
 * word or short phrase means in one form ("What is the meaning of X?", "Define X", "X meaning" as
 * "What does X mean?"), and the kinds of wrapper taken off. Idempotent.
 */
export function unwrap(text: string): Unwrapped {
  if (text.length > PLAIN_CHARS || !MAY_WRAP.test(text)) return { plain: text, wrapper: '', asked: null };
  if (!text.includes('\n')) return unwrapLine(text, true);
  const lines = text.split('\n').map((line) => unwrapLine(line, false));
  return {
    plain: lines.map((l) => l.plain).join('\n'),
    wrapper: lines
      .map((l) => l.wrapper)
      .join('\n')
      .trim(),
    asked: null,
  };
}

/** `unwrap`'s text. */
export const plainWording = (text: string): string => unwrap(text).plain;
