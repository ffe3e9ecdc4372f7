import { parseArgs } from 'node:util';
import { loadConfig, type Config } from './config.ts';
import { createKey } from './keys/keys.ts';
import { openStore } from './runtime.ts';
import type { Store } from './store/interface.ts';

export class UsageError extends Error {}

export const HELP = `Usage: reprise <command>

Commands:
  serve                                          Start the HTTP service (the default)
  keys create --account NAME [--plan PLAN] [--name LABEL] [--json]
                                                 Create an API key (and the account if it is new)
  keys list --account NAME [--json]              List an account's keys
  keys revoke KEY_ID                             Revoke a key; the API rejects it at once
  accounts list [--json]                         List accounts
  accounts set-password NAME [--password-stdin]  Set the dashboard password of an account (asked for, or read from stdin)
  help                                           Show this help

Configuration comes from the environment (see README): REPRISE_DATA_DIR, HOST, PORT, ...`;

type Out = (line: string) => void;

async function withStore<T>(config: Config, fn: (store: Store) => Promise<T>): Promise<T> {
  const store = await openStore(config);
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

async function keysCommand(config: Config, args: string[], out: Out): Promise<void> {
  const [sub, ...rest] = args;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      account: { type: 'string' },
      plan: { type: 'string' },
      name: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  switch (sub) {
    case 'create': {
      const name = values.account;
      if (!name) throw new UsageError('keys create needs --account NAME');
      if (!/^[\w.@-]{1,100}$/.test(name)) throw new UsageError('--account: use 1-100 letters, digits, and . _ - @');
      const plan = values.plan;
      if (plan !== undefined && !config.plans[plan]) {
        throw new UsageError(`--plan: unknown plan ${plan}; known plans: ${Object.keys(config.plans).join(', ')}`);
      }
      const created = await withStore(config, async (store) => {
        let account = await store.getAccountByName(name);
        if (!account) account = await store.createAccount(name, plan ?? 'free');
        else if (plan !== undefined && account.plan !== plan) account = await store.updateAccount(account.id, { plan });
        if (!account) throw new Error(`account ${name} disappeared`);
        return createKey(store, account, values.name ?? null);
      });
      if (values.json) {
        out(JSON.stringify({ key: created.secret, key_id: created.key.id, account: created.account.name, plan: created.account.plan }));
      } else {
        out(`Created key ${created.key.id} for account ${created.account.name} (plan ${created.account.plan}).`);
        out(`Secret (shown once, store it now): ${created.secret}`);
      }
      return;
    }
    case 'list': {
      const name = values.account;
      if (!name) throw new UsageError('keys list needs --account NAME');
      const keys = await withStore(config, async (store) => {
        const account = await store.getAccountByName(name);
        if (!account) throw new UsageError(`no account named ${name}`);
        return store.listKeys(account.id);
      });
      if (values.json) {
        out(
          JSON.stringify(
            keys.map((k) => ({
              id: k.id,
              name: k.name,
              prefix: k.prefix,
              created_at: k.createdAt,
              last_used_at: k.lastUsedAt,
              revoked_at: k.revokedAt,
            })),
          ),
        );
        return;
      }
      const rows = [['ID', 'NAME', 'PREFIX', 'CREATED', 'LAST USED', 'STATUS']];
      for (const k of keys) {
        rows.push([
          k.id,
          k.name ?? '-',
          `${k.prefix}…`,
          k.createdAt,
          k.lastUsedAt ?? 'never',
          k.revokedAt ? `revoked ${k.revokedAt}` : 'active',
        ]);
      }
      out(table(rows));
      return;
    }
    case 'revoke': {
      const id = positionals[0];
      if (!id) throw new UsageError('keys revoke needs KEY_ID (see keys list)');
      const { before, key } = await withStore(config, async (store) => {
        const before = await store.getKey(id);
        return { before, key: before === null ? null : await store.revokeKey(id) };
      });
      if (!key) throw new UsageError(`no key with id ${id}`);
      if (before?.revokedAt) out(`Key ${key.id} (${key.prefix}…) was already revoked at ${before.revokedAt}.`);
      else out(`Revoked key ${key.id} (${key.prefix}…) at ${key.revokedAt ?? ''}.`);
      return;
    }
    default:
      throw new UsageError(`unknown keys command ${sub ?? ''}; use create, list or revoke`);
  }
}

/**
 * Reads a password: the first line of stdin when it is piped or `fromStdin` is set, or typed
 * without echo at a terminal.
 */
async function readPassword(prompt: string, fromStdin: boolean): Promise<string> {
  const stdin = process.stdin;
  if (fromStdin || !stdin.isTTY) {
    let text = '';
    for await (const chunk of stdin) text += String(chunk);
    return text.split(/\r?\n/)[0] ?? '';
  }
  process.stderr.write(prompt);
  stdin.setRawMode(true);
  stdin.resume();
  stdin.setEncoding('utf8');
  return new Promise((resolve, reject) => {
    let value = '';
    const onData = (ch: string) => {
      for (const c of ch) {
        if (c === '\r' || c === '\n') {
          stdin.setRawMode(false);
          stdin.pause();
          stdin.off('data', onData);
          process.stderr.write('\n');
          resolve(value);
          return;
        }
        if (c === '\u0003') {
          stdin.setRawMode(false);
          reject(new UsageError('cancelled'));
          return;
        }
        value = c === '\u007f' ? value.slice(0, -1) : value + c;
      }
    };
    stdin.on('data', onData);
  });
}

async function accountsCommand(config: Config, args: string[], out: Out): Promise<void> {
  const [sub, ...rest] = args;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: { json: { type: 'boolean', default: false }, 'password-stdin': { type: 'boolean', default: false } },
  });
  if (sub === 'set-password') {
    const name = positionals[0];
    if (!name) throw new UsageError('accounts set-password needs NAME');
    const password = await readPassword(`New dashboard password for ${name}: `, values['password-stdin']);
    if (password.length < 8) throw new UsageError('the password must have at least 8 characters');
    const { hashPassword } = await import('./dashboard/passwords.ts');
    const hash = await hashPassword(password);
    await withStore(config, async (store) => {
      const account = await store.getAccountByName(name);
      if (!account) throw new UsageError(`no account named ${name}`);
      await store.setPassword(account.id, hash);
    });
    out(`Password set for ${name}; its dashboard sessions are signed out. Sign in at /dashboard.`);
    return;
  }
  if (sub !== 'list') throw new UsageError(`unknown accounts command ${sub ?? ''}; use list or set-password`);
  const accounts = await withStore(config, (store) => store.listAccounts());
  if (values.json) {
    out(JSON.stringify(accounts.map((a) => ({ id: a.id, name: a.name, plan: a.plan, created_at: a.createdAt }))));
    return;
  }
  out(table([['ID', 'NAME', 'PLAN', 'CREATED'], ...accounts.map((a) => [a.id, a.name, a.plan, a.createdAt])]));
}

/** Runs a CLI command. Returns the process exit code. */
export async function runCli(argv: string[], out: Out = console.log, err: Out = console.error): Promise<number> {
  const [command = 'serve', ...args] = argv;
  try {
    switch (command) {
      case 'serve': {
        const { serve } = await import('./server.ts');
        await serve(loadConfig());
        return 0;
      }
      case 'keys':
        await keysCommand(loadConfig(), args, out);
        return 0;
      case 'accounts':
        await accountsCommand(loadConfig(), args, out);
        return 0;
      case 'help':
      case '--help':
      case '-h':
        out(HELP);
        return 0;
      default:
        throw new UsageError(`unknown command ${command}`);
    }
  } catch (e) {
    if (e instanceof UsageError || (e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      err(`reprise: ${(e as Error).message}\n\n${HELP}`);
      return 2;
    }
    if ((e as Error).name === 'ConfigError') {
      err(`reprise: configuration error: ${(e as Error).message}`);
      return 2;
    }
    if ((e as Error).name === 'StoreOpenError' || (e as Error).name === 'ListenError') {
      err(`reprise: ${(e as Error).message}`);
      return 1;
    }
    if ((e as Error).name === 'EmbedderUnavailableError') {
      // The probe at start-up learns the dimensions from the server named by REPRISE_EMBED_URL.
      err(`reprise: cannot start the embedder (REPRISE_EMBED_URL): ${(e as Error).message}`);
      return 1;
    }
    throw e;
  }
}
