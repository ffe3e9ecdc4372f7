import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, createServer as createHttpServer, request } from 'node:http';
import { connect, createServer, type AddressInfo } from 'node:net';
import { once } from 'node:events';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { lockFile } from '../src/store/data-dir-lock.ts';
import { tempDir } from './helpers.ts';
import { eventually } from './services.ts';
import { api, childEnv, ROOT, runCli, startCli, startServerProcess, type ServerProcess } from './process.ts';

const user = (content: string) => ({ role: 'user', content });

describe('the real server, as a user runs it', () => {
  const dir = tempDir('reprise-e2e-');
  const env = { REPRISE_DATA_DIR: dir, REPRISE_EMBED_WORKERS: '1' };
  let server: ServerProcess | null = null;
  after(async () => {
    await server?.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  test('first start prints a bootstrap key; miss → store → exact hit → semantic hit → usage', async () => {
    server = await startServerProcess(env);
    const key = /\b(rp_live_[0-9A-Za-z]{40})\b/.exec(server.stdout())?.[1];
    assert.ok(key, 'bootstrap key printed');
    assert.ok(server.stdout().includes(`curl -s ${server.url}/api/v1/health`), server.stdout());

    const health = await api(server.url, 'GET', '/api/v1/health', key);
    assert.equal(health.status, 200);
    assert.ok(health.headers.get('x-ratelimit-limit'));

    const question = [user('What is the capital city of Australia?')];
    const miss = await api(server.url, 'POST', '/api/v1/check', key, { messages: question });
    assert.equal(miss.json.cache_hit, false);
    const stored = await api(server.url, 'POST', '/api/v1/store', key, {
      messages: question,
      answer: 'Canberra.',
      model: 'gpt-4o',
      tokens_used: 12,
    });
    assert.equal(stored.json.stored, true);
    const exact = await api(server.url, 'POST', '/api/v1/check', key, { messages: question });
    assert.equal(exact.json.cache_type, 'exact');
    const semantic = await api(server.url, 'POST', '/api/v1/check', key, {
      messages: [user("What's the capital city of Australia?")],
    });
    assert.equal(semantic.json.cache_hit, true, JSON.stringify(semantic.json));
    assert.equal(semantic.json.cache_type, 'semantic');
    assert.equal(semantic.json.answer, 'Canberra.');
    const usage = await api(server.url, 'GET', '/api/v1/usage', key);
    assert.equal(usage.json.total_requests, 3);
    assert.equal(usage.json.cache_hits, 2);
    assert.equal(usage.json.exact_hits, 1);
    assert.equal(usage.json.semantic_hits, 1);
    assert.equal(usage.json.cache_misses, 1);
  });

  test('the CLI manages keys while the server runs; a revoked key is refused at once', async () => {
    assert.ok(server);
    const created = await runCli(['keys', 'create', '--account', 'acme', '--plan', 'pro', '--json'], env);
    assert.equal(created.code, 0, created.stderr);
    const k = JSON.parse(created.stdout) as { key: string; key_id: string; account: string; plan: string };
    assert.equal(k.account, 'acme');
    assert.equal(k.plan, 'pro');
    const ok = await api(server.url, 'GET', '/api/v1/usage', k.key);
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get('x-ratelimit-limit'), '600');

    const list = await runCli(['keys', 'list', '--account', 'acme'], env);
    assert.equal(list.code, 0);
    assert.match(list.stdout, new RegExp(k.key_id));
    assert.match(list.stdout, /active/);
    assert.doesNotMatch(list.stdout, new RegExp(k.key));

    const revoked = await runCli(['keys', 'revoke', k.key_id], env);
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.match(revoked.stdout, /^Revoked key /);
    const again = await runCli(['keys', 'revoke', k.key_id], env);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /was already revoked at /);
    const refused = await api(server.url, 'GET', '/api/v1/usage', k.key);
    assert.equal(refused.status, 401);
    assert.equal(refused.json.error.code, 'INVALID_API_KEY');
  });

  test('acknowledged stores survive SIGKILL; usage survives SIGTERM; no second bootstrap key', async () => {
    assert.ok(server);
    const created = await runCli(['keys', 'create', '--account', 'durable', '--json'], env);
    const key = (JSON.parse(created.stdout) as { key: string }).key;
    const stores = await Promise.all(
      Array.from({ length: 25 }, (_, i) =>
        api(server!.url, 'POST', '/api/v1/store', key, { messages: [user(`durable question ${i}`)], answer: `answer ${i}` }),
      ),
    );
    assert.ok(stores.every((s) => s.json.stored === true));
    await server.stop('SIGKILL');

    server = await startServerProcess(env);
    assert.doesNotMatch(server.stdout(), /rp_live_/);
    for (let i = 0; i < 25; i++) {
      const hit = await api(server.url, 'POST', '/api/v1/check', key, { messages: [user(`durable question ${i}`)] });
      assert.equal(hit.json.answer, `answer ${i}`);
    }
    assert.equal(await server.stop('SIGTERM'), 0);

    server = await startServerProcess(env);
    const usage = await api(server.url, 'GET', '/api/v1/usage', key);
    assert.equal(usage.json.total_requests, 25);
    assert.equal(usage.json.exact_hits, 25);
  });

  test('the vector index saved at shutdown is loaded at start, and again after a crash, with the stores and deletes made since', async () => {
    assert.ok(server);
    const created = await runCli(['keys', 'create', '--account', 'snapshot', '--json'], env);
    const key = (JSON.parse(created.stdout) as { key: string }).key;
    const spider = await api(server.url, 'POST', '/api/v1/store', key, {
      messages: [user('How many legs does a spider have?')],
      answer: 'Eight.',
    });
    await api(server.url, 'POST', '/api/v1/store', key, {
      messages: [user('Which planet is known as the Red Planet?')],
      answer: 'Mars.',
    });
    assert.equal(await server.stop('SIGTERM'), 0);
    assert.ok(existsSync(path.join(dir, 'index', 'manifest.json')), 'index snapshot written at SIGTERM');

    const fromSnapshot = (started: ServerProcess) => {
      const listening = started
        .stdout()
        .split('\n')
        .find((l) => l.includes('Reprise is listening'));
      return (JSON.parse(listening ?? '{}') as { vectors_from_snapshot?: number }).vectors_from_snapshot ?? -1;
    };
    server = await startServerProcess(env);
    assert.ok(fromSnapshot(server) >= 3, server.stdout());
    const kept = await api(server.url, 'POST', '/api/v1/check', key, {
      messages: [user('How many legs do spiders have?')],
      similarity_threshold: 0.6,
    });
    assert.equal(kept.json.answer, 'Eight.', JSON.stringify(kept.json));
    await api(server.url, 'POST', '/api/v1/store', key, {
      messages: [user('What is the boiling point of water at sea level?')],
      answer: '100 °C.',
    });
    const deleted = await api(server.url, 'DELETE', `/api/v1/entries/${spider.json.entry_id}`, key);
    assert.equal(deleted.status, 200);
    await server.stop('SIGKILL');

    // The snapshot of the last shutdown is loaded again, and the store and the delete made after
    // it are read from the database.
    server = await startServerProcess(env);
    const loadedFrom = fromSnapshot(server);
    assert.ok(loadedFrom >= 3, server.stdout());
    // Whole: the snapshot's vectors, less the deleted one, and the stored one.
    const whole = (started: ServerProcess) =>
      (
        JSON.parse(
          started
            .stdout()
            .split('\n')
            .find((l) => l.includes('the semantic index is loaded')) ?? '{}',
        ) as { vectors?: number }
      ).vectors;
    assert.ok(await eventually(async () => whole(server as ServerProcess) !== undefined), server.stdout());
    assert.equal(whole(server), loadedFrom);
    const water = await api(server.url, 'POST', '/api/v1/check', key, {
      messages: [user('At sea level, what is the boiling point of water?')],
      similarity_threshold: 0.6,
    });
    assert.equal(water.json.answer, '100 °C.', JSON.stringify(water.json));
    const mars = await api(server.url, 'POST', '/api/v1/check', key, {
      messages: [user('Which planet is called the Red Planet?')],
      similarity_threshold: 0.6,
    });
    assert.equal(mars.json.answer, 'Mars.', JSON.stringify(mars.json));
    const gone = await api(server.url, 'POST', '/api/v1/check', key, {
      messages: [user('How many legs do spiders have?')],
      similarity_threshold: 0.6,
    });
    assert.equal(gone.json.cache_hit, false, JSON.stringify(gone.json));
    // And once more after a clean stop: the new snapshot holds the changes.
    assert.equal(await server.stop('SIGTERM'), 0);
    server = await startServerProcess(env);
    const again = await api(server.url, 'POST', '/api/v1/check', key, {
      messages: [user('How many legs do spiders have?')],
      similarity_threshold: 0.6,
    });
    assert.equal(again.json.cache_hit, false, JSON.stringify(again.json));
    const waterAgain = await api(server.url, 'POST', '/api/v1/check', key, {
      messages: [user('At sea level, what is the boiling point of water?')],
      similarity_threshold: 0.6,
    });
    assert.equal(waterAgain.json.answer, '100 °C.', JSON.stringify(waterAgain.json));
  });

  test('one log line per request, written by the time the server has stopped, without the key', async () => {
    assert.ok(server);
    await server.stop('SIGKILL');
    const logged = await startServerProcess({ ...env, LOG_LEVEL: 'info' }, undefined, { keepOutput: true });
    server = logged;
    const created = await runCli(['keys', 'create', '--account', 'logged', '--json'], env);
    const key = (JSON.parse(created.stdout) as { key: string }).key;
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) {
      const res = await fetch(`${logged.url}/api/v1/check`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': `logged-${i}` },
        body: JSON.stringify({ messages: [user(`logged question ${i}`)], cache_types: ['exact'] }),
      });
      assert.equal(res.status, 200);
      ids.push(res.headers.get('x-request-id') ?? '');
    }
    assert.equal(await logged.stop('SIGTERM'), 0);
    const lines = logged
      .stdout()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const completed = lines.filter((l) => l.msg === 'request completed');
    assert.deepEqual(
      completed.map((l) => l.reqId),
      ids,
    );
    assert.deepEqual(
      { method: completed[0]?.method, url: completed[0]?.url, status: completed[0]?.status },
      { method: 'POST', url: '/api/v1/check', status: 200 },
    );
    assert.equal(typeof completed[0]?.ms, 'number');
    // The fields in their order: the request id where a child logger puts it, after the process's.
    for (const l of completed)
      assert.deepEqual(Object.keys(l), ['level', 'time', 'pid', 'hostname', 'reqId', 'method', 'url', 'status', 'ms', 'msg']);
    assert.ok(!lines.some((l) => l.msg === 'incoming request'));
    assert.doesNotMatch(logged.stdout(), new RegExp(key));
    server = await startServerProcess(env);
  });

  test('a second SIGTERM during shutdown does not cut it short: the request in flight is answered', async () => {
    assert.ok(server);
    await server.stop('SIGKILL');
    const stopping = await startServerProcess(env, undefined, { keepOutput: true });
    server = stopping;
    const created = await runCli(['keys', 'create', '--account', 'patient', '--json'], env);
    const key = (JSON.parse(created.stdout) as { key: string }).key;
    const body = JSON.stringify({ messages: [user('stored while the server stops')], answer: 'kept' });
    // A store whose body is still on its way when the signals come.
    const { hostname, port } = new URL(stopping.url);
    const req = request({
      host: hostname,
      port,
      method: 'POST',
      path: '/api/v1/store',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    const answered = new Promise<{ status: number; text: string }>((resolve, reject) => {
      req.on('response', (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      });
      req.on('error', reject);
    });
    await new Promise((resolve) => req.write(body.slice(0, 10), resolve));
    stopping.child.kill('SIGTERM');
    assert.ok(await eventually(async () => stopping.stdout().includes('shutting down')));
    stopping.child.kill('SIGTERM');
    assert.ok(await eventually(async () => stopping.stdout().includes('already shutting down')));
    req.end(body.slice(10));
    const res = await answered;
    assert.equal(res.status, 200, res.text);
    assert.equal(JSON.parse(res.text).stored, true);
    const [code] = (await once(stopping.child, 'exit')) as [number | null];
    assert.equal(code, 0);
    server = await startServerProcess(env);
  });

  test('a second server on the same data directory is refused in one line; the first keeps serving', async () => {
    assert.ok(server);
    const created = await runCli(['keys', 'create', '--account', 'one-server', '--json'], env);
    const key = (JSON.parse(created.stdout) as { key: string }).key;
    // Two servers on one database would each keep a vector index the other's stores never reach,
    // and each save it at shutdown over the other's.
    const refused = await startServerProcess(env).then(
      async (second) => {
        await second.stop('SIGKILL');
        return 'started';
      },
      (err: Error) => err.message,
    );
    assert.match(refused, /server exited with 1/);
    assert.match(refused, /reprise: cannot open the store at REPRISE_DATA_DIR .*another Reprise server is running on the data directory/);
    assert.doesNotMatch(refused, /\n\s+at /);
    assert.doesNotMatch(refused, /rp_live_/);
    const stored = await api(server.url, 'POST', '/api/v1/store', key, {
      messages: [user('What is the capital city of Canada?')],
      answer: 'Ottawa.',
    });
    assert.equal(stored.json.stored, true);
    const hit = await api(server.url, 'POST', '/api/v1/check', key, { messages: [user("What's the capital city of Canada?")] });
    assert.equal(hit.json.cache_type, 'semantic', JSON.stringify(hit.json));
  });

  test('--help after a command shows the help and does nothing else', async () => {
    const nowhere = { ...env, REPRISE_DATA_DIR: path.join(dir, 'helped') };
    for (const args of [
      ['--help'],
      ['keys', '--help'],
      ['keys', 'create', '--help'],
      ['keys', 'create', '--account', 'x', '-h'],
      ['accounts', 'list', '--help'],
      ['serve', '--help'],
    ]) {
      const res = await runCli(args, nowhere);
      assert.equal(res.code, 0, `${args.join(' ')}: ${res.stderr}`);
      assert.match(res.stdout, /^Usage: reprise <command>/, args.join(' '));
      assert.equal(res.stderr, '', args.join(' '));
    }
    assert.equal(existsSync(path.join(dir, 'helped')), false);
  });

  test('the CLI explains bad usage', async () => {
    const res = await runCli(['keys', 'create'], env);
    assert.equal(res.code, 2);
    assert.match(res.stderr, /--account/);
    const plan = await runCli(['keys', 'create', '--account', 'x', '--plan', 'platinum'], env);
    assert.equal(plan.code, 2);
    assert.match(plan.stderr, /unknown plan platinum/);
    // A name every object has is not a plan either.
    const inherited = await runCli(['keys', 'create', '--account', 'x', '--plan', 'toString'], env);
    assert.equal(inherited.code, 2);
    assert.match(inherited.stderr, /unknown plan toString/);
    const level = await runCli(['serve'], { ...env, LOG_LEVEL: 'verbose' });
    assert.equal(level.code, 2);
    assert.match(level.stderr, /LOG_LEVEL: expected one of/);
    // A data directory that cannot be one is named, without a stack trace.
    const file = path.join(dir, 'a-file');
    writeFileSync(file, '');
    for (const args of [['serve'], ['keys', 'create', '--account', 'x']]) {
      const unopened = await runCli(args, { ...env, REPRISE_DATA_DIR: path.join(file, 'data') });
      assert.equal(unopened.code, 1, args.join(' '));
      assert.match(unopened.stderr, /cannot open the store at REPRISE_DATA_DIR/);
      assert.doesNotMatch(unopened.stderr, /\n\s+at /);
      // The file itself named as the data directory: said so, not as the system's EEXIST of a mkdir.
      const onFile = await runCli(args, { ...env, REPRISE_DATA_DIR: file });
      assert.equal(onFile.code, 1, args.join(' '));
      assert.equal(
        onFile.stderr.trim().split('\n').at(-1),
        `reprise: cannot open the store at REPRISE_DATA_DIR (${path.join(file, 'reprise.db')}): ${file} is a file, not a directory`,
      );
    }
    // Only `keys create` starts a database; elsewhere a data directory without one is named.
    const nowhere = { ...env, REPRISE_DATA_DIR: path.join(dir, 'mistyped') };
    const noDatabase = await runCli(['keys', 'list', '--account', 'x'], nowhere);
    assert.equal(noDatabase.code, 1);
    assert.equal(
      noDatabase.stderr.trim(),
      `reprise: no database at ${path.join(dir, 'mistyped', 'reprise.db')} (REPRISE_DATA_DIR): start the server once, or check the path`,
    );
    assert.equal(existsSync(path.join(dir, 'mistyped', 'reprise.db')), false);
    const started = await runCli(['keys', 'create', '--account', 'first'], nowhere);
    assert.equal(started.code, 0, started.stderr);
    assert.match(started.stderr, /no database at .* yet; creating it/);
    // What cannot be done is one line and exit code 1; a command used wrongly also shows the help.
    const unknownAccount = await runCli(['keys', 'list', '--account', 'nobody'], env);
    assert.equal(unknownAccount.code, 1);
    assert.equal(unknownAccount.stderr.trim(), 'reprise: no account named nobody');
    const noPrompt = await runCli(['accounts', 'set-password', 'nobody'], env, 'a password never asked for\n');
    assert.equal(noPrompt.code, 1);
    assert.equal(noPrompt.stderr.trim(), 'reprise: no account named nobody');
    for (const args of [
      ['serve', '--port', '9000'],
      ['keys', 'create', '--account', 'x', 'stray'],
      ['keys', 'list', '--account', 'x', '--plan', 'pro'],
      ['keys', 'create', '--account', 'x', '--name', ''],
      ['accounts', 'list', 'extra'],
    ]) {
      const wrong = await runCli(args, env);
      assert.equal(wrong.code, 2, args.join(' '));
      assert.match(wrong.stderr, /Usage: reprise/, args.join(' '));
    }
    // Changing an existing account's plan says so.
    assert.equal((await runCli(['keys', 'create', '--account', 'planned', '--plan', 'pro'], env)).code, 0);
    const replanned = await runCli(['keys', 'create', '--account', 'planned', '--plan', 'free', '--json'], env);
    assert.equal(replanned.code, 0, replanned.stderr);
    assert.equal(JSON.parse(replanned.stdout).plan, 'free');
    assert.match(replanned.stderr, /the plan of account planned changed from pro to free, for all its keys/);
    // An embedding server that does not answer at start is named the same way.
    const noEmbedder = await runCli(['serve'], {
      ...env,
      REPRISE_DATA_DIR: path.join(dir, 'no-embedder'),
      REPRISE_EMBEDDER: 'http',
      REPRISE_EMBED_URL: 'http://127.0.0.1:9',
    });
    assert.equal(noEmbedder.code, 1);
    assert.match(noEmbedder.stderr, /cannot start the embedder \(REPRISE_EMBED_URL\)/);
    assert.doesNotMatch(noEmbedder.stderr, /\n\s+at /);
    // A port already taken is named in one line, and no key is printed for a server that did not start.
    const taken = createServer();
    taken.listen(0, '127.0.0.1');
    await once(taken, 'listening');
    const port = (taken.address() as AddressInfo).port;
    const fresh = { ...env, REPRISE_DATA_DIR: path.join(dir, 'port-taken'), PORT: String(port) };
    const inUse = await runCli(['serve'], fresh);
    taken.close();
    assert.equal(inUse.code, 1);
    assert.match(inUse.stderr, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port} \\(HOST, PORT\\): the port is in use`));
    assert.doesNotMatch(inUse.stderr, /\n\s+at /);
    assert.doesNotMatch(inUse.stdout, /rp_live_/);
    const bad = await runCli(['serve'], { ...env, PORT: 'eighty' });
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /PORT: expected an integer/);
  });
});

describe('npm start, as the README runs it', () => {
  test('SIGTERM to npm stops the server: its counters are written and the data directory is free again', async () => {
    const dir = tempDir('reprise-npm-start-');
    const npm = spawn('npm', ['start', '--silent'], {
      cwd: ROOT,
      env: childEnv({ HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', REPRISE_DATA_DIR: dir, REPRISE_EMBEDDER: 'none' }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    npm.stdout.setEncoding('utf8');
    const listening = new Promise<{ url: string; pid: number }>((resolve, reject) => {
      npm.stdout.on('data', (d: string) => {
        out += d;
        const line = out.split('\n').find((l) => l.includes('Reprise is listening'));
        if (line) resolve(JSON.parse(line) as { url: string; pid: number });
      });
      npm.once('exit', (code) => reject(new Error(`npm start exited with ${code}:\n${out}`)));
    });
    const { url, pid } = await listening;
    try {
      const key = /\b(rp_live_[0-9A-Za-z]{40})\b/.exec(out)?.[1] ?? '';
      assert.equal((await api(url, 'POST', '/api/v1/check', key, { messages: [user('Counted before the stop?')] })).status, 200);
      const exited = once(npm, 'exit');
      npm.kill('SIGTERM');
      await exited;
      // The server itself stopped: no other process holds the data directory.
      const lock = lockFile(path.join(dir, 'server.lock'));
      assert.ok(lock, `the server (pid ${pid}) still holds ${dir} after npm exited`);
      lock.release();
      assert.match(out, /"signal":"SIGTERM"[^\n]*"msg":"shutting down"/);
      const again = await startServerProcess({ REPRISE_DATA_DIR: dir, REPRISE_EMBEDDER: 'none' });
      try {
        assert.equal((await api(again.url, 'GET', '/api/v1/usage', key)).json.total_requests, 1);
      } finally {
        await again.stop();
      }
    } finally {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // stopped already
      }
    }
  });
});

describe('a server stopping while clients keep their connections open', () => {
  const dir = tempDir('reprise-e2e-kept-');
  const env = { REPRISE_DATA_DIR: dir, REPRISE_EMBED_WORKERS: '1' };
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('SIGTERM with a request in flight on a kept-alive connection: answered, the connection closed, and the server stops cleanly', async () => {
    const stopping = await startServerProcess(env);
    const created = await runCli(['keys', 'create', '--account', 'kept-alive', '--json'], env);
    const key = (JSON.parse(created.stdout) as { key: string }).key;
    const messages = [user('checked on a kept-alive connection while the server stops')];
    // A client (a proxy, a pool) that keeps its connections open as long as the server does.
    const agent = new Agent({ keepAlive: true });
    const { hostname, port } = new URL(stopping.url);
    const ask = (body: string) => {
      const req = request({
        host: hostname,
        port,
        agent,
        method: 'POST',
        path: '/api/v1/check',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      });
      const answered = new Promise<{ status: number }>((resolve, reject) => {
        req.on('response', (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
        });
        req.on('error', reject);
      });
      return { req, answered };
    };
    const body = JSON.stringify({ messages });
    // One request answered first, so the connection is one the client keeps.
    const first = ask(body);
    first.req.end(body);
    assert.equal((await first.answered).status, 200);
    const inFlight = ask(body);
    await new Promise((resolve) => inFlight.req.write(body.slice(0, 10), resolve));
    stopping.child.kill('SIGTERM');
    // Once no new connection is taken, the server is closing: the request finishes after that.
    assert.ok(
      await eventually(
        () =>
          new Promise<boolean>((resolve) => {
            const probe = connect(Number(port), hostname);
            probe.on('connect', () => {
              probe.destroy();
              resolve(false);
            });
            probe.on('error', () => resolve(true));
          }),
      ),
    );
    inFlight.req.end(body.slice(10));
    const res = await inFlight.answered;
    assert.equal(res.status, 200);
    // The client keeps the connection (the agent is destroyed only after the exit): the server
    // closes it and exits of itself, not by the forced exit of 10 s later, whose code is 1.
    const [code] = (await once(stopping.child, 'exit')) as [number | null];
    agent.destroy();
    assert.equal(code, 0);
    // Its counters were written at the stop.
    const again = await startServerProcess(env);
    try {
      assert.equal((await api(again.url, 'GET', '/api/v1/usage', key)).json.total_requests, 2);
    } finally {
      await again.stop('SIGKILL');
    }
  });
});

describe('a stop signal while the server starts', () => {
  /**
   * An OpenAI-compatible embedding server whose answers are held while `held` is set: the start's
   * probe of it waits there, with the data directory taken and the store open.
   */
  const embeddings = (() => {
    let held: ((answer: () => void) => void) | null = null;
    const server = createHttpServer((req, res) => {
      let body = '';
      req.setEncoding('utf8').on('data', (d: string) => (body += d));
      req.on('end', () => {
        const input = (JSON.parse(body) as { input: string[] }).input;
        const answer = () => {
          res.setHeader('content-type', 'application/json');
          // Eight dimensions from the text's letters: the same text, the same vector.
          const vector = (t: string) => Array.from({ length: 8 }, (_, i) => 1 + [...t].filter((_, j) => j % 8 === i).length);
          res.end(JSON.stringify({ data: input.map((t, index) => ({ index, embedding: vector(t) })) }));
        };
        if (held) held(answer);
        else answer();
      });
    });
    return {
      server,
      /** Resolves with the request held next, and a function that answers it. */
      holdNext: () =>
        new Promise<() => void>((resolve) => {
          held = (answer) => {
            held = null;
            resolve(answer);
          };
        }),
    };
  })();
  const dir = tempDir('reprise-stop-at-start-');
  let env: Record<string, string> = {};
  after(async () => {
    embeddings.server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    test(`${signal} during start-up ends the start with status 0 and a log line; the data directory is free, and what was acknowledged is there`, async () => {
      if (!embeddings.server.listening) {
        embeddings.server.listen(0, '127.0.0.1');
        await once(embeddings.server, 'listening');
        const { port } = embeddings.server.address() as AddressInfo;
        env = {
          REPRISE_DATA_DIR: dir,
          REPRISE_EMBEDDER: 'http',
          REPRISE_EMBED_URL: `http://127.0.0.1:${port}/v1`,
        };
      }
      const created = await runCli(['keys', 'create', '--account', `stop-${signal}`, '--json'], env);
      assert.equal(created.code, 0, created.stderr);
      const key = (JSON.parse(created.stdout) as { key: string }).key;
      let server = await startServerProcess(env);
      const question = [user(`Which signal stops a server that starts? (${signal})`)];
      const stored = await api(server.url, 'POST', '/api/v1/store', key, { messages: question, answer: signal });
      assert.equal(stored.json.stored, true);
      assert.equal((await api(server.url, 'POST', '/api/v1/check', key, { messages: question })).json.cache_type, 'exact');
      assert.equal(await server.stop('SIGTERM'), 0);

      // The next start waits on its probe of the embedding server: the data directory is taken
      // and the store is open. The signal comes then; the probe is answered once it is taken.
      const probe = embeddings.holdNext();
      const starting = startCli(['serve'], { ...env, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info' });
      const answer = await probe;
      starting.child.kill(signal);
      await starting.stdoutMatching(/a stop signal came while the server starts/);
      answer();
      const ended = await starting.exited;
      assert.equal(ended.signal, null, ended.stdout + ended.stderr);
      assert.equal(ended.code, 0, ended.stdout + ended.stderr);
      const lines = ended.stdout
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { msg: string; signal?: string });
      const stopped = lines.find((l) => /^Reprise stopped during start-up/.test(l.msg));
      assert.ok(stopped, ended.stdout);
      assert.equal(stopped.signal, signal);
      assert.ok(!lines.some((l) => /Reprise is listening/.test(l.msg)), ended.stdout);
      // The directory is free, and the entry and its counters are all there.
      const free = lockFile(path.join(dir, 'server.lock'));
      assert.ok(free, 'the data directory is free');
      free.release();
      server = await startServerProcess(env);
      try {
        const hit = await api(server.url, 'POST', '/api/v1/check', key, { messages: question });
        assert.equal(hit.json.answer, signal);
        const usage = await api(server.url, 'GET', '/api/v1/usage', key);
        assert.equal(usage.json.total_requests, 2);
        assert.equal(usage.json.exact_hits, 2);
      } finally {
        assert.equal(await server.stop('SIGTERM'), 0);
      }
    });
  }
});
