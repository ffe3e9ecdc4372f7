import { createInterface } from 'node:readline/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { loadConfig, type Config } from './config.ts';
import { createKey } from './keys/keys.ts';
import { planOf, type Plan } from './limits/plans.ts';
import { openStore, sqlitePath, storeExists } from './runtime.ts';
import type { Account, AccountDeletion, Store } from './store/interface.ts';
import { isSqliteUnavailable } from './store/sqlite.ts';
import type { StorageUse } from './store/quota.ts';
import { watchStopSignals } from './util/stop-signals.ts';

/** A command used wrongly: the message, then the help. */
export class UsageError extends Error {}

/** A command that cannot be done (no such account or key): one line, exit code 1. */
class CommandError extends Error {}

export const HELP = `Usage: reprise <command>

Commands:
  serve                                          Start the HTTP service (the default)
  keys create --account NAME [--plan PLAN] [--name LABEL] [--json]
                                                 Create an API key (and the account if it is new)
  keys list --account NAME [--json]              List an account's keys
  keys revoke KEY_ID                             Revoke a key; the API rejects it at once
  accounts list [--json]                         List accounts, with the entries and bytes each keeps against its plan's limits
  accounts set-plan NAME PLAN                    Change the plan of an account (all its keys); running servers apply it at once
  accounts set-password NAME [--password-stdin]  Set the dashboard password of an account (asked for, or read from stdin)
  accounts delete NAME [--yes] [--json]          Delete an account and all its data for good: keys, dashboard sessions,
                                                 cached entries, usage. Asks for the name again at a terminal;
                                                 elsewhere (a script) it needs --yes. Gone at once; the entries
                                                 of a large account are removed in batches, progress on stderr
  help                                           Show this help (as does --help after any command)

Configuration comes from the environment (see README): REPRISE_DATA_DIR, HOST, PORT, ...`;

type Out = (line: string) => void;

type Options = NonNullable<ParseArgsConfig['options']>;

/** Parses one subcommand's arguments: only its own options, and at most `positionals` names. */
function parse<O extends Options>(command: string, args: string[], options: O, positionals = 0) {
  const parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
  const extra = parsed.positionals.slice(positionals);
  if (extra.length > 0) throw new UsageError(`${command}: unexpected argument ${extra[0]}`);
  return parsed;
}

/**
 * Opens the configured store. Only `keys create` may start a new store (a SQLite database, or
 * Reprise's tables in a PostgreSQL schema) before the server's first start; other commands on a
 * data directory or schema without one would only report an empty one, so they say where they
 * looked. A store made by `keys create` is announced on stderr, so a mistyped REPRISE_DATA_DIR or
 * REPRISE_PG_SCHEMA (or a forgotten one) does not go unnoticed.
 */
async function withStore<T>(config: Config, fn: (store: Store) => Promise<T>, err?: Out, mayCreate = false): Promise<T> {
  if (!(await storeExists(config))) {
    const [missing, check] = config.databaseUrl
      ? [`no Reprise tables in schema ${config.pgSchema} of DATABASE_URL (REPRISE_PG_SCHEMA)`, 'the schema']
      : [`no database at ${sqlitePath(config)} (REPRISE_DATA_DIR)`, 'the path'];
    if (!mayCreate) throw new CommandError(`${missing}: start the server once, or check ${check}`);
    err?.(`reprise: ${missing} yet; creating ${config.databaseUrl ? 'them' : 'it'}`);
  }
  const store = await openStore(config);
  try {
    return await fn(store);
  } catch (err) {
    const problem = storeProblem(config, err);
    if (problem !== null) throw new CommandError(problem);
    throw err;
  } finally {
    await store.close();
  }
}

/**
 * A database that cannot be used now (disk full, read-only, its write lock held past the wait;
 * PostgreSQL unreachable), said in one line naming the setting, not as a stack trace; null for
 * any other error.
 */
function storeProblem(config: Config, err: unknown): string | null {
  if (isSqliteUnavailable(err))
    return `the store at REPRISE_DATA_DIR (${sqlitePath(config)}) cannot be written now: ${(err as Error).message}`;
  if ((err as { unavailable?: boolean }).unavailable === true) {
    return `the store at DATABASE_URL (PostgreSQL) cannot be used now: ${(err as Error).message}`;
  }
  return null;
}

/** What is said of a plan the configuration does not define. */
function unknownPlan(config: Config, plan: string): string {
  return `unknown plan ${plan}; known plans: ${Object.keys(config.plans).join(', ')}`;
}

/** `n` and the noun, plural unless n is 1. */
const count = (n: number, one: string, many = `${one}s`): string => `${n} ${n === 1 ? one : many}`;

const thousands = (n: number): string => n.toLocaleString('en-US');

/** Bytes as the dashboard shows them: B below a KiB, else KiB, MiB, GiB or TiB (a decimal below 10). */
function bytesText(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) ((n /= 1024), i++);
  return `${i === 0 ? n : Number(n.toFixed(n < 10 ? 1 : 0))} ${units[i]}`;
}

/** A plan's limits in a few words: its rate limit, then its storage limits. */
function planText(plan: Plan): string {
  const rate = plan.unlimited ? 'counted, never refused' : `${plan.requestsPerMinute} requests/minute, burst ${plan.burst}`;
  const { maxEntries, maxStoredBytes } = plan;
  const storage =
    maxEntries === null && maxStoredBytes === null
      ? 'no storage limits'
      : `${maxEntries === null ? 'no limit on entries' : `${thousands(maxEntries)} entries`}, ` +
        `${maxStoredBytes === null ? 'no limit on bytes' : bytesText(maxStoredBytes)}`;
  return `${rate}; ${storage}`;
}

/**
 * What an account keeps up to or beyond a limit of its plan, said in one line, or null: its stores
 * of new conversations are refused until it deletes entries, and nothing is removed for it.
 */
function planFull(name: string, planName: string, plan: Plan, use: StorageUse): string | null {
  const versus = (kept: number, limit: number, text: string, many: string, much: string): string =>
    kept > limit ? `${text}, more than the ${many} plan ${planName} allows` : `${text}, as ${much} as plan ${planName} allows`;
  const full =
    plan.maxEntries !== null && use.entries >= plan.maxEntries
      ? versus(use.entries, plan.maxEntries, count(use.entries, 'entry', 'entries'), thousands(plan.maxEntries), 'many')
      : plan.maxStoredBytes !== null && use.bytes >= plan.maxStoredBytes
        ? versus(use.bytes, plan.maxStoredBytes, `${bytesText(use.bytes)} of entries`, bytesText(plan.maxStoredBytes), 'much')
        : null;
  return (
    full && `account ${name} keeps ${full}: its stores of new conversations are refused until it deletes entries (nothing was removed)`
  );
}

/** What an account keeps and its plan's limits, as the usage body says them (null: no limit). */
function storageJson(use: StorageUse, plan: Plan) {
  return { entries: use.entries, stored_bytes: use.bytes, max_entries: plan.maxEntries, max_stored_bytes: plan.maxStoredBytes };
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

async function keysCommand(config: Config, args: string[], out: Out, err: Out): Promise<void> {
  const [sub, ...rest] = args;
  switch (sub) {
    case 'create': {
      const { values } = parse('keys create', rest, {
        account: { type: 'string' },
        plan: { type: 'string' },
        name: { type: 'string' },
        json: { type: 'boolean', default: false },
      });
      const name = values.account;
      if (!name) throw new UsageError('keys create needs --account NAME');
      if (!/^[\w.@-]{1,100}$/.test(name)) throw new UsageError('--account: use 1-100 letters, digits, and . _ - @');
      const plan = values.plan;
      if (plan !== undefined && !Object.hasOwn(config.plans, plan)) throw new UsageError(`--plan: ${unknownPlan(config, plan)}`);
      if (values.name !== undefined && !/^[^\p{Cc}]{1,100}$/u.test(values.name)) {
        throw new UsageError('--name: use 1-100 characters, without control characters');
      }
      const created = await withStore(
        config,
        async (store) => {
          let account = await store.getAccountByName(name);
          if (!account) account = await store.createAccount(name, plan ?? 'free');
          else if (plan !== undefined && account.plan !== plan) {
            err(`reprise: the plan of account ${name} changed from ${account.plan} to ${plan}, for all its keys`);
            account = await store.updateAccount(account.id, { plan });
            const over = account && planFull(name, plan, planOf(config.plans, plan), await store.getStorage(account.id));
            if (over) err(`reprise: ${over}`);
          }
          if (!account) throw new Error(`account ${name} disappeared`);
          return createKey(store, account, values.name ?? null);
        },
        err,
        true,
      );
      if (values.json) {
        out(JSON.stringify({ key: created.secret, key_id: created.key.id, account: created.account.name, plan: created.account.plan }));
      } else {
        out(`Created key ${created.key.id} for account ${created.account.name} (plan ${created.account.plan}).`);
        out(`Secret (shown once, store it now): ${created.secret}`);
      }
      return;
    }
    case 'list': {
      const { values } = parse('keys list', rest, { account: { type: 'string' }, json: { type: 'boolean', default: false } });
      const name = values.account;
      if (!name) throw new UsageError('keys list needs --account NAME');
      const keys = await withStore(config, async (store) => {
        const account = await store.getAccountByName(name);
        if (!account) throw new CommandError(`no account named ${name}`);
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
      const { positionals } = parse('keys revoke', rest, {}, 1);
      const id = positionals[0];
      if (!id) throw new UsageError('keys revoke needs KEY_ID (see keys list)');
      const { before, key } = await withStore(config, async (store) => {
        const before = await store.getKey(id);
        return { before, key: before === null ? null : await store.revokeKey(id) };
      });
      if (!key) throw new CommandError(`no key with id ${id}`);
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
          stdin.pause();
          stdin.off('data', onData);
          process.stderr.write('\n');
          reject(new CommandError('cancelled'));
          return;
        }
        value = c === '\u007f' ? value.slice(0, -1) : value + c;
      }
    };
    stdin.on('data', onData);
  });
}

/**
 * Reads a line typed at the terminal, echoed; Ctrl-C or the end of input cancels (`CommandError`).
 */
async function readLine(prompt: string): Promise<string> {
  const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: true });
  const cancel = new AbortController();
  rl.on('SIGINT', () => cancel.abort());
  rl.on('close', () => cancel.abort());
  try {
    return await rl.question(prompt, { signal: cancel.signal });
  } catch {
    process.stderr.write('\n');
    throw new CommandError('cancelled; nothing was deleted');
  } finally {
    rl.close();
  }
}

/**
 * Deletes an account and all its data. At a terminal the name is typed again to confirm; where
 * nobody can be asked (stdin not a terminal: a script, a pipe) `--yes` is required, so that a
 * script never deletes an account without saying so.
 */
async function deleteAccount(config: Config, args: string[], out: Out, err: Out): Promise<void> {
  const { values, positionals } = parse(
    'accounts delete',
    args,
    { yes: { type: 'boolean', default: false }, json: { type: 'boolean', default: false } },
    1,
  );
  const name = positionals[0];
  if (!name) throw new UsageError('accounts delete needs NAME');
  const ask = !values.yes;
  if (ask && !process.stdin.isTTY) {
    throw new UsageError(`accounts delete ${name}: pass --yes to delete it and all its data (stdin is not a terminal to confirm at)`);
  }
  const remove = async (store: Store, id: string) => {
    const done = await store.deleteAccount(id);
    if (!done) throw new CommandError(`no account named ${name}`);
    try {
      await purge(store, done, config.deleteBatch, err);
    } catch (e) {
      // The account is gone already: said so, not as if nothing had been deleted.
      const why = storeProblem(config, e) ?? (e as Error).message;
      throw new CommandError(
        `account ${name} is deleted: its keys are refused and nothing of it is served; removing its cached entries stopped (${why}): ` +
          'the server finishes it at its next start or within a minute, or the next accounts delete does',
      );
    }
    return done;
  };
  const find = async (store: Store) => {
    const account = await store.getAccountByName(name);
    if (!account) throw new CommandError(`no account named ${name}`);
    return account;
  };
  let deleted;
  if (ask) {
    // As for a password, the store is not held open while the operator types.
    const known = await withStore(config, async (store) => {
      const account = await find(store);
      const keys = (await store.listKeys(account.id)).length;
      const entries = (await store.listEntries(account.id, { page: 1, perPage: 1 })).total;
      return { account, keys, entries };
    });
    err(
      `This deletes account ${name} (plan ${known.account.plan}) and all its data for good: ${count(known.keys, 'key')}, ` +
        `${count(known.entries, 'cached entry', 'cached entries')}, its usage and its dashboard sessions.`,
    );
    const typed = await readLine(`Type the account's name to confirm: `);
    if (typed.trim() !== name) throw new CommandError('the name typed differs; nothing was deleted');
    // The account confirmed, not one made under its name since.
    deleted = await withStore(config, (store) => remove(store, known.account.id));
  } else {
    deleted = await withStore(config, async (store) => remove(store, (await find(store)).id));
  }
  if (values.json) {
    out(
      JSON.stringify({
        account: deleted.account.name,
        id: deleted.account.id,
        deleted: { keys: deleted.keys, entries: deleted.entries, usage_buckets: deleted.usageBuckets, sessions: deleted.sessions },
      }),
    );
    return;
  }
  out(
    `Deleted account ${name} (${deleted.account.id}): ${count(deleted.keys, 'key')}, ` +
      `${count(deleted.entries, 'cached entry', 'cached entries')}, ${count(deleted.usageBuckets, 'hour')} of usage, ` +
      `${count(deleted.sessions, 'dashboard session')}. Its keys are refused at once.`,
  );
}

/** How often the removal of a large account's entries is reported on stderr, and another process's looked at. */
const PROGRESS_MS = 2000;

/**
 * On the embedded store, removes the entries and usage of the account just deleted (and of any
 * deleted before whose removal was interrupted), a batch at a time, saying on stderr how far it
 * has come; or, while another process does it (a server finishing an earlier deletion), waits
 * until it has. The account is gone for everyone already: interrupted, the rest is removed by
 * the server (at start and each minute) or by the next `accounts delete`.
 */
async function purge(store: Store, deleted: AccountDeletion, batch: number, err: Out): Promise<void> {
  if (!store.purgeDeletedAccounts || !store.purgeLeft) return;
  const { id, name } = deleted.account;
  const total = deleted.entries;
  // Said of an account whose entries take more than one batch; a smaller one is removed at once.
  const large = total > batch;
  if (large) {
    err(
      `reprise: account ${name} is deleted: its keys are refused and nothing of it is served. Removing its ` +
        `${thousands(total)} cached entries from the database in batches (if interrupted, the server finishes ` +
        `it at its next start or within a minute, or the next accounts delete does)`,
    );
  }
  let said = 0;
  let saidLeft = -1;
  const say = (left: number) => {
    const now = Date.now();
    if (!large || left === saidLeft || (left > 0 && now - said < PROGRESS_MS)) return;
    said = now;
    saidLeft = left;
    err(`reprise: ${thousands(total - left)} of ${thousands(total)} cached entries of ${name} removed`);
  };
  let waiting = false;
  for (;;) {
    const done = await store.purgeDeletedAccounts({
      onBatch: (p) => {
        if (p.accountId === id) say(p.entriesLeft);
      },
    });
    const left = await store.purgeLeft(id);
    if (left === null) return;
    if (done) continue;
    // Another process holds the removal: it removes this account's rows too.
    if (!waiting) err(`reprise: another process is removing the rows of deleted accounts; waiting for it to finish ${name}'s`);
    waiting = true;
    say(left);
    await sleep(PROGRESS_MS / 4);
  }
}

async function setPlan(config: Config, args: string[], out: Out, err: Out): Promise<void> {
  const { positionals } = parse('accounts set-plan', args, {}, 2);
  const [name, plan] = positionals;
  if (!name || !plan) throw new UsageError('accounts set-plan needs NAME and PLAN');
  if (!Object.hasOwn(config.plans, plan)) throw new UsageError(`accounts set-plan: ${unknownPlan(config, plan)}`);
  const { before, use } = await withStore(config, async (store) => {
    const account = await store.getAccountByName(name);
    if (!account) throw new CommandError(`no account named ${name}`);
    if (account.plan !== plan && !(await store.updateAccount(account.id, { plan }))) throw new CommandError(`no account named ${name}`);
    return { before: account.plan, use: await store.getStorage(account.id) };
  });
  const limits = planOf(config.plans, plan);
  const shown = planText(limits);
  if (before === plan) out(`Account ${name} is on plan ${plan} already (${shown}).`);
  else out(`Account ${name}: plan ${before} → ${plan} (${shown}), for all its keys.`);
  // A smaller plan takes nothing away: the account's stores are refused until it deletes entries.
  const over = planFull(name, plan, limits, use);
  if (over) err(`reprise: ${over}`);
}

async function accountsCommand(config: Config, args: string[], out: Out, err: Out): Promise<void> {
  const [sub, ...rest] = args;
  if (sub === 'delete') return deleteAccount(config, rest, out, err);
  if (sub === 'set-plan') return setPlan(config, rest, out, err);
  if (sub === 'set-password') {
    const { values, positionals } = parse('accounts set-password', rest, { 'password-stdin': { type: 'boolean', default: false } }, 1);
    const name = positionals[0];
    if (!name) throw new UsageError('accounts set-password needs NAME');
    const fromStdin = values['password-stdin'] || !process.stdin.isTTY;
    // The account is looked up before the password is asked for, and again when it is set.
    const known = await withStore(config, (store) => store.getAccountByName(name));
    if (!known) throw new CommandError(`no account named ${name}`);
    const password = await readPassword(`New dashboard password for ${name}: `, fromStdin);
    if (password.length < 8) throw new CommandError('the password must have at least 8 characters');
    if (!fromStdin && (await readPassword('The same password again: ', false)) !== password) {
      throw new CommandError('the two passwords differ; nothing was changed');
    }
    const { hashPassword } = await import('./dashboard/passwords.ts');
    const hash = await hashPassword(password);
    await withStore(config, async (store) => {
      const account = await store.getAccountByName(name);
      if (!account) throw new CommandError(`no account named ${name}`);
      await store.setPassword(account.id, hash);
    });
    out(`Password set for ${name}; its dashboard sessions are signed out. Sign in at /dashboard.`);
    return;
  }
  if (sub !== 'list') throw new UsageError(`unknown accounts command ${sub ?? ''}; use list, set-plan, set-password or delete`);
  const { values } = parse('accounts list', rest, { json: { type: 'boolean', default: false } });
  // Each account with what it keeps, against its plan's storage limits.
  const accounts = await withStore(config, async (store) => {
    const listed: { account: Account; use: StorageUse; plan: Plan }[] = [];
    for (const account of await store.listAccounts()) {
      listed.push({ account, use: await store.getStorage(account.id), plan: planOf(config.plans, account.plan) });
    }
    return listed;
  });
  if (values.json) {
    out(
      JSON.stringify(
        accounts.map(({ account: a, use, plan }) => ({
          id: a.id,
          name: a.name,
          plan: a.plan,
          created_at: a.createdAt,
          storage: storageJson(use, plan),
        })),
      ),
    );
    return;
  }
  const of = (limit: number | null, text: (n: number) => string) => (limit === null ? '' : ` of ${text(limit)}`);
  out(
    table([
      ['ID', 'NAME', 'PLAN', 'ENTRIES', 'STORED', 'CREATED'],
      ...accounts.map(({ account: a, use, plan }) => [
        a.id,
        a.name,
        a.plan,
        `${thousands(use.entries)}${of(plan.maxEntries, thousands)}`,
        `${bytesText(use.bytes)}${of(plan.maxStoredBytes, bytesText)}`,
        a.createdAt,
      ]),
    ]),
  );
}

/** Runs a CLI command. Returns the process exit code. */
export async function runCli(argv: string[], out: Out = console.log, err: Out = console.error): Promise<number> {
  const [command = 'serve', ...args] = argv;
  // `--help` or `-h` after any command (before a `--`) asks for the help, not for the command.
  const end = argv.indexOf('--');
  if ((end < 0 ? argv : argv.slice(0, end)).some((a) => a === '--help' || a === '-h')) {
    out(HELP);
    return 0;
  }
  try {
    switch (command) {
      case 'serve': {
        if (args.length > 0) {
          throw new UsageError(
            `serve takes no arguments (${args[0]}); settings come from the environment: HOST, PORT, REPRISE_DATA_DIR, ...`,
          );
        }
        // From here on SIGTERM and SIGINT stop the server cleanly, even one still loading its modules.
        const stops = watchStopSignals();
        const { serve } = await import('./server.ts');
        await serve(loadConfig(), stops);
        return 0;
      }
      case 'keys':
        await keysCommand(loadConfig(), args, out, err);
        return 0;
      case 'accounts':
        await accountsCommand(loadConfig(), args, out, err);
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
    if (e instanceof CommandError || (e as Error).name === 'StoreOpenError' || (e as Error).name === 'ListenError') {
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
