import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import { loadConfig } from '../src/config.ts';
import { closeSharedEmbedder, sharedEmbedder, startTestApp, tempDir, user, type TestApp } from './helpers.ts';
import { lockFile } from '../src/store/data-dir-lock.ts';
import { api, runCli, startCli, startServerProcess, type ServerProcess } from './process.ts';
import { eventually, freshSchema, serviceUrl, skipReason, uniquePrefix } from './services.ts';

const SPIDER = [user('How many legs does a spider have?')];
const SPIDERS = [user('How many legs do spiders have?')];

const NONE = { accounts: 0, api_keys: 0, sessions: 0, entries: 0, usage: 0 };

/** Every row that names the account, table by table, in the SQLite file (read by a connection of its own). */
function rowsOf(dir: string, accountId: string): typeof NONE {
  const db = new Database(path.join(dir, 'reprise.db'), { readonly: true });
  try {
    const count = (sql: string) => (db.prepare(sql).pluck().get(accountId) as number) ?? 0;
    return {
      accounts: count('SELECT count(*) FROM accounts WHERE id = ?'),
      api_keys: count('SELECT count(*) FROM api_keys WHERE account_id = ?'),
      sessions: count('SELECT count(*) FROM sessions WHERE account_id = ?'),
      entries: count('SELECT count(*) FROM entries WHERE account_id = ?'),
      usage: count('SELECT count(*) FROM usage WHERE account_id = ?'),
    };
  } finally {
    db.close();
  }
}

/**
 * Adds `n` entries to the account, as a server would have stored them over time, by a connection
 * of its own (the storage counts and vector numbers follow, by the database's triggers).
 */
function addEntries(dir: string, accountId: string, n: number): void {
  const db = new Database(path.join(dir, 'reprise.db'));
  try {
    db.pragma('busy_timeout = 5000');
    const insert = db.prepare(
      `INSERT INTO entries (account_id, exact_hash, context_hash, prefix_hash, messages, query_text, prefix_text, answer, model, tokens, created_at, public_id)
       VALUES (?, ?, 'ctx', '', ?, ?, '', ?, 'gpt-4o', 10, ?, ?)`,
    );
    db.transaction(() => {
      for (let i = 0; i < n; i++) {
        const q = `Question ${i} of ${accountId}?`;
        insert.run(accountId, `bulk-${i}`, JSON.stringify([user(q)]), q, `Answer ${i}.`, new Date().toISOString(), 1_000_000 + i);
      }
    })();
  } finally {
    db.close();
  }
}

/** The fields of the server's "Reprise is listening" log line. */
function listening(server: ServerProcess): { vectors?: number; vectors_from_snapshot?: number } {
  const line = server
    .stdout()
    .split('\n')
    .find((l) => l.includes('Reprise is listening'));
  return JSON.parse(line ?? '{}') as { vectors?: number; vectors_from_snapshot?: number };
}

/** The vectors the server said it dropped for deleted accounts, in its log lines so far. */
function vectorsForgotten(server: ServerProcess): number[] {
  return server
    .stdout()
    .split('\n')
    .filter((l) => l.includes('the vectors of deleted accounts are out of the semantic index'))
    .map((l) => (JSON.parse(l) as { vectors: number }).vectors);
}

describe('accounts deleted and re-planned with the CLI while the server runs (SQLite)', () => {
  const dir = tempDir('reprise-accounts-');
  // A plan of small storage limits, to move an account to and from.
  const configFile = path.join(tempDir('reprise-accounts-config-'), 'config.json');
  writeFileSync(configFile, JSON.stringify({ plans: { two: { requests_per_minute: 6000, burst: 10_000, max_entries: 2 } } }));
  const env = { REPRISE_DATA_DIR: dir, REPRISE_EMBED_WORKERS: '1', REPRISE_CONFIG: configFile };
  let server: ServerProcess | null = null;
  after(async () => {
    await server?.stop('SIGKILL');
  });

  const keyOf = async (account: string, plan = 'pro'): Promise<string> => {
    const created = await runCli(['keys', 'create', '--account', account, '--plan', plan, '--json'], env);
    assert.equal(created.code, 0, created.stderr);
    return (JSON.parse(created.stdout) as { key: string }).key;
  };

  test("delete: the account's keys and dashboard sessions are refused at once, its data is gone, another account's is kept", async () => {
    server = await startServerProcess(env, undefined, { keepOutput: true });
    const url = server.url;
    const leaving = await keyOf('leaving');
    const staying = await keyOf('staying');
    // The same conversation cached by both accounts, with answers of their own.
    for (const [key, answer] of [
      [leaving, 'Eight (leaving).'],
      [staying, 'Eight (staying).'],
    ] as const) {
      const stored = await api(url, 'POST', '/api/v1/store', key, { messages: SPIDER, answer });
      assert.equal(stored.json.stored, true);
    }
    for (const q of ['What is the boiling point of water?', 'Who wrote Hamlet?']) {
      assert.equal((await api(url, 'POST', '/api/v1/store', leaving, { messages: [user(q)], answer: 'secret of leaving' })).status, 200);
    }
    assert.equal((await api(url, 'POST', '/api/v1/check', leaving, { messages: SPIDER })).json.answer, 'Eight (leaving).');
    const password = await runCli(['accounts', 'set-password', 'leaving', '--password-stdin'], env, 'correct horse battery\n');
    assert.equal(password.code, 0, password.stderr);
    const login = await fetch(`${url}/dashboard/api/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ account: 'leaving', password: 'correct horse battery' }),
    });
    assert.equal(login.status, 200, await login.clone().text());
    const cookie = (login.headers.get('set-cookie') ?? '').split(';')[0] as string;
    const me = () => fetch(`${url}/dashboard/api/me`, { headers: { cookie } });
    assert.equal((await me()).status, 200);
    const accounts = JSON.parse((await runCli(['accounts', 'list', '--json'], env)).stdout) as { id: string; name: string }[];
    const id = accounts.find((a) => a.name === 'leaving')?.id ?? '';
    // Its counters are written within a second.
    assert.ok(await eventually(async () => rowsOf(dir, id).usage > 0), 'usage written');

    // A script that forgets --yes deletes nothing.
    const unconfirmed = await runCli(['accounts', 'delete', 'leaving'], env);
    assert.equal(unconfirmed.code, 2);
    assert.match(unconfirmed.stderr, /^reprise: accounts delete leaving: pass --yes to delete it and all its data/);
    assert.equal((await api(url, 'GET', '/api/v1/usage', leaving)).status, 200);

    const deleted = await runCli(['accounts', 'delete', 'leaving', '--yes', '--json'], env);
    assert.equal(deleted.code, 0, deleted.stderr);
    const report = JSON.parse(deleted.stdout) as { account: string; id: string; deleted: Record<string, number> };
    assert.equal(report.account, 'leaving');
    assert.equal(report.id, id);
    assert.deepEqual(
      { ...report.deleted, usage_buckets: report.deleted.usage_buckets ? 1 : 0 },
      {
        keys: 1,
        entries: 3,
        usage_buckets: 1,
        sessions: 1,
      },
    );
    for (const [method, route, body] of [
      ['GET', '/api/v1/usage', undefined],
      ['POST', '/api/v1/check', { messages: SPIDER }],
      ['POST', '/api/v1/store', { messages: SPIDER, answer: 'again' }],
    ] as const) {
      const refused = await api(url, method, route, leaving, body);
      assert.equal(refused.status, 401, route);
      assert.equal(refused.json.error.code, 'INVALID_API_KEY', route);
    }
    assert.equal((await me()).status, 401);
    // The other account's entry of the same conversation still hits, exactly and semantically.
    assert.equal((await api(url, 'POST', '/api/v1/check', staying, { messages: SPIDER })).json.answer, 'Eight (staying).');
    const semantic = await api(url, 'POST', '/api/v1/check', staying, { messages: SPIDERS, similarity_threshold: 0.6 });
    assert.equal(semantic.json.cache_type, 'semantic', JSON.stringify(semantic.json));
    assert.equal(semantic.json.answer, 'Eight (staying).');
    assert.deepEqual(rowsOf(dir, id), NONE);
    // The running server drops the account's vectors from its index (the CLI is another process).
    assert.ok(await eventually(async () => vectorsForgotten(server!).includes(3)), server.stdout().slice(-2000));
    // Deleted once.
    const again = await runCli(['accounts', 'delete', 'leaving', '--yes'], env);
    assert.equal(again.code, 1);
    assert.equal(again.stderr.trim(), 'reprise: no account named leaving');

    // Nothing comes back after a restart: not the counters the server still held, not the vectors
    // through the index snapshot saved at shutdown.
    assert.equal(await server.stop('SIGTERM'), 0);
    assert.deepEqual(rowsOf(dir, id), NONE);
    server = await startServerProcess(env, undefined, { keepOutput: true });
    assert.deepEqual(
      { vectors: listening(server).vectors, from_snapshot: listening(server).vectors_from_snapshot },
      { vectors: 1, from_snapshot: 1 },
    );
    assert.equal((await api(server.url, 'GET', '/api/v1/usage', leaving)).status, 401);
    // An account made again under the name starts empty.
    const anew = await keyOf('leaving');
    const miss = await api(server.url, 'POST', '/api/v1/check', anew, { messages: SPIDER });
    assert.equal(miss.json.cache_hit, false, JSON.stringify(miss.json));
    const usage = await api(server.url, 'GET', '/api/v1/usage', anew);
    assert.equal(usage.json.total_requests, 1);
    assert.equal((await api(server.url, 'GET', '/api/v1/entries', anew)).json.pagination.total, 0);
  });

  test('delete while the server is stopped: the vectors its snapshot holds are dropped at the next start', async () => {
    assert.ok(server);
    const key = await keyOf('stopped-then-deleted');
    assert.equal((await api(server.url, 'POST', '/api/v1/store', key, { messages: SPIDER, answer: 'Eight.' })).status, 200);
    const before = listening(server).vectors_from_snapshot ?? 0;
    assert.equal(await server.stop('SIGTERM'), 0);
    const deleted = await runCli(['accounts', 'delete', 'stopped-then-deleted', '--yes'], env);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.match(
      deleted.stdout,
      /^Deleted account stopped-then-deleted \(acc_\w+\): 1 key, 1 cached entry, \d+ hours? of usage, 0 dashboard sessions\./,
    );
    server = await startServerProcess(env, undefined, { keepOutput: true });
    assert.deepEqual(vectorsForgotten(server), [1]);
    assert.equal(listening(server).vectors_from_snapshot, before);
  });

  test('delete of more entries than one batch, the CLI killed after its first: nothing of the account is served meanwhile, and the server finishes it at its next start', async () => {
    assert.ok(server);
    const large = await keyOf('large');
    const beside = await keyOf('beside');
    for (const [key, answer] of [
      [large, 'Eight (large).'],
      [beside, 'Eight (beside).'],
    ] as const) {
      assert.equal((await api(server.url, 'POST', '/api/v1/store', key, { messages: SPIDER, answer })).status, 200);
    }
    const accounts = JSON.parse((await runCli(['accounts', 'list', '--json'], env)).stdout) as { id: string; name: string }[];
    const id = accounts.find((a) => a.name === 'large')?.id ?? '';
    addEntries(dir, id, 2000);
    const entries = rowsOf(dir, id).entries;
    assert.equal(entries, 2001);

    const cli = startCli(['accounts', 'delete', 'large', '--yes', '--json'], { ...env, REPRISE_DELETE_BATCH: '100' });
    const said = await cli.stderrMatching(/cached entries of large removed/);
    cli.child.kill('SIGKILL');
    const killed = await cli.exited;
    assert.equal(killed.signal, 'SIGKILL', killed.stderr);
    assert.match(
      said,
      /^reprise: account large is deleted: its keys are refused and nothing of it is served\. Removing its 2,001 cached entries/,
    );
    assert.match(said, /\nreprise: 100 of 2,001 cached entries of large removed\n/);
    // Part of its rows are left, and nothing of it is seen: its key is refused, the account is not listed.
    const left = rowsOf(dir, id);
    assert.ok(left.entries > 0 && left.entries < entries, `${left.entries} entries left`);
    assert.deepEqual({ ...left, entries: 0, usage: 0 }, NONE);
    for (const [method, route, body] of [
      ['POST', '/api/v1/check', { messages: SPIDER }],
      ['POST', '/api/v1/store', { messages: SPIDER, answer: 'again' }],
    ] as const) {
      assert.equal((await api(server.url, method, route, large, body)).status, 401, route);
    }
    const listed = JSON.parse((await runCli(['accounts', 'list', '--json'], env)).stdout) as { name: string }[];
    assert.ok(!listed.some((a) => a.name === 'large'));
    assert.equal((await api(server.url, 'POST', '/api/v1/check', beside, { messages: SPIDER })).json.answer, 'Eight (beside).');

    // The server removes the rest when it starts; the other account keeps its entry.
    assert.equal(await server.stop('SIGTERM'), 0);
    server = await startServerProcess(env, undefined, { keepOutput: true });
    assert.ok(await eventually(async () => rowsOf(dir, id).entries === 0), `${rowsOf(dir, id).entries} entries left`);
    assert.deepEqual(rowsOf(dir, id), NONE);
    assert.ok(
      await eventually(async () => server!.stdout().includes('the rest of deleted accounts is removed from the database')),
      server.stdout().slice(-2000),
    );
    assert.equal((await api(server.url, 'POST', '/api/v1/check', beside, { messages: SPIDER })).json.answer, 'Eight (beside).');
  });

  test('delete while another process removes the rows of deleted accounts: the CLI waits for it, then reports the deletion', async () => {
    const key = await keyOf('queued');
    assert.equal((await api(server!.url, 'POST', '/api/v1/store', key, { messages: SPIDER, answer: 'Eight.' })).status, 200);
    const accounts = JSON.parse((await runCli(['accounts', 'list', '--json'], env)).stdout) as { id: string; name: string }[];
    const id = accounts.find((a) => a.name === 'queued')?.id ?? '';
    addEntries(dir, id, 300);
    // What a server does while it finishes a deletion.
    const held = lockFile(path.join(dir, 'reprise.db.purge-lock'));
    assert.ok(held);
    const cli = startCli(['accounts', 'delete', 'queued', '--yes', '--json'], { ...env, REPRISE_DELETE_BATCH: '100' });
    try {
      await cli.stderrMatching(/another process is removing the rows of deleted accounts; waiting for it/);
      // Gone for everyone while it waits.
      assert.equal((await api(server!.url, 'GET', '/api/v1/usage', key)).status, 401);
      assert.equal(rowsOf(dir, id).entries, 301);
    } finally {
      held.release();
    }
    const done = await cli.exited;
    assert.equal(done.code, 0, done.stderr);
    assert.equal((JSON.parse(done.stdout) as { deleted: { entries: number } }).deleted.entries, 301);
    assert.match(done.stderr, /reprise: 301 of 301 cached entries of queued removed\n$/);
    assert.deepEqual(rowsOf(dir, id), NONE);
  });

  test('delete while another process holds the write lock past the wait of a batch: the CLI says so in one line, and the account stays gone', async () => {
    const key = await keyOf('held');
    assert.equal((await api(server!.url, 'POST', '/api/v1/store', key, { messages: SPIDER, answer: 'Eight.' })).status, 200);
    const accounts = JSON.parse((await runCli(['accounts', 'list', '--json'], env)).stdout) as { id: string; name: string }[];
    const id = accounts.find((a) => a.name === 'held')?.id ?? '';
    addEntries(dir, id, 2000);
    const cli = startCli(['accounts', 'delete', 'held', '--yes', '--json'], { ...env, REPRISE_DELETE_BATCH: '100' });
    await cli.stderrMatching(/Removing its 2,001 cached entries/);
    // What an operator's `sqlite3 reprise.db` with a transaction left open does, between two batches.
    const other = new Database(path.join(dir, 'reprise.db'));
    let done;
    try {
      other.pragma('busy_timeout = 5000');
      other.exec('BEGIN IMMEDIATE');
      done = await cli.exited;
      other.exec('ROLLBACK');
    } finally {
      other.close();
    }
    assert.equal(done.code, 1, done.stderr);
    assert.doesNotMatch(done.stderr, /\n\s+at /);
    assert.match(
      done.stderr,
      new RegExp(
        `\\nreprise: account held is deleted: its keys are refused and nothing of it is served; removing its cached entries stopped \\(the store at REPRISE_DATA_DIR \\(${path.join(dir, 'reprise.db')}\\) cannot be written now: database is locked\\): the server finishes it`,
      ),
    );
    assert.equal(done.stdout, '');
    assert.equal((await api(server!.url, 'GET', '/api/v1/usage', key)).status, 401);
  });

  test('set-plan: a running server applies the new plan at the next request', async () => {
    assert.ok(server);
    const key = await keyOf('planned', 'free');
    assert.equal((await api(server.url, 'GET', '/api/v1/usage', key)).headers.get('x-ratelimit-limit'), '60');
    const changed = await runCli(['accounts', 'set-plan', 'planned', 'pro'], env);
    assert.equal(changed.code, 0, changed.stderr);
    assert.equal(
      changed.stdout.trim(),
      'Account planned: plan free → pro (600 requests/minute, burst 1000; 100,000 entries, 1 GiB), for all its keys.',
    );
    assert.equal(changed.stderr, '');
    assert.equal((await api(server.url, 'GET', '/api/v1/usage', key)).headers.get('x-ratelimit-limit'), '600');
    const same = await runCli(['accounts', 'set-plan', 'planned', 'pro'], env);
    assert.equal(same.code, 0, same.stderr);
    assert.equal(same.stdout.trim(), 'Account planned is on plan pro already (600 requests/minute, burst 1000; 100,000 entries, 1 GiB).');
    const listed = JSON.parse((await runCli(['accounts', 'list', '--json'], env)).stdout) as { name: string; plan: string }[];
    assert.equal(listed.find((a) => a.name === 'planned')?.plan, 'pro');
  });

  test("set-plan to a plan of smaller storage limits: the running server refuses the next store of a new conversation, and the CLI says the account keeps more than the plan allows; accounts list shows each account's storage", async () => {
    assert.ok(server);
    const url = server.url;
    const key = await keyOf('shrinking', 'pro');
    const messages = ['What is the capital of France?', 'What is the capital of Spain?', 'What is the capital of Italy?'];
    for (const q of messages)
      assert.equal((await api(url, 'POST', '/api/v1/store', key, { messages: [user(q)], answer: 'A city.' })).status, 200);
    const bytes = (await api(url, 'GET', '/api/v1/usage', key)).json.storage.stored_bytes as number;
    const storageOf = async (name: string) => {
      const listed = await runCli(['accounts', 'list', '--json'], env);
      assert.equal(listed.code, 0, listed.stderr);
      return (JSON.parse(listed.stdout) as { name: string; storage: unknown }[]).find((a) => a.name === name)?.storage;
    };
    assert.deepEqual(await storageOf('shrinking'), { entries: 3, stored_bytes: bytes, max_entries: 100_000, max_stored_bytes: 1024 ** 3 });

    const smaller = await runCli(['accounts', 'set-plan', 'shrinking', 'two'], env);
    assert.equal(smaller.code, 0, smaller.stderr);
    assert.equal(
      smaller.stdout.trim(),
      'Account shrinking: plan pro → two (6000 requests/minute, burst 10000; 2 entries, 100 MiB), for all its keys.',
    );
    assert.equal(
      smaller.stderr,
      'reprise: account shrinking keeps 3 entries, more than the 2 plan two allows: its stores of new conversations are refused ' +
        'until it deletes entries (nothing was removed)\n',
    );
    // At once, on the running server.
    const refused = await api(url, 'POST', '/api/v1/store', key, { messages: [user('What is the capital of Peru?')], answer: 'Lima.' });
    assert.equal(refused.status, 403);
    assert.deepEqual(refused.json.error.details, { limit: 'max_entries', allowed: 2, current: 3, adding: 1 });
    assert.deepEqual(await storageOf('shrinking'), { entries: 3, stored_bytes: bytes, max_entries: 2, max_stored_bytes: 100 * 1024 ** 2 });
    const table = await runCli(['accounts', 'list'], env);
    assert.equal(table.code, 0, table.stderr);
    const [header, ...rows] = table.stdout.trim().split('\n');
    assert.match(header ?? '', /^ID +NAME +PLAN +ENTRIES +STORED +CREATED$/);
    assert.match(rows.find((r) => r.includes(' shrinking ')) ?? '', new RegExp(` two +3 of 2 +${bytes} B of 100 MiB +20\\d\\d-`));

    const back = await runCli(['accounts', 'set-plan', 'shrinking', 'unlimited'], env);
    assert.equal(back.code, 0, back.stderr);
    assert.equal(
      back.stdout.trim(),
      'Account shrinking: plan two → unlimited (counted, never refused; no storage limits), for all its keys.',
    );
    assert.equal(back.stderr, '');
    const stored = await api(url, 'POST', '/api/v1/store', key, { messages: [user('What is the capital of Peru?')], answer: 'Lima.' });
    assert.equal(stored.status, 200, JSON.stringify(stored.json));
    assert.deepEqual(await storageOf('shrinking'), {
      entries: 4,
      stored_bytes: bytes + Buffer.byteLength('[{"role":"user","content":"What is the capital of Peru?"}]Lima.'),
      max_entries: null,
      max_stored_bytes: null,
    });
    assert.match(
      (await runCli(['accounts', 'list'], env)).stdout.split('\n').find((r) => r.includes(' shrinking ')) ?? '',
      / unlimited +4 +\d+ B +20\d\d-/,
    );
  });

  test('errors: an unknown plan as keys create says it, an unknown account in one line', async () => {
    const plan = await runCli(['accounts', 'set-plan', 'planned', 'platinum'], env);
    assert.equal(plan.code, 2);
    assert.match(plan.stderr, /^reprise: accounts set-plan: unknown plan platinum; known plans: free, pro, enterprise, unlimited, two\n/);
    assert.match(plan.stderr, /Usage: reprise/);
    const inherited = await runCli(['accounts', 'set-plan', 'planned', 'toString'], env);
    assert.equal(inherited.code, 2);
    assert.match(inherited.stderr, /unknown plan toString/);
    for (const args of [
      ['accounts', 'set-plan', 'nobody', 'pro'],
      ['accounts', 'delete', 'nobody', '--yes'],
    ]) {
      const res = await runCli(args, env);
      assert.equal(res.code, 1, args.join(' '));
      assert.equal(res.stderr, 'reprise: no account named nobody\n', args.join(' '));
    }
    for (const args of [
      ['accounts', 'set-plan', 'planned'],
      ['accounts', 'delete'],
      ['accounts', 'delete', 'planned', 'extra', '--yes'],
      ['accounts', 'remove', 'planned'],
    ]) {
      const res = await runCli(args, env);
      assert.equal(res.code, 2, args.join(' '));
      assert.match(res.stderr, /Usage: reprise/, args.join(' '));
    }
    const listed = JSON.parse((await runCli(['accounts', 'list', '--json'], env)).stdout) as { name: string; plan: string }[];
    assert.equal(listed.find((a) => a.name === 'planned')?.plan, 'pro');
  });
});

describe(
  'accounts deleted and re-planned with the CLI in a cluster',
  { skip: skipReason('DATABASE_URL') || skipReason('REDIS_URL') },
  () => {
    const { schema, drop } = freshSchema();
    const env = {
      REPRISE_DATA_DIR: tempDir(),
      REPRISE_EMBEDDER: 'none',
      DATABASE_URL: serviceUrl('DATABASE_URL') as string,
      REPRISE_PG_SCHEMA: schema,
      REDIS_URL: serviceUrl('REDIS_URL') as string,
      REPRISE_REDIS_PREFIX: uniquePrefix(),
    };
    let a: TestApp;
    let b: TestApp;
    before(async () => {
      const embedder = await sharedEmbedder();
      a = await startTestApp({ config: loadConfig(env), embedder, keepData: true });
      b = await startTestApp({ config: loadConfig(env), embedder, keepData: true });
    });
    after(async () => {
      await a?.close();
      await b?.close();
      await drop();
      await closeSharedEmbedder();
    });

    test("a delete on the database reaches every node: the keys are refused, the vectors leave each node's index", async () => {
      const leaving = await a.key('leaving');
      const staying = await a.key('staying');
      for (const [key, answer] of [
        [leaving, 'Eight (leaving).'],
        [staying, 'Eight (staying).'],
      ] as const) {
        assert.equal((await a.post('/api/v1/store', { messages: SPIDER, answer }, key)).json().stored, true);
        // Each node serves it semantically: it is in both indexes.
        for (const node of [a, b]) {
          const served = await eventually(
            async () => (await node.post('/api/v1/check', { messages: SPIDERS, similarity_threshold: 0.6 }, key)).json().answer === answer,
          );
          assert.ok(served, answer);
        }
      }
      // Both nodes remember the key's lookup.
      for (const node of [a, b]) assert.equal((await node.get('/api/v1/usage', leaving)).statusCode, 200);
      const sizes = [a.runtime.index.size, b.runtime.index.size];

      const deleted = await runCli(['accounts', 'delete', 'leaving', '--yes'], env);
      assert.equal(deleted.code, 0, deleted.stderr);
      assert.match(deleted.stdout, /^Deleted account leaving \(acc_\w+\): 1 key, 1 cached entry, /);
      for (const node of [a, b]) {
        assert.ok(await eventually(async () => (await node.get('/api/v1/usage', leaving)).statusCode === 401), 'the key is refused');
        const refused = await node.post('/api/v1/check', { messages: SPIDER }, leaving);
        assert.equal(refused.json().error.code, 'INVALID_API_KEY');
      }
      assert.ok(await eventually(async () => a.runtime.index.size === (sizes[0] ?? 0) - 1 && b.runtime.index.size === (sizes[1] ?? 0) - 1));
      for (const node of [a, b]) {
        const hit = (await node.post('/api/v1/check', { messages: SPIDERS, similarity_threshold: 0.6 }, staying)).json();
        assert.equal(hit.answer, 'Eight (staying).', JSON.stringify(hit));
      }
      assert.equal(await a.runtime.ctx.store.getAccountByName('leaving'), null);
    });

    test("set-plan reaches every node's rate limiter and storage limits", async () => {
      const key = await a.key('planned', 'free');
      for (const node of [a, b]) {
        const usage = await node.get('/api/v1/usage', key);
        assert.equal(usage.headers['x-ratelimit-limit'], '60');
        assert.equal(usage.json().storage.max_entries, 10_000);
      }
      const changed = await runCli(['accounts', 'set-plan', 'planned', 'pro'], env);
      assert.equal(changed.code, 0, changed.stderr);
      assert.match(changed.stdout, /plan free → pro/);
      for (const node of [a, b]) {
        assert.ok(await eventually(async () => (await node.get('/api/v1/usage', key)).headers['x-ratelimit-limit'] === '600'));
        assert.equal((await node.get('/api/v1/usage', key)).json().storage.max_entries, 100_000);
      }
    });
  },
);
