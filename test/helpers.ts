import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { buildApp } from '../src/app.ts';
import { loadConfig, type Config } from '../src/config.ts';
import type { Embedder } from '../src/embedding/interface.ts';
import { createKey } from '../src/keys/keys.ts';
import { createRuntime, type Runtime, type RuntimeOptions } from '../src/runtime.ts';

/** The temporary directories made by this test process, removed when it exits. */
const made = new Set<string>();

/** A new temporary directory, removed with whatever is in it when the test process exits. */
export function tempDir(prefix = 'reprise-test-'): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  if (made.size === 0) process.once('exit', () => made.forEach((d) => rmSync(d, { recursive: true, force: true })));
  made.add(dir);
  return dir;
}

/**
 * What a server killed (SIGKILL) at this moment leaves of its data directory, copied to a new
 * one: the database with its write-ahead log (every committed transaction, none after) and the
 * index snapshot as it is on disk. The server of `dataDir` is left running; `env` is added to the
 * configuration of the copy.
 */
export function crashImage(dataDir: string, env: Record<string, string> = {}): Config {
  const to = tempDir('reprise-crashed-');
  for (const name of ['reprise.db', 'reprise.db-wal', 'index']) {
    const from = path.join(dataDir, name);
    if (existsSync(from)) cpSync(from, path.join(to, name), { recursive: true });
  }
  return loadConfig({ REPRISE_DATA_DIR: to, REPRISE_EMBEDDER: 'none', ...env });
}

/**
 * SQL that takes an embedded store's database back to the version before the numbering of vector
 * writes (and the storage counts and the list of accounts being removed, which came after it): its
 * migrations undone.
 */
export const BEFORE_VECTOR_NUMBERING = `DROP TABLE account_purges; DROP TRIGGER entries_storage_insert; DROP TRIGGER entries_storage_delete;
  DROP TRIGGER entries_storage_update; DROP TABLE account_storage;
  DROP TRIGGER entries_vector_inserted; DROP TRIGGER entries_vector_updated; DROP TRIGGER entries_vector_deleted;
  DROP TABLE vector_seq; DROP TABLE removed_vectors; DROP INDEX entries_vector_seq; ALTER TABLE entries DROP COLUMN vector_seq;
  DELETE FROM schema_migrations WHERE version >= 8;`;

export function testConfig(env: Record<string, string> = {}): Config {
  return loadConfig({ REPRISE_DATA_DIR: tempDir(), REPRISE_EMBEDDER: 'none', ...env });
}

let shared: Promise<Embedder> | null = null;

/** The real default embedder, loaded once per test file and closed by `closeSharedEmbedder`. */
export function sharedEmbedder(): Promise<Embedder> {
  shared ??= import('../src/embedding/use-lite.ts').then((m) => m.createUseLiteEmbedder({ workers: 1 }));
  return shared;
}

export async function closeSharedEmbedder(): Promise<void> {
  if (shared) await (await shared).close();
  shared = null;
}

export interface TestApp {
  app: FastifyInstance;
  runtime: Runtime;
  config: Config;
  /** Creates an account (if new) and a key on it; returns the secret. */
  key(account?: string, plan?: string): Promise<string>;
  post(url: string, body: unknown, secret?: string, headers?: Record<string, string>): Promise<LightMyRequestResponse>;
  get(url: string, secret?: string): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

export interface TestAppOptions {
  config?: Config;
  env?: Record<string, string>;
  embedder?: Embedder | null;
  /** Keep the data dir after close (for restart tests). */
  keepData?: boolean;
  /** Passed to createRuntime, beside the embedder. */
  runtime?: Omit<RuntimeOptions, 'embedder'>;
}

export async function startTestApp(opts: TestAppOptions = {}): Promise<TestApp> {
  const config = opts.config ?? testConfig(opts.env);
  const runtime = await createRuntime(config, { ...opts.runtime, embedder: opts.embedder ?? null });
  const app = await buildApp(runtime.ctx);
  const store = runtime.ctx.store;
  return {
    app,
    runtime,
    config,
    async key(account = `acct-${Math.random().toString(36).slice(2, 10)}`, plan = 'enterprise') {
      const a = (await store.getAccountByName(account)) ?? (await store.createAccount(account, plan));
      return (await createKey(store, a)).secret;
    },
    post(url, body, secret, headers = {}) {
      return app.inject({
        method: 'POST',
        url,
        payload: body === undefined ? undefined : JSON.stringify(body),
        headers: {
          'content-type': 'application/json',
          ...(secret ? { authorization: `Bearer ${secret}` } : {}),
          ...headers,
        },
      });
    },
    get(url, secret) {
      return app.inject({ method: 'GET', url, headers: secret ? { authorization: `Bearer ${secret}` } : {} });
    },
    async close() {
      await app.close();
      await runtime.close();
      if (!opts.keepData) rmSync(config.dataDir, { recursive: true, force: true });
    },
  };
}

export const user = (content: string) => ({ role: 'user' as const, content });
export const conv = (...turns: string[]) =>
  turns.map((content, i) => ({ role: i % 2 === 0 ? ('user' as const) : ('assistant' as const), content }));
