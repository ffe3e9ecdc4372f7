/**
 * Storage quotas: what an account keeps (its entries, and their bytes) and the limits of its plan.
 * Both stores keep the use in a table per account that triggers on `entries` update in the
 * transaction of every insert, replacement and delete (also those made by hand, or by a node of an
 * earlier version during an upgrade), and check a store against the limits in its own transaction.
 */

/** An account's storage: its entries (expired ones included until they are removed) and their bytes. */
export interface StorageUse {
  entries: number;
  bytes: number;
}

/** Limits a store is checked against; null: none. */
export interface StorageLimits {
  maxEntries: number | null;
  maxStoredBytes: number | null;
}

export type StorageLimitName = 'max_entries' | 'max_stored_bytes';

/** A store refused because it would take the account past a limit of its plan. Nothing was written. */
export class StorageQuotaError extends Error {
  constructor(
    readonly limit: StorageLimitName,
    /** The plan's limit. */
    readonly allowed: number,
    /** What the account keeps now. */
    readonly current: number,
    /** What the store would add: 1 entry, or its bytes (a replacement's growth). */
    readonly adding: number,
  ) {
    super(`storage limit ${limit} (${allowed}) reached: ${current} kept, ${adding} more asked for`);
    this.name = 'StorageQuotaError';
  }
}

/**
 * The bytes an entry counts for: its conversation as stored (the JSON text of its messages) and its
 * answer, in UTF-8. The SQL of each store measures the same (`octet_length` in PostgreSQL; the
 * length of the text as a blob in SQLite, whose text is UTF-8).
 */
export function storedBytes(messagesJson: string, answer: string): number {
  return Buffer.byteLength(messagesJson, 'utf8') + Buffer.byteLength(answer, 'utf8');
}

/** Whether any limit applies. */
export function limited(limits: StorageLimits | null | undefined): limits is StorageLimits {
  return limits != null && (limits.maxEntries !== null || limits.maxStoredBytes !== null);
}

/**
 * The refusal of a change that adds `added` (entries and bytes; a replacement adds no entry and
 * its growth in bytes, possibly negative) and leaves the account with `after`; null when it is
 * within the limits. Only what grows is held to its limit: a replacement that keeps or shrinks
 * the account's bytes is taken even past a limit lowered since, and so is a delete.
 */
export function storageRefusal(limits: StorageLimits, after: StorageUse, added: StorageUse): StorageQuotaError | null {
  if (added.entries > 0 && limits.maxEntries !== null && after.entries > limits.maxEntries) {
    return new StorageQuotaError('max_entries', limits.maxEntries, after.entries - added.entries, added.entries);
  }
  if (added.bytes > 0 && limits.maxStoredBytes !== null && after.bytes > limits.maxStoredBytes) {
    return new StorageQuotaError('max_stored_bytes', limits.maxStoredBytes, after.bytes - added.bytes, added.bytes);
  }
  return null;
}
