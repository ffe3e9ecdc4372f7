import { randomBytes } from 'node:crypto';
import type { EntryOrder, NewEntry } from './interface.ts';

const ALPHABET = 'abcdefghijkmnopqrstuvwxyz23456789';

/** A random identifier such as `acc_7kq2…`, 16 characters after the prefix. */
export function newId(prefix: string, length = 16): string {
  const bytes = randomBytes(length);
  let out = `${prefix}_`;
  for (const b of bytes) out += ALPHABET[b % ALPHABET.length];
  return out;
}

/**
 * A random entry id for the API, from 1 to 2^53 - 1 (a JSON number that stays exact). The
 * store's own row ids count every account's entries, so showing them would tell one account
 * how much the others store.
 */
export function newPublicId(): number {
  const b = randomBytes(7);
  // 53 random bits: 5 from the first byte, 8 from each of the six others.
  let n = b[0]! & 0x1f;
  for (let i = 1; i < 7; i++) n = n * 256 + b[i]!;
  return n === 0 ? 1 : n;
}

export function vectorToBuffer(v: Float32Array): Buffer {
  return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
}

/**
 * The values of an entry's INSERT, in the order both stores name the columns: account_id,
 * exact_hash, context_hash, prefix_hash, messages, query_text, prefix_text, answer, model, tokens,
 * embedder_id, vector, prefix_vector, created_at, expires_at, namespace, public_id (a new one).
 * `messages` is the messages' JSON, when the caller has made it already.
 */
export function entryValues(e: NewEntry, messages = JSON.stringify(e.messages)): unknown[] {
  return [
    e.accountId,
    e.exactHash,
    e.contextHash,
    e.prefixHash,
    messages,
    e.queryText,
    e.prefixText,
    e.answer,
    e.model,
    e.tokens,
    e.embedderId,
    e.vector ? vectorToBuffer(e.vector) : null,
    e.prefixVector ? vectorToBuffer(e.prefixVector) : null,
    e.createdAt,
    e.expiresAt,
    e.namespace,
    newPublicId(),
  ];
}

export function bufferToVector(b: Uint8Array): Float32Array {
  // Copy: the driver's buffer may be pooled or unaligned.
  const copy = new Uint8Array(b.byteLength);
  copy.set(b);
  return new Float32Array(copy.buffer);
}

let lastHour = Number.NaN;
let lastBucket = '';

/** Start of the UTC hour of a time, ISO 8601 (the last hour's string is reused). */
export function hourBucket(ms: number): string {
  const hour = Math.floor(ms / 3_600_000);
  if (hour !== lastHour) {
    lastBucket = new Date(hour * 3_600_000).toISOString();
    lastHour = hour;
  }
  return lastBucket;
}

/** The stored row is the same response, still live: an expired one is gone for users, and so are its hits. */
const SAME_ANSWER =
  'entries.answer = excluded.answer AND entries.model = excluded.model AND (entries.expires_at IS NULL OR entries.expires_at > excluded.created_at)';

/**
 * In an entry's upsert (`ON CONFLICT … DO UPDATE SET`), its version and counts; the same SQL in
 * SQLite and PostgreSQL. The same answer and model stored again (two clients that both missed)
 * are the same response: it keeps when it was first cached and its hits. Another answer starts
 * anew.
 */
export const RESTORED_ENTRY_SQL = [
  `created_at = CASE WHEN ${SAME_ANSWER} THEN entries.created_at ELSE excluded.created_at END`,
  `usage_count = CASE WHEN ${SAME_ANSWER} THEN entries.usage_count ELSE 0 END`,
  `last_hit_at = CASE WHEN ${SAME_ANSWER} THEN entries.last_hit_at ELSE NULL END`,
  `lookup_ms_total = CASE WHEN ${SAME_ANSWER} THEN entries.lookup_ms_total ELSE 0 END`,
].join(', ');

/** ORDER BY of each entry ordering; the same SQL in SQLite and PostgreSQL. */
export const ORDER_SQL: Record<EntryOrder, string> = {
  recent: 'id DESC',
  hits: 'usage_count DESC, id DESC',
  slowest: 'CASE WHEN usage_count > 0 THEN lookup_ms_total / usage_count ELSE -1 END DESC, id DESC',
};

/** The first `chars` UTF-16 code units of a text, without half a character at the end. */
export function cutText(text: string, chars: number): string {
  if (text.length <= chars) return text;
  const last = text.charCodeAt(chars - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? chars - 1 : chars);
}

/** The columns of an entry that a preview keeps as they are (see EntryPreview). */
export const PREVIEW_COLUMNS =
  'id, public_id, account_id, exact_hash, context_hash, prefix_hash, namespace, model, tokens, embedder_id, created_at, expires_at, last_hit_at, usage_count, lookup_ms_total';
