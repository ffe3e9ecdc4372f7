import { randomBytes, timingSafeEqual } from 'node:crypto';
import { sha256Hex } from '../cache/canonical.ts';
import type { Account, ApiKey, Store } from '../store/interface.ts';

export const KEY_PREFIX = 'rp_live_';
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const SECRET_LENGTH = 40;
/** What a well-formed key looks like; anything else is refused before any lookup. */
const KEY_SHAPE = /^rp_live_[0-9A-Za-z]{40}$/;

export function hashSecret(secret: string): string {
  return sha256Hex(secret);
}

/** A new random secret, `rp_live_` and 40 base62 characters (about 238 bits). */
export function generateSecret(): string {
  let out = KEY_PREFIX;
  while (out.length < KEY_PREFIX.length + SECRET_LENGTH) {
    for (const b of randomBytes(64)) {
      // Rejection sampling keeps every character equally likely.
      if (b < 248 && out.length < KEY_PREFIX.length + SECRET_LENGTH) out += BASE62[b % 62];
    }
  }
  return out;
}

export function isWellFormed(secret: string): boolean {
  return KEY_SHAPE.test(secret);
}

/** The part of a key shown in lists: the prefix and four characters. */
export function displayPrefix(secret: string): string {
  return secret.slice(0, KEY_PREFIX.length + 4);
}

export function constantTimeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export interface CreatedKey {
  secret: string;
  key: ApiKey;
  account: Account;
}

/** Creates a key for an account; the secret is returned once and only its hash is kept. */
export async function createKey(store: Store, account: Account, name: string | null = null): Promise<CreatedKey> {
  const secret = generateSecret();
  const key = await store.createKey({
    accountId: account.id,
    name,
    prefix: displayPrefix(secret),
    secretHash: hashSecret(secret),
  });
  return { secret, key, account };
}

/** The hash a presented secret is looked up by; null when it is not shaped like a key. */
export function presentedHash(secret: string): string | null {
  return isWellFormed(secret) ? hashSecret(secret) : null;
}

/**
 * Finds the account of a presented secret by its hash (`presentedHash`). Returns null for an
 * unknown or revoked key. The lookup is by hash, so no secret is ever compared character by
 * character.
 */
export async function authenticate(store: Store, secretHash: string): Promise<{ key: ApiKey; account: Account } | null> {
  return usableKey(await store.findKeyByHash(secretHash));
}

/**
 * `authenticate` without a promise where the store can answer in process; `undefined` when it
 * cannot (then call `authenticate`).
 */
export function authenticateSync(store: Store, secretHash: string): { key: ApiKey; account: Account } | null | undefined {
  if (store.findKeyByHashSync === undefined) return undefined;
  return usableKey(store.findKeyByHashSync(secretHash));
}

function usableKey(found: { key: ApiKey; account: Account } | null): { key: ApiKey; account: Account } | null {
  if (!found || found.key.revokedAt !== null) return null;
  return found;
}
