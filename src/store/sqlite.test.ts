import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { BEFORE_VECTOR_NUMBERING, tempDir } from '../../test/helpers.ts';
import { emptyDelta, UsageRecorder } from '../cache/usage.ts';
import { bytesOf, entry, storeConformance } from './conformance.ts';
import { lockFile } from './data-dir-lock.ts';
import { isSqliteUnavailable, SqliteStore } from './sqlite.ts';

storeConformance('SQLite', async () => {
  const dir = tempDir();
  return { store: new SqliteStore(path.join(dir, 'reprise.db')), cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
});

describe('SQLite beside a process of the version before public entry ids', () => {
  test('an entry it inserts gets a public id, which storing it again keeps', async () => {
    const dir = tempDir();
    const store = new SqliteStore(path.join(dir, 'reprise.db'));
    try {
      const a = await store.createAccount('older-writer', 'free');
      // The INSERT of that version: no public_id, no namespace.
      (store as unknown as { db: Database.Database }).db
        .prepare(
          `INSERT INTO entries (account_id, exact_hash, context_hash, prefix_hash, messages, query_text, prefix_text,
             answer, model, tokens, embedder_id, vector, prefix_vector, created_at, expires_at)
           VALUES (?, 'old-hash', 'ctx', 'p', '[{"role":"user","content":"q"}]', 'q', '', 'old answer', 'm', 1, NULL, NULL, NULL, ?, NULL)`,
        )
        .run(a.id, new Date().toISOString());
      const [listed] = (await store.listEntries(a.id, { page: 1, perPage: 10 })).entries;
      assert.ok(listed && Number.isSafeInteger(listed.publicId) && listed.publicId > 0, String(listed?.publicId));
      assert.equal((await store.getEntry(a.id, listed.publicId))?.answer, 'old answer');
      const again = await store.putEntry(entry(a.id, { exactHash: 'old-hash', answer: 'new answer' }));
      assert.equal(again.publicId, listed.publicId);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('SQLite numbering of vector writes and removals', () => {
  test('what changed after a number: entries written since, as they are now, and vectors removed since, until forgotten', async () => {
    const dir = tempDir();
    const store = new SqliteStore(path.join(dir, 'reprise.db'));
    try {
      const a = await store.createAccount('numbered', 'free');
      const first = await store.putEntry(entry(a.id, { exactHash: 'first' }));
      const second = await store.putEntry(entry(a.id, { exactHash: 'second', contextHash: 'ctx-2' }));
      assert.deepEqual(
        (await store.changedVectors(0, 100)).map((r) => r.id),
        [first.id, second.id],
      );
      const saved = store.vectorSeq();
      assert.deepEqual(await store.changedVectors(saved, 100), []);

      const third = await store.putEntry(entry(a.id, { exactHash: 'third' }));
      await store.recordHits(new Map([[third.id, { count: 1, at: new Date().toISOString(), lookupMs: 1, createdAt: third.createdAt }]]));
      // Stored again: the same entry, with the vector made now.
      await store.putEntry(entry(a.id, { exactHash: 'first', vector: Float32Array.from([0, 1]) }));
      assert.deepEqual(
        await store.replaceVectors([{ id: second.id, from: 'e', embedderId: 'e2', vector: Float32Array.from([1, 0]), prefixVector: null }]),
        [second.id],
      );
      assert.ok(await store.deleteEntry(a.id, second.publicId));
      const expired = await store.putEntry(entry(a.id, { exactHash: 'expired', expiresAt: '2000-01-01T00:00:00.000Z' }));
      await store.deleteExpired(new Date().toISOString(), 100);

      const changed = await store.changedVectors(saved, 100);
      assert.deepEqual(
        changed.map((r) => r.id),
        [third.id, first.id],
      );
      assert.deepEqual([...(changed[1]?.vector ?? [])], [0, 1]);
      assert.ok(changed.every((r, i) => r.seq > saved && (i === 0 || r.seq > (changed[i - 1] as { seq: number }).seq)));
      assert.deepEqual(
        (await store.removedVectors(saved, 100)).map((r) => [r.id, r.accountId, r.contextHash]),
        [
          [second.id, a.id, 'ctx-2'],
          [expired.id, a.id, 'ctx'],
        ],
      );
      // A snapshot saved now reflects them all.
      const now = store.vectorSeq();
      await store.setSnapshotToken('token', now);
      assert.deepEqual(await store.removedVectors(saved, 100), []);
      assert.deepEqual(await store.changedVectors(now, 100), []);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a database of the version before: its entries are numbered by id, and later writes after them', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'reprise.db');
    let store = new SqliteStore(file);
    const a = await store.createAccount('upgraded', 'free');
    const old = [await store.putEntry(entry(a.id)), await store.putEntry(entry(a.id))];
    await store.close();
    // Back to the schema before the numbering (and the storage counts, which came after it).
    const db = new Database(file);
    db.exec(BEFORE_VECTOR_NUMBERING);
    db.close();
    store = new SqliteStore(file);
    try {
      const last = old[1]?.id as number;
      assert.equal(store.vectorSeq(), last);
      assert.deepEqual(
        (await store.changedVectors(0, 100)).map((r) => [r.id, r.seq]),
        old.map((e) => [e.id, e.id]),
      );
      const later = await store.putEntry(entry(a.id));
      assert.deepEqual(
        (await store.changedVectors(last, 100)).map((r) => r.id),
        [later.id],
      );
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a database of the version before whose newest entry was deleted: later writes are numbered after every id it gave', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'reprise.db');
    let store = new SqliteStore(file);
    const a = await store.createAccount('upgraded-after-delete', 'free');
    await store.putEntry(entry(a.id));
    const newest = await store.putEntry(entry(a.id));
    assert.ok(await store.deleteEntry(a.id, newest.publicId));
    await store.close();
    const db = new Database(file);
    db.exec(BEFORE_VECTOR_NUMBERING);
    db.close();
    store = new SqliteStore(file);
    try {
      // A snapshot that version saved took the highest id its index had held as its watermark:
      // the deleted entry's. What is written after the upgrade comes after it.
      assert.ok(store.vectorSeq() >= newest.id, `${store.vectorSeq()} < ${newest.id}`);
      const later = await store.putEntry(entry(a.id));
      assert.deepEqual(
        (await store.changedVectors(newest.id, 100)).map((r) => r.id),
        [later.id],
      );
      const gone = await store.deleteEntry(a.id, later.publicId);
      assert.ok(gone);
      assert.deepEqual(
        (await store.removedVectors(newest.id, 100)).map((r) => r.id),
        [later.id],
      );
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('SQLite storage of accounts', () => {
  const raw = (store: SqliteStore) => (store as unknown as { db: Database.Database }).db;

  /** What the account's entries take, read from their rows: count, and bytes in UTF-8. */
  const measured = (db: Database.Database, accountId: string) => {
    const rows = db.prepare('SELECT messages, answer FROM entries WHERE account_id = ?').all(accountId) as {
      messages: string;
      answer: string;
    }[];
    return { entries: rows.length, bytes: rows.reduce((n, r) => n + Buffer.byteLength(r.messages) + Buffer.byteLength(r.answer), 0) };
  };

  test('is the same once the database is opened again, and its limits still hold', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'reprise.db');
    const limits = { maxEntries: 3, maxStoredBytes: null };
    let store = new SqliteStore(file);
    try {
      const a = await store.createAccount('reopened', 'free');
      for (const [i, answer] of ['Grüße', '世界', '🙂 x'].entries())
        await store.putEntry(entry(a.id, { exactHash: `h${i}`, answer }), limits);
      const use = await store.getStorage(a.id);
      assert.deepEqual(use, measured(raw(store), a.id));
      await store.close();
      store = new SqliteStore(file);
      assert.deepEqual(await store.getStorage(a.id), use);
      await assert.rejects(store.putEntry(entry(a.id, { exactHash: 'h3' }), limits), { name: 'StorageQuotaError', current: 3 });
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('of a database made by the version before storage limits is counted from its entries when it is opened', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'reprise.db');
    let store = new SqliteStore(file);
    try {
      const a = await store.createAccount('counted-a', 'free');
      const b = await store.createAccount('counted-b', 'free');
      await store.createAccount('counted-none', 'free');
      for (let i = 0; i < 5; i++)
        await store.putEntry(entry(a.id, { answer: `réponse ${i}`, messages: [{ role: 'user', content: `質問 ${i}` }] }));
      await store.putEntry(entry(b.id, { answer: 'x'.repeat(1000) }));
      await store.close();
      // Back to the version before: the migration that counts storage (and the one after it)
      // undone, and an entry written as that version did, with nothing counting it.
      const db = new Database(file);
      db.exec(`DROP TRIGGER entries_storage_insert; DROP TRIGGER entries_storage_delete; DROP TRIGGER entries_storage_update;
               DROP TABLE account_storage; DROP TABLE account_purges; DELETE FROM schema_migrations WHERE version >= 9;`);
      db.prepare(
        `INSERT INTO entries (account_id, exact_hash, context_hash, prefix_hash, messages, query_text, prefix_text, answer, model, tokens, created_at)
         VALUES (?, 'old', 'ctx', 'p', '[{"role":"user","content":"ancien"}]', 'ancien', '', 'déjà', 'm', 1, ?)`,
      ).run(a.id, new Date().toISOString());
      db.close();

      store = new SqliteStore(file);
      const counted = await store.getStorage(a.id);
      assert.deepEqual(counted, measured(raw(store), a.id));
      assert.equal(counted.entries, 6);
      assert.deepEqual(await store.getStorage(b.id), measured(raw(store), b.id));
      assert.deepEqual(await store.getStorage((await store.getAccountByName('counted-none'))?.id ?? ''), { entries: 0, bytes: 0 });
      // And kept from there.
      await store.putEntry(entry(a.id));
      assert.deepEqual(await store.getStorage(a.id), measured(raw(store), a.id));
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('entries deleted by another connection (an operator in the sqlite3 shell) are no longer counted', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'reprise.db');
    const store = new SqliteStore(file);
    try {
      const a = await store.createAccount('shell-deletes', 'free');
      for (let i = 0; i < 3; i++) await store.putEntry(entry(a.id, { exactHash: `s${i}` }));
      const shell = new Database(file);
      shell.prepare("DELETE FROM entries WHERE exact_hash = 's1'").run();
      shell.close();
      assert.deepEqual(await store.getStorage(a.id), measured(raw(store), a.id));
      assert.equal((await store.getStorage(a.id)).entries, 2);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('SQLite counters', () => {
  test('counters committed without a sync survive the process being killed; later commits are synced again', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'reprise.db');
    let child: ChildProcess | null = null;
    try {
      // A process that writes a batch of counters, says so, then waits to be killed.
      const writer = spawn(
        process.execPath,
        [
          '--import',
          'tsx',
          '--input-type=module',
          '-e',
          `import { SqliteStore } from ${JSON.stringify(new URL('./sqlite.ts', import.meta.url).href)};
           const store = new SqliteStore(${JSON.stringify(file)});
           const a = await store.createAccount('killed', 'free');
           await store.addUsage([{ accountId: a.id, bucket: '2030-01-01T10:00:00.000Z', requests: 7, exactHits: 3, semanticHits: 1,
             lookupMsTotal: 2, tokensSaved: 40, costSaved: 0.5, stores: 2 }]);
           const sync = store.db.pragma('synchronous', { simple: true });
           process.stdout.write(JSON.stringify({ account: a.id, sync }) + '\\n');
           setInterval(() => {}, 1000);`,
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      child = writer;
      const line = await new Promise<string>((resolve, reject) => {
        let out = '';
        writer.stdout.setEncoding('utf8').on('data', (d: string) => {
          out += d;
          if (out.includes('\n')) resolve(out.trim());
        });
        writer.on('exit', (code) => reject(new Error(`exited with ${code} before writing: ${out}`)));
      });
      const { account, sync } = JSON.parse(line) as { account: string; sync: number };
      // synchronous is FULL (2) again once the counters are written, for the entries after them.
      assert.equal(sync, 2);
      const exited = new Promise((resolve) => writer.on('exit', resolve));
      writer.kill('SIGKILL');
      await exited;

      const store = new SqliteStore(file);
      const usage = await store.getUsage(account, {});
      assert.equal(usage.length, 1);
      assert.equal(usage[0]?.requests, 7);
      assert.equal(usage[0]?.exactHits, 3);
      assert.equal(usage[0]?.stores, 2);
      await store.close();
    } finally {
      child?.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('SQLite beside a connection that holds the write lock', () => {
  const usageRow = (accountId: string, requests: number) => ({ ...emptyDelta(), accountId, bucket: '2030-01-01T10:00:00.000Z', requests });

  test('writes wait for it without holding the event loop, and are committed once it is released', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'reprise.db');
    const store = new SqliteStore(file);
    const other = new Database(file);
    try {
      const a = await store.createAccount('waits', 'free');
      await store.putEntry(entry(a.id, { exactHash: 'replaced', answer: 'old' }));
      // What `sqlite3 reprise.db` with a transaction left open does.
      other.exec('BEGIN IMMEDIATE');
      const settled: string[] = [];
      const note = <T>(name: string, p: Promise<T>) =>
        p.finally(() => {
          settled.push(name);
        });
      const replaced = note('replaced', store.putEntry(entry(a.id, { exactHash: 'replaced', answer: 'new' })));
      const added = note('added', store.putEntry(entry(a.id, { exactHash: 'added' })));
      const counted = note('counted', store.addUsage([usageRow(a.id, 5)]));
      // The event loop turns while they wait: reads are answered, with what was committed.
      for (let i = 0; i < 5; i++) {
        await nextTurn();
        assert.equal(store.getEntryByHashSync(a.id, 'replaced')?.answer, 'old');
        assert.equal(store.getEntryByHashSync(a.id, 'added'), null);
      }
      // A store that comes while the batch waits goes with it.
      const joined = note('joined', store.putEntry(entry(a.id, { exactHash: 'joined' })));
      await nextTurn();
      assert.deepEqual(settled, []);
      other.exec('ROLLBACK');
      await Promise.all([replaced, added, counted, joined]);
      // The head read (and cached) while the store waited is not served after its commit.
      assert.equal(store.getEntryByHashSync(a.id, 'replaced')?.answer, 'new');
      assert.ok(store.getEntryByHashSync(a.id, 'added'));
      assert.ok(store.getEntryByHashSync(a.id, 'joined'));
      assert.equal((await store.getUsage(a.id, {}))[0]?.requests, 5);
    } finally {
      other.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('held beyond the wait: the write fails as unavailable and writes nothing; counts are kept for the next batch', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'reprise.db');
    const store = new SqliteStore(file, { lockWaitMs: 100 });
    const other = new Database(file);
    try {
      const a = await store.createAccount('locked-out', 'free');
      const usage = new UsageRecorder(store);
      usage.count(a.id, { requests: 3 });
      other.exec('BEGIN IMMEDIATE');
      await assert.rejects(store.putEntry(entry(a.id, { exactHash: 'refused' })), (err) => isSqliteUnavailable(err));
      await assert.rejects(usage.flush(), (err) => isSqliteUnavailable(err));
      usage.count(a.id, { requests: 4 });
      other.exec('ROLLBACK');
      await usage.flush();
      assert.equal((await store.getUsage(a.id, {}))[0]?.requests, 7);
      assert.equal(store.getEntryByHashSync(a.id, 'refused'), null);
      // And the store takes writes again.
      assert.ok(await store.putEntry(entry(a.id, { exactHash: 'later' })));
    } finally {
      other.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('SQLite deletion of an account of more entries than one batch', () => {
  const MARK = 'secret-of-the-deleted-account';
  /** An account with `n` entries (answers carrying `marker`), a key and two hours of usage. */
  const fill = async (store: SqliteStore, name: string, n: number, marker: string) => {
    const account = await store.createAccount(name, 'pro');
    const hash = `hash-${name}`;
    await store.createKey({ accountId: account.id, name: null, prefix: 'rp_live_x', secretHash: hash });
    for (let i = 0; i < n; i++) await store.putEntry(entry(account.id, { exactHash: `q${i}`, answer: `${marker} ${i}` }));
    for (const bucket of ['2030-01-01T10:00:00.000Z', '2030-01-01T11:00:00.000Z'])
      await store.addUsage([{ ...emptyDelta(), accountId: account.id, bucket, requests: 1 }]);
    return { account, hash };
  };
  /** Rows that name the account, table by table, read by a connection of its own. */
  const rowsOf = (file: string, accountId: string) => {
    const db = new Database(file, { readonly: true });
    try {
      const count = (table: string, column = 'account_id') =>
        db.prepare(`SELECT count(*) FROM ${table} WHERE ${column} = ?`).pluck().get(accountId) as number;
      return {
        accounts: count('accounts', 'id'),
        api_keys: count('api_keys'),
        entries: count('entries'),
        usage: count('usage'),
        account_storage: count('account_storage'),
        account_purges: count('account_purges'),
      };
    } finally {
      db.close();
    }
  };
  const NONE = { accounts: 0, api_keys: 0, entries: 0, usage: 0, account_storage: 0, account_purges: 0 };
  /**
   * How many times the database's files hold `text`, free space included, once the WAL is copied
   * into the file. Not only in rows: SQLite copies a page's bytes when a b-tree grows or shrinks,
   * and the space a copy leaves is not overwritten (secure_delete covers what is deleted).
   */
  const copiesOf = (file: string, text: string) => {
    const db = new Database(file);
    db.pragma('wal_checkpoint(TRUNCATE)');
    db.close();
    const bytes = readFileSync(file);
    let n = 0;
    for (let at = bytes.indexOf(text); at >= 0; at = bytes.indexOf(text, at + 1)) n++;
    return n;
  };
  test('gone at once for everyone; its rows are removed a batch at a time, nothing of them left, another account untouched', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'reprise.db');
    const store = new SqliteStore(file, { deleteBatch: 10 });
    try {
      const gone = await fill(store, 'large', 35, MARK);
      const kept = await fill(store, 'kept', 5, 'kept-answer');
      const copies = copiesOf(file, MARK);
      const keptBefore = rowsOf(file, kept.account.id);
      assert.deepEqual(await store.deleteAccount(gone.account.id), {
        account: gone.account,
        keys: 1,
        sessions: 0,
        entries: 35,
        usageBuckets: 2,
      });
      // Before any of its entries is removed, nothing of it is found or counted.
      assert.equal(rowsOf(file, gone.account.id).entries, 35);
      assert.equal(await store.findKeyByHash(gone.hash), null);
      assert.equal(await store.getAccountByName('large'), null);
      assert.deepEqual(await store.getStorage(gone.account.id), { entries: 0, bytes: 0 });
      assert.ok(!(await store.scanVectors(0, 1000)).some((r) => r.accountId === gone.account.id));
      assert.deepEqual(
        await store.staleVectorIds('e2', 'e', 'e', 0, 1000),
        (await store.scanVectors(0, 1000)).map((r) => r.id),
      );
      assert.equal(store.purgeLeft(gone.account.id), 35);

      const progress: [number, number][] = [];
      const done = await store.purgeDeletedAccounts({ onBatch: (p) => progress.push([p.entriesRemoved, p.entriesLeft]) });
      assert.deepEqual(done, { accounts: 1, entries: 35, usageBuckets: 2 });
      // Ten entries a transaction; the usage with the last five.
      assert.deepEqual(progress, [
        [10, 25],
        [20, 15],
        [30, 5],
        [35, 0],
      ]);
      assert.equal(store.purgeLeft(gone.account.id), null);
      assert.deepEqual(rowsOf(file, gone.account.id), NONE);
      assert.deepEqual(rowsOf(file, kept.account.id), keptBefore);
      assert.equal((await store.findKeyByHash(kept.hash))?.account.id, kept.account.id);
      assert.deepEqual(await store.getStorage(kept.account.id), {
        entries: 5,
        bytes: 5 * bytesOf(entry(kept.account.id, { answer: 'kept-answer 0' })),
      });
      // The space its rows took is overwritten with zeros: each of its 35 answers is gone from the file.
      assert.ok(copiesOf(file, MARK) <= copies - 35, `${copiesOf(file, MARK)} of ${copies} copies left`);
      assert.ok(copiesOf(file, 'kept-answer') >= 5);
      // Nothing left to do.
      assert.deepEqual(await store.purgeDeletedAccounts(), { accounts: 0, entries: 0, usageBuckets: 0 });
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('interrupted after the first batch: nothing of it is served meanwhile, its name is free, and the next run finishes it', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'reprise.db');
    const first = new SqliteStore(file, { deleteBatch: 10 });
    let next: SqliteStore | null = null;
    try {
      const gone = await fill(first, 'interrupted', 35, MARK);
      const copies = copiesOf(file, MARK);
      await first.deleteAccount(gone.account.id);
      const stop = new Error('killed');
      await assert.rejects(
        first.purgeDeletedAccounts({
          onBatch: () => {
            throw stop;
          },
        }),
        stop,
      );
      assert.deepEqual(rowsOf(file, gone.account.id), { ...NONE, entries: 25, usage: 2, account_purges: 1 });
      // A process that opens the database now (a restarted server, the next CLI run) finds nothing of it.
      next = new SqliteStore(file, { deleteBatch: 10 });
      assert.equal(await next.getAccount(gone.account.id), null);
      assert.equal(await next.findKeyByHash(gone.hash), null);
      assert.ok(!(await next.listAccounts()).some((a) => a.id === gone.account.id));
      assert.deepEqual(await next.scanVectors(0, 1000), []);
      // The name is free at once, for an account that starts empty.
      const anew = await next.createAccount('interrupted', 'pro');
      assert.equal((await next.listEntries(anew.id, { page: 1, perPage: 10 })).total, 0);
      assert.deepEqual(await next.getStorage(anew.id), { entries: 0, bytes: 0 });
      await next.putEntry(entry(anew.id, { exactHash: 'q0', answer: 'new life' }));
      // While another process removes them, this one leaves them to it.
      const held = lockFile(`${file}.purge-lock`);
      assert.ok(held);
      assert.equal(await next.purgeDeletedAccounts(), null);
      held.release();
      assert.equal(next.purgeLeft(gone.account.id), 25);
      assert.deepEqual(await next.purgeDeletedAccounts(), { accounts: 1, entries: 25, usageBuckets: 2 });
      assert.deepEqual(rowsOf(file, gone.account.id), NONE);
      assert.ok(copiesOf(file, MARK) <= copies - 35, `${copiesOf(file, MARK)} of ${copies} copies left`);
      assert.equal(next.getEntryByHashSync(anew.id, 'q0')?.answer, 'new life');
    } finally {
      await first.close();
      await next?.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
