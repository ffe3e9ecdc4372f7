import crypto from 'node:crypto';

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

export function promptHash(messages: readonly Message[]): string {
  return sha256Hex(canonicalMessages(messages));
}

/**
 * The key an entry is stored and looked up under: `promptHash`, with the namespace when there
 * is one, so each namespace keeps its own entry of the same conversation.
 */
export function entryKey(promptHash: string, namespace: string | undefined): string {
  return namespace ? sha256Hex(`${namespace}\u0000${promptHash}`) : promptHash;
}
