import crypto from 'node:crypto';
import { Lru } from '../util/lru.ts';

export type Role = 'system' | 'user' | 'assistant';

export interface Message {
  role: Role;
  content: string;
}

/**
 * The canonical encoding hashed into `prompt_hash`: a JSON array of `{"role":…,"content":…}`
 * objects, keys in that order, no whitespace, strings escaped as JSON.stringify does. Only
 * `role` and `content` count; any other message field is ignored. The hash is the lower-case
 * hex SHA-256 of that text as UTF-8. This encoding is stable across versions.
 */
export function canonicalMessages(messages: readonly Message[]): string {
  let out = '[';
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as Message;
    if (i > 0) out += ',';
    out += `{"role":${JSON.stringify(m.role)},"content":${JSON.stringify(m.content)}}`;
  }
  return `${out}]`;
}

/**
 * Lower-case hex SHA-256 of a text as UTF-8. The one-shot `crypto.hash` (Node 20.12+) skips the
 * Hash object, which is most of the cost for short texts; older versions use createHash.
 */
export const sha256Hex: (text: string) => string =
  typeof crypto.hash === 'function'
    ? (text) => crypto.hash('sha256', text, 'hex')
    : (text) => crypto.createHash('sha256').update(text, 'utf8').digest('hex');

/** Canonical texts up to this length have their hash remembered (`promptHash`). */
const REMEMBERED_CHARS = 1024;
/** The hashes of the canonical texts last seen: at most 4,096 texts of 1,024 characters (a few MB). */
const remembered = new Lru<string, string>(4096);

/**
 * `prompt_hash` of a conversation. A conversation asked again (the exact hits a cache is for) is
 * not hashed again: looking its text up costs less than hashing it.
 */
export function promptHash(messages: readonly Message[]): string {
  const text = canonicalMessages(messages);
  if (text.length > REMEMBERED_CHARS) return sha256Hex(text);
  let hash = remembered.get(text);
  if (hash === undefined) {
    hash = sha256Hex(text);
    remembered.set(text, hash);
  }
  return hash;
}

/**
 * The key an entry is stored and looked up under: `promptHash`, with the namespace when there
 * is one, so each namespace keeps its own entry of the same conversation.
 */
export function entryKey(promptHash: string, namespace: string | undefined): string {
  return namespace ? sha256Hex(`${namespace}\u0000${promptHash}`) : promptHash;
}
