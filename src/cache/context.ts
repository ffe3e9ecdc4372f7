import { canonicalMessages, sha256Hex, type Message } from './canonical.ts';

/**
 * How a conversation is matched semantically. The final message is the query and is embedded.
 * Everything else must agree: the system messages and the scope (namespace) exactly, the
 * number of earlier turns exactly, and the earlier turns either exactly (same `prefixHash`)
 * or by similarity of their user text (`prefixText`).
 */
export interface SemanticKey {
  /** Partition of the vector index: scope, system messages and shape of the conversation. */
  contextHash: string;
  prefixHash: string;
  /** The embedded text: the final message, after the previous user turn when there is one. */
  queryText: string;
  /** The final message's text. */
  final: string;
  /** The user turn before the final message; null when there is none. */
  previous: string | null;
  /** Earlier user turns joined by newlines; empty for a single-turn conversation. */
  prefixText: string;
  /**
   * Earlier turns of other roles (the assistant's replies): a follow-up ("multiply it by 3",
   * "explain line 2") is about what was answered, so these must be the same (`sameReplies`) for a
   * semantic hit whatever the user turns.
   */
  replies: string[];
}

/** A conversation's replies before its final turn (see `SemanticKey.replies`). */
export function repliesOf(messages: readonly Message[]): string[] {
  return repliesAmong(messages.filter((m) => m.role !== 'system').slice(0, -1));
}

/** The replies among earlier turns (system messages already left out). */
function repliesAmong(earlier: readonly Message[]): string[] {
  return earlier.filter((m) => m.role !== 'user').map((m) => m.content);
}

/**
 * Whether two conversations' replies are the same, apart from whitespace (a run of it is one
 * space; none at the ends). Replies that differ usually differ early: the comparison stops there,
 * so long replies cost little.
 */
export function sameReplies(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => sameApartFromWhitespace(x, b[i] as string));
}

const isSpace = (c: number) => c === 32 || (c >= 9 && c <= 13) || c === 0xa0 || c === 0x2028 || c === 0x2029 || c === 0xfeff;

function sameApartFromWhitespace(a: string, b: string): boolean {
  let i = 0;
  let j = 0;
  const skip = (s: string, k: number) => {
    while (k < s.length && isSpace(s.charCodeAt(k))) k++;
    return k;
  };
  i = skip(a, i);
  j = skip(b, j);
  while (i < a.length && j < b.length) {
    const ca = a.charCodeAt(i);
    const cb = b.charCodeAt(j);
    if (isSpace(ca) || isSpace(cb)) {
      // A run of whitespace on one side matches a run on the other, not nothing.
      if (!isSpace(ca) || !isSpace(cb)) return false;
      i = skip(a, i);
      j = skip(b, j);
      continue;
    }
    if (ca !== cb) return false;
    i++;
    j++;
  }
  return skip(a, i) === a.length && skip(b, j) === b.length;
}

/** The one encoding of a context (stored with every entry, so it never changes). */
function hashContext(namespace: string, shape: string, role: string, system: readonly Message[]): string {
  return sha256Hex(`${namespace}\u0000${shape}\u0000${role}\u0000${canonicalMessages(system)}`);
}

/**
 * The `contextHash` of `semanticKey(messages, namespace)` alone, without the rest of the key
 * (an exact lookup needs only this).
 */
export function contextHashOf(messages: readonly Message[], namespace: string): string {
  const system: Message[] = [];
  let shape = '';
  let last: Message | undefined;
  for (const m of messages) {
    if (m.role === 'system') {
      system.push(m);
      continue;
    }
    if (last !== undefined) shape += last.role[0];
    last = m;
  }
  return hashContext(namespace, shape, (last ?? (messages[messages.length - 1] as Message)).role, system);
}

export function semanticKey(messages: readonly Message[], namespace: string): SemanticKey {
  const system: Message[] = [];
  const turns: Message[] = [];
  for (const m of messages) (m.role === 'system' ? system : turns).push(m);
  const last = turns.length > 0 ? (turns[turns.length - 1] as Message) : (messages[messages.length - 1] as Message);
  const earlier = turns.slice(0, -1);
  const shape = earlier.map((m) => m.role[0]).join('');
  const userTurns = earlier.filter((m) => m.role === 'user').map((m) => m.content);
  const { previous, final } = followUpOf(messages);
  return {
    contextHash: hashContext(namespace, shape, last.role, system),
    prefixHash: sha256Hex(canonicalMessages(earlier)),
    // A follow-up is read with the user turn before it, so "when was it signed?" carries its "it".
    queryText: previous === null ? final : `${previous}\n${final}`,
    final,
    previous,
    prefixText: userTurns.join('\n'),
    replies: repliesAmong(earlier),
  };
}

/**
 * The user turn before a conversation's final message, and that message's text: the two parts of
 * its `queryText`.
 */
export function followUpOf(messages: readonly Message[]): { previous: string | null; final: string } {
  const turns = messages.filter((m) => m.role !== 'system');
  const last = turns.length > 0 ? (turns[turns.length - 1] as Message) : (messages[messages.length - 1] as Message);
  for (let i = turns.length - 2; i >= 0; i--)
    if (turns[i]?.role === 'user') return { previous: (turns[i] as Message).content, final: last.content };
  return { previous: null, final: last.content };
}

/** The vector-index partition of an account's context. */
export function partitionOf(accountId: string, contextHash: string): string {
  return `${accountId}:${contextHash}`;
}

/** The account of a partition (`partitionOf`): account ids hold no colon. */
export function accountOfPartition(partition: string): string {
  return partition.slice(0, partition.indexOf(':'));
}
