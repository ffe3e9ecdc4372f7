import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, openSync, readFileSync, watch, type FSWatcher } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const BIN = fileURLToPath(new URL('../bin/reprise.js', import.meta.url));

/**
 * A parsed response body. Tests assert on it field by field, as they do on light-my-request's
 * `json()`, which is typed the same way.
 */
// biome-ignore lint/suspicious/noExplicitAny: response bodies are checked by assertions, not types
export type ResponseJson = any;

/**
 * The environment of a child process: this one's, without the settings that would point it at
 * shared servers or other configuration (DATABASE_URL, REDIS_URL, REPRISE_*), plus `env`.
 */
export function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k === 'DATABASE_URL' || k === 'REDIS_URL' || k.startsWith('REPRISE_') || k === 'PORT' || k === 'HOST') continue;
    base[k] = v;
  }
  return { ...base, ...env };
}

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  /** What the process printed to stdout so far (see `startServerProcess`). */
  stdout(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Starts `reprise serve` as a user would, on a free port, and waits until it listens. Its
 * stdout is kept up to the listening line, or all of it with `keepOutput`. With `logFile`, the
 * server writes its stdout to that file instead of a pipe to this process, which then reads
 * nothing while the server runs (a benchmark's load generator does not also carry its logs).
 */
export async function startServerProcess(
  env: Record<string, string>,
  timeoutMs = 60_000,
  opts: { keepOutput?: boolean; logFile?: string } = {},
): Promise<ServerProcess> {
  const logFd = opts.logFile === undefined ? null : openSync(opts.logFile, 'a');
  const child = spawn(process.execPath, [BIN, 'serve'], {
    cwd: ROOT,
    env: childEnv({ HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env }),
    stdio: ['ignore', logFd ?? 'pipe', 'pipe'],
  });
  // The child has its own copy of the descriptor.
  if (logFd !== null) closeSync(logFd);
  let out = '';
  let err = '';
  child.stdout?.setEncoding('utf8');
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (d: string) => (err += d));
  const url = await new Promise<string>((resolve, reject) => {
    let watcher: FSWatcher | null = null;
    const timer = setTimeout(() => {
      watcher?.close();
      reject(new Error(`server did not start in ${timeoutMs} ms:\n${out}\n${err}`));
    }, timeoutMs);
    let listening = false;
    const look = () => {
      const m = /"url":"(http:\/\/[^"]+)"[^\n]*Reprise is listening/.exec(out);
      if (!m || listening) return;
      listening = true;
      watcher?.close();
      clearTimeout(timer);
      resolve(m[1] as string);
    };
    if (opts.logFile !== undefined) {
      const file = opts.logFile;
      watcher = watch(file, () => {
        out = readFileSync(file, 'utf8');
        look();
      });
      out = readFileSync(file, 'utf8');
      look();
    }
    child.stdout?.on('data', (d: string) => {
      // Keep the start-up output (bootstrap key, listening line); drain the request logs after it.
      if (listening && !opts.keepOutput) return;
      out += d;
      look();
    });
    child.once('exit', (code) => {
      watcher?.close();
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}:\n${out}\n${err}`));
    });
  });
  return {
    child,
    url,
    stdout: () => out,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      const [code] = (await once(child, 'exit')) as [number | null];
      return code;
    },
  };
}

/** Runs the CLI to completion. */
export async function runCli(
  args: string[],
  env: Record<string, string>,
  input?: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env: childEnv(env), stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdin.end(input ?? '');
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

export async function api(
  base: string,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  key: string,
  body?: unknown,
): Promise<{ status: number; headers: Headers; json: ResponseJson }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, json: (await res.json()) as ResponseJson };
}

export interface CliProcess {
  child: ChildProcess;
  /** Resolves with what it printed to stderr so far once that matches `pattern`. */
  stderrMatching(pattern: RegExp): Promise<string>;
  /** Resolves with what it printed to stdout so far once that matches `pattern`. */
  stdoutMatching(pattern: RegExp): Promise<string>;
  /** Resolves when it has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>;
}

/** Starts the CLI without waiting for it, to watch what it prints while it runs. */
export function startCli(args: string[], env: Record<string, string>): CliProcess {
  const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  const printed = { stdout: '', stderr: '' };
  const waiting: { stream: 'stdout' | 'stderr'; pattern: RegExp; resolve: (s: string) => void }[] = [];
  const take = (stream: 'stdout' | 'stderr') => (d: string) => {
    printed[stream] += d;
    for (const w of waiting.splice(0)) {
      if (w.stream === stream && w.pattern.test(printed[stream])) w.resolve(printed[stream]);
      else waiting.push(w);
    }
  };
  child.stdout?.setEncoding('utf8').on('data', take('stdout'));
  child.stderr?.setEncoding('utf8').on('data', take('stderr'));
  const exited = once(child, 'exit').then(([code, signal]) => ({
    code: code as number | null,
    signal: signal as NodeJS.Signals | null,
    stdout: printed.stdout,
    stderr: printed.stderr,
  }));
  const matching = (stream: 'stdout' | 'stderr', pattern: RegExp) =>
    pattern.test(printed[stream])
      ? Promise.resolve(printed[stream])
      : Promise.race([
          new Promise<string>((resolve) => waiting.push({ stream, pattern, resolve })),
          exited.then((r) =>
            Promise.reject(new Error(`the CLI exited (${r.code ?? r.signal}) before printing ${pattern}:\n${r.stdout}\n${r.stderr}`)),
          ),
        ]);
  return {
    child,
    stderrMatching: (pattern) => matching('stderr', pattern),
    stdoutMatching: (pattern) => matching('stdout', pattern),
    exited,
  };
}
