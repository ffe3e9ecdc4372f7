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
  /** Earlier user turns joined by newlines; empty for a single-turn conversation. */
  prefixText: string;
  /**
   * Earlier turns of other roles (the assistant's replies), each with its whitespace folded:
   * a follow-up ("multiply it by 3", "explain line 2") is about what was answered, so these must
   * be equal for a semantic hit whatever the user turns.
   */
  repliesText: string;
}

/** The earlier replies of a conversation's turns, compared by `samePrefix` (see `SemanticKey.repliesText`). */
export function repliesOf(earlier: readonly Message[]): string {
  return earlier
    .filter((m) => m.role !== 'user' && m.role !== 'system')
    .map((m) => m.content.trim().replace(/\s+/g, ' '))
    .join('\u0000');
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
  const previous = userTurns[userTurns.length - 1];
  return {
    contextHash: hashContext(namespace, shape, last.role, system),
    prefixHash: sha256Hex(canonicalMessages(earlier)),
    // A follow-up is read with the user turn before it, so "when was it signed?" carries its "it".
    queryText: previous === undefined ? last.content : `${previous}\n${last.content}`,
    prefixText: userTurns.join('\n'),
    repliesText: repliesOf(earlier),
  };
}

/** The vector-index partition of an account's context. */
export function partitionOf(accountId: string, contextHash: string): string {
  return `${accountId}:${contextHash}`;
}
