/**
 * Common acronyms written out, so that a request and its reading with the words spelled out embed
 * and read alike: "What is ML?" and "What is machine learning?" are one question, which as typed
 * scored 0.001 (cosine 0.49). Only acronyms with one common meaning in a request are here: not
 * "PR" (a pull request, public relations), "PM", "IP", "IT", "US", "ER", "CV", "CNN" (a news
 * network, a neural network), "ATP" (tennis, biology) or "WHO"; nor those of the sets of different
 * things (`contrast.ts`: "AWS", "GCP", "USD"), which are told apart as typed; nor "OS" and "BIOS",
 * words of code and plurals.
 */
const ACRONYMS: Record<string, string> = {
  // Computing.
  API: 'application programming interface',
  CPU: 'central processing unit',
  GPU: 'graphics processing unit',
  TPU: 'tensor processing unit',
  RAM: 'random access memory',
  ROM: 'read only memory',
  SSD: 'solid state drive',
  HDD: 'hard disk drive',
  SQL: 'structured query language',
  HTML: 'hypertext markup language',
  CSS: 'cascading style sheets',
  JSON: 'javascript object notation',
  XML: 'extensible markup language',
  DNS: 'domain name system',
  VPN: 'virtual private network',
  URL: 'uniform resource locator',
  HTTP: 'hypertext transfer protocol',
  HTTPS: 'hypertext transfer protocol secure',
  TCP: 'transmission control protocol',
  UDP: 'user datagram protocol',
  SSH: 'secure shell',
  SSL: 'secure sockets layer',
  TLS: 'transport layer security',
  IDE: 'integrated development environment',
  OOP: 'object oriented programming',
  CLI: 'command line interface',
  GUI: 'graphical user interface',
  SDK: 'software development kit',
  CDN: 'content delivery network',
  DBMS: 'database management system',
  RDBMS: 'relational database management system',
  ORM: 'object relational mapping',
  CRUD: 'create read update delete',
  REST: 'representational state transfer',
  SaaS: 'software as a service',
  IoT: 'internet of things',
  LAN: 'local area network',
  WAN: 'wide area network',
  ISP: 'internet service provider',
  VPS: 'virtual private server',
  UX: 'user experience',
  UI: 'user interface',
  '2FA': 'two factor authentication',
  MFA: 'multi factor authentication',
  USB: 'universal serial bus',
  GPS: 'global positioning system',
  LCD: 'liquid crystal display',
  OLED: 'organic light emitting diode',
  LED: 'light emitting diode',
  NFT: 'non fungible token',
  regex: 'regular expression',
  // Artificial intelligence.
  AI: 'artificial intelligence',
  ML: 'machine learning',
  NLP: 'natural language processing',
  LLM: 'large language model',
  RNN: 'recurrent neural network',
  GAN: 'generative adversarial network',
  LSTM: 'long short term memory',
  AGI: 'artificial general intelligence',
  RAG: 'retrieval augmented generation',
  RLHF: 'reinforcement learning from human feedback',
  RL: 'reinforcement learning',
  // Science and medicine.
  DNA: 'deoxyribonucleic acid',
  RNA: 'ribonucleic acid',
  MRI: 'magnetic resonance imaging',
  BMI: 'body mass index',
  ADHD: 'attention deficit hyperactivity disorder',
  PTSD: 'post traumatic stress disorder',
  OCD: 'obsessive compulsive disorder',
  HIV: 'human immunodeficiency virus',
  AIDS: 'acquired immunodeficiency syndrome',
  UTI: 'urinary tract infection',
  IBS: 'irritable bowel syndrome',
  CBT: 'cognitive behavioral therapy',
  ECG: 'electrocardiogram',
  EKG: 'electrocardiogram',
  EEG: 'electroencephalogram',
  ICU: 'intensive care unit',
  LDL: 'low density lipoprotein',
  HDL: 'high density lipoprotein',
  IVF: 'in vitro fertilization',
  IQ: 'intelligence quotient',
  UV: 'ultraviolet',
  GMO: 'genetically modified organism',
  // Economy and business.
  GDP: 'gross domestic product',
  CEO: 'chief executive officer',
  CFO: 'chief financial officer',
  CTO: 'chief technology officer',
  ROI: 'return on investment',
  KPI: 'key performance indicator',
  IPO: 'initial public offering',
  ETF: 'exchange traded fund',
  SEO: 'search engine optimization',
  CRM: 'customer relationship management',
  MBA: 'master of business administration',
  B2B: 'business to business',
  B2C: 'business to consumer',
  GDPR: 'general data protection regulation',
  VAT: 'value added tax',
  GPA: 'grade point average',
  PhD: 'doctor of philosophy',
  ETA: 'estimated time of arrival',
  ATM: 'automated teller machine',
  EV: 'electric vehicle',
  FAQ: 'frequently asked questions',
  DIY: 'do it yourself',
  // Organisations.
  NASA: 'national aeronautics and space administration',
  NATO: 'north atlantic treaty organization',
  FBI: 'federal bureau of investigation',
  CIA: 'central intelligence agency',
  UNESCO: 'united nations educational scientific and cultural organization',
  UNICEF: "united nations children's fund",
  IMF: 'international monetary fund',
  WTO: 'world trade organization',
  OPEC: 'organization of the petroleum exporting countries',
  UN: 'united nations',
  EU: 'european union',
};

/**
 * Acronyms written out only as typed in capitals: in lower case they are words of English or
 * another language ("ram", "rest", "led", "un", "eu", "roi"), a unit ("ml") or a name in code
 * ("roi", a region of interest), and in a text typed all in capitals they may be those words too.
 * The others are written out however they are typed ("whats an api", "Nato").
 */
const CAPITALS_ONLY = new Set([
  'RAM',
  'ROM',
  'REST',
  'AIDS',
  'RAG',
  'WAN',
  'CRUD',
  'LED',
  'ETA',
  'ATM',
  'VAT',
  'UN',
  'EU',
  'EV',
  'UV',
  'RL',
  'ML',
  'ROI',
]);

/** Each acronym as it is looked up: as typed for `CAPITALS_ONLY`, in lower case for the others. */
const EXPANSIONS = new Map<string, string>();
for (const [acronym, words] of Object.entries(ACRONYMS))
  EXPANSIONS.set(CAPITALS_ONLY.has(acronym) ? acronym : acronym.toLowerCase(), words);

function expansionOf(word: string, capitals: boolean): string | undefined {
  return (capitals ? EXPANSIONS.get(word) : undefined) ?? EXPANSIONS.get(word.toLowerCase());
}

/**
 * An acronym as a word of prose: after the start, a space, a quote or an opening bracket, and
 * before the end, a space, punctuation (a full stop only at a sentence's end), a plural "s" or a
 * possessive; not inside code ("JSON.parse", "os.path", "api_key", "src/api").
 */
const ACRONYM = /(?<=^|[\s"“'‘(\[])([A-Za-z0-9]{2,6})('s|’s)?(?=$|[\s,;:!?)\]"”'’]|\.(?:\s|$))/g;

/** Each acronym typed in a text, as found by `ACRONYM`: its words written out, and where it is. */
function* acronymsOf(text: string): Generator<{ match: string; at: number; words: string; possessive: string }> {
  if (!/[A-Za-z]{2}/.test(text)) return;
  const capitals = /\p{Ll}/u.test(text);
  for (const m of text.matchAll(ACRONYM)) {
    const word = m[1] as string;
    const at = m.index as number;
    let words = expansionOf(word, capitals);
    // A plural typed in capitals: "APIs", "GPUs", "LLMs" ("ides" is no plural).
    if (words === undefined && /^[A-Z0-9]{2,}s$/.test(word)) {
      const singular = expansionOf(word.slice(0, -1), capitals);
      if (singular !== undefined) words = singular.endsWith('s') ? singular : `${singular}s`;
    }
    // "500 ML" is millilitres; "top 10 AI tools" and "2 GPUs" are counted.
    if (words === undefined || (word === 'ML' && /\d\s*$/.test(text.slice(Math.max(0, at - 3), at)))) continue;
    yield { match: m[0], at, words, possessive: m[2] ?? '' };
  }
}

/** The singular of an acronym's words: what `acronymsIn` and `only` name it by. */
const singular = (words: string): string => (SINGULAR.has(words) ? words : words.replace(/s$/, ''));
const SINGULAR = new Set(Object.values(ACRONYMS).filter((w) => w.endsWith('s')));

/**
 * The acronyms of `ACRONYMS` a text types, by their words written out in the singular ("GPUs":
 * "graphics processing unit").
 */
export function acronymsIn(text: string): Set<string> {
  const found = new Set<string>();
  for (const a of acronymsOf(text)) found.add(singular(a.words));
  return found;
}

/** Each acronym's words, as a phrase of a text's lower-case words (`TextInfo.normalised`), plural or not. */
const PHRASES = new Map([...new Set(Object.values(ACRONYMS))].map((w) => [w, new RegExp(`(?:^| )${w.replace(/'/g, "'?")}s?(?= |$)`)]));

/** Whether lower-case words (`TextInfo.normalised`) name an acronym's words written out ("machine learning"). */
export function namesWords(normalised: string, words: string): boolean {
  return PHRASES.get(words)?.test(normalised) ?? false;
}

/**
 * The text with the acronyms of `ACRONYMS` written out ("What is an API?" → "What is an
 * application programming interface?", "APIs" → "application programming interfaces", "whats an
 * api" → "whats an application programming interface"; `CAPITALS_ONLY` as typed in capitals, in a
 * text that is not in capitals throughout); with `only`, those of its acronyms alone (by their
 * words in the singular, as `acronymsIn` names them).
 */
export function expandAcronyms(text: string, only?: ReadonlySet<string>): string {
  let out = '';
  let last = 0;
  for (const a of acronymsOf(text)) {
    if (only && !only.has(singular(a.words))) continue;
    out += `${text.slice(last, a.at)}${a.words}${a.possessive}`;
    last = a.at + a.match.length;
  }
  return last === 0 ? text : out + text.slice(last);
}

/** What `otherAcronyms` reads of a text: the acronyms it types, and its lower-case words. */
export interface AcronymsRead {
  acronyms: ReadonlySet<string>;
  normalised: string;
}

/**
 * Why two texts that each name an acronym of `ACRONYMS` the other does not name, typed or written
 * out, ask different things, or null: "What port does HTTPS use?" / "… HTTP use?", "LDL
 * cholesterol" / "HDL cholesterol", "difference between CPU and RAM" / "… CPU and GPU". Their
 * vectors, with the words written out, are near (0.98 and 0.99); the acronyms are different
 * things.
 */
export function otherAcronyms(x: AcronymsRead, y: AcronymsRead): string | null {
  const onlyIn = (a: AcronymsRead, b: AcronymsRead) =>
    [...a.acronyms].find((words) => !b.acronyms.has(words) && !namesWords(b.normalised, words));
  const inX = onlyIn(x, y);
  const inY = inX === undefined ? undefined : onlyIn(y, x);
  return inX !== undefined && inY !== undefined ? `other acronyms: ${inX} / ${inY}` : null;
}
