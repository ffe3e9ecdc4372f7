import { mkdirSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';

/** Another server holds the data directory. */
export class DataDirInUseError extends Error {
  override readonly name = 'DataDirInUseError';
}

/** Held by a server for as long as it runs on a data directory. */
export interface DataDirLock {
  release(): void;
}

/**
 * Takes the data directory for this server alone. Two servers on one SQLite database would each
 * keep an in-memory vector index that the other's stores never reach (semantic misses for
 * entries that are there), and each would save its own index snapshot at shutdown over the
 * other's, leaving the entries only the other knew out of the index after the next start.
 *
 * The lock is SQLite's own exclusive lock on a file of its own (`server.lock`), kept until the
 * connection closes: the operating system drops it when the process ends however it ends, so a
 * server killed with SIGKILL leaves no stale lock behind. The database itself is not locked, so
 * the CLI keeps working while the server runs.
 */
export function lockDataDir(dir: string): DataDirLock {
  mkdirSync(dir, { recursive: true });
  const lock = lockFile(path.join(dir, 'server.lock'));
  if (!lock) throw new DataDirInUseError(`another Reprise server is running on the data directory ${dir}`);
  return lock;
}

/**
 * Takes `file` as a lock for this process alone, or null when another connection holds it. The
 * lock is SQLite's own exclusive lock on a file of its own, kept until `release` or the end of the
 * process, however it ends.
 */
export function lockFile(file: string): DataDirLock | null {
  // No busy timeout: a held lock is an answer, not something to wait for.
  const db = new Database(file, { timeout: 0 });
  try {
    // The file holds nothing: no journal file beside it.
    db.pragma('journal_mode = MEMORY');
    db.pragma('locking_mode = EXCLUSIVE');
    // In exclusive locking mode the lock a write transaction takes is kept after it ends.
    db.exec('BEGIN EXCLUSIVE; COMMIT');
  } catch (err) {
    db.close();
    if ((err as { code?: string }).code === 'SQLITE_BUSY') return null;
    throw err;
  }
  return { release: () => db.close() };
}
