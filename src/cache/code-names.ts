/**
 * The names of code a text writes (functions, methods, parameters, constants, files): what is in
 * backticks (up to `QUOTED_CHARS` characters), and outside them what is written as code is, with an
 * underscore between letters or digits (`load_dataset`, `max_shard_size`, `PACKAGE_REFERENCE/MAIN`)
 * or as a call or a member (`compute()`, `Dataset.cast(…)`). Each is read by its last part (after a
 * dot, a slash or `::`, without its arguments), lower-cased and without other signs:
 * "`Dataset.save_to_disk()`" is "savetodisk".
 */
export function codeNamesOf(text: string): Set<string> {
  const names = new Set<string>();
  if (!CODE_LIKE.test(text)) return names;
  const add = (raw: string) => {
    const last = raw
      .replace(/\([^()]*\)/g, '')
      .split(/\.|\/|::/)
      .filter((p) => /[\p{L}\p{N}]/u.test(p))
      .pop();
    const key = last?.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, '') ?? '';
    if (key.length >= MIN_CHARS) names.add(key);
  };
  const outside = text.replace(/`([^`\n]{1,200})`/g, (_, inner: string) => {
    if (inner.length <= QUOTED_CHARS) add(inner);
    return ' ';
  });
  for (const m of outside.replace(PLURAL, '').matchAll(CODE_WORD)) if (isCode(m[0])) add(m[0]);
  return names;
}

/** What a name in backticks may be at most: longer, it is a snippet or a sentence. */
const QUOTED_CHARS = 40;
/** Names shorter than this say too little ("x", "id") to tell two requests apart. */
const MIN_CHARS = 3;
/** Whether a text may name code at all: most texts have none of these signs and are read no further. */
const CODE_LIKE = /`|[\p{L}\p{N}]_[\p{L}\p{N}]|[\p{L}\p{N}]\(|\p{L}\.\p{L}/u;
/**
 * A word written as code outside backticks: with an underscore inside it, or called (`name(`), or a
 * member of another (`Dataset.map`, not "e.g." nor "v2.10.0" nor a sentence's end).
 */
const CODE_WORD =
  /(?<![\p{L}\p{N}_])(?:[\p{L}_][\p{L}\p{N}_]*(?:(?:\.|::|\/)[\p{L}_][\p{L}\p{N}_]*)*(?:\([^()\n]{0,60}\))?)(?![\p{L}\p{N}_])/gu;

/** A plural in parentheses, "file(s)", which is no call. */
const PLURAL = /\((?:e?s)\)/g;

/** Whether `word` is code as `CODE_WORD` reads it, not a plain word. */
const isCode = (word: string): boolean =>
  /[\p{L}\p{N}]_[\p{L}\p{N}]/u.test(word) || /\(/.test(word) || /\p{L}{2,}(?:\.|::)\p{L}{2,}/u.test(word);

/**
 * Why two texts are other requests by the code they name: each names a function, method,
 * parameter or file (`codeNamesOf`) that the other names nowhere, not even as words ("the
 * `set_column` function replaces a column" / "the `add_column` function adds a column", "saved with
 * `Dataset.save_to_disk()`" / "loaded with `Dataset.load_from_disk()`"). The encoder cuts such names
 * into common pieces and reads the rest of the sentence, so they embed nearly alike (0.97) and the
 * model, which has no feature for them, read them as one request. A name one side writes in
 * words ("`load_dataset`" / "the load dataset function") or leaves out, or that both name, says
 * nothing. Null when there is no such pair.
 */
export function otherCodeNames(a: string, b: string): string | null {
  const x = codeNamesOf(a);
  if (x.size === 0) return null;
  const y = codeNamesOf(b);
  if (y.size === 0) return null;
  const onlyX = unnamed(x, b);
  if (onlyX === undefined) return null;
  const onlyY = unnamed(y, a);
  return onlyY === undefined ? null : `code ${onlyX}/${onlyY}`;
}

/** The first of `names` that `text` names nowhere, in code or in its words run together. */
function unnamed(names: Set<string>, text: string): string | undefined {
  const flat = text.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, '');
  for (const n of names) if (!flat.includes(n)) return n;
  return undefined;
}
