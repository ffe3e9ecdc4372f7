import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { setFlagsFromString } from 'node:v8';
import { LogDestination } from './util/log-destination.ts';
import { buildApp } from './app.ts';
import type { Config } from './config.ts';
import { createKey } from './keys/keys.ts';
import { createRuntime, StartStoppedError, type Runtime } from './runtime.ts';
import type { Account, Store } from './store/interface.ts';
import { watchStopSignals, type StopSignals } from './util/stop-signals.ts';

/** On first start (`accounts` is empty) creates the `default` account and prints its key once. */
export async function bootstrap(store: Store, accounts: readonly Account[], url: string, print: (s: string) => void): Promise<void> {
  if (accounts.length > 0) return;
  let account;
  try {
    account = await store.createAccount('default', 'free');
  } catch (err) {
    // Another node of a cluster starting at the same moment created it first.
    if (await store.getAccountByName('default')) return;
    throw err;
  }
  const { secret } = await createKey(store, account, 'bootstrap');
  print(
    [
      '',
      'Reprise created the account "default" and this API key. It is shown once; keep it:',
      '',
      `  ${secret}`,
      '',
      'Try it:',
      `  curl -s ${url}/api/v1/health -H "Authorization: Bearer ${secret}"`,
      '',
    ].join('\n'),
  );
}

/** The server could not listen where HOST and PORT say (a name that does not resolve, a port in use). */
export class ListenError extends Error {
  override name = 'ListenError';
}

const LISTEN_FAILURES: Record<string, string> = {
  EADDRINUSE: 'the port is in use',
  EADDRNOTAVAIL: 'the address is not one of this machine',
  EACCES: 'permission denied (a port below 1024 needs privileges)',
  ENOTFOUND: 'the host name does not resolve',
};

export interface Server {
  app: FastifyInstance;
  runtime: Runtime;
  url: string;
  close(): Promise<void>;
}

export interface StartOptions {
  /**
   * Aborted when the server is asked to stop while it starts: the start stops at its next step
   * (the index load stops), what it opened is closed (a server that already listens finishes its
   * requests and flushes its counters), and it rejects with a StartStoppedError, logged.
   */
  signal?: AbortSignal;
}

export async function startServer(config: Config, opts: StartOptions = {}): Promise<Server> {
  const started = performance.now();
  // Log lines are batched (16 KB, or 20 ms) and written asynchronously, so logging stays off the request path.
  const destination = new LogDestination();
  const logger = pino({ level: config.logLevel, redact: ['req.headers.authorization'] }, destination);
  const { signal } = opts;
  const stopAsked = () =>
    logger.info(
      { signal: String(signal?.reason) },
      'a stop signal came while the server starts: it stops starting, and closes what it opened',
    );
  if (signal?.aborted) stopAsked();
  else signal?.addEventListener('abort', stopAsked, { once: true });
  try {
    return await start(config, { logger, destination, started, signal });
  } catch (err) {
    if (err instanceof StartStoppedError) {
      logger.info(
        { signal: String(signal?.reason), startup_ms: Math.round(performance.now() - started) },
        'Reprise stopped during start-up: the data directory is free and what was acknowledged is written',
      );
      await destination.flush();
    }
    throw err;
  } finally {
    signal?.removeEventListener('abort', stopAsked);
  }
}

async function start(
  config: Config,
  { logger, destination, started, signal }: { logger: pino.Logger; destination: LogDestination; started: number; signal?: AbortSignal },
): Promise<Server> {
  // A small index is whole before the server listens; a large one (rebuilt after a crash, or a
  // cluster node's) goes on loading while exact hits and stores are served.
  const runtime = await createRuntime(config, { log: logger, indexWaitMs: config.indexWaitSeconds * 1000, signal });
  /** Between the steps that follow: a stop asked meanwhile closes what is open and ends the start. */
  const stopIfAsked = async (close: () => Promise<void>) => {
    if (!signal?.aborted) return;
    await close();
    throw new StartStoppedError();
  };
  await stopIfAsked(() => runtime.close());
  const app = await buildApp(runtime.ctx, { loggerInstance: logger });
  const closeBoth = async () => {
    await app.close();
    await runtime.close();
  };
  await stopIfAsked(closeBoth);
  let url: string;
  try {
    url = await app.listen({ host: config.host, port: config.port });
  } catch (err) {
    await closeBoth();
    const e = err as NodeJS.ErrnoException;
    const why = (e.code && LISTEN_FAILURES[e.code]) ?? e.code ?? e.message;
    throw new ListenError(`cannot listen on ${config.host}:${config.port} (HOST, PORT): ${why}`, { cause: err });
  }
  // Before the first start's key is made: a key made and never shown would leave the account without one.
  await stopIfAsked(closeBoth);
  const accounts = await runtime.ctx.store.listAccounts();
  // The first start's key is printed once the server listens, so it is never shown for a server that did not start.
  await bootstrap(runtime.ctx.store, accounts, url, (s) => process.stdout.write(`${s}\n`));
  // An account's plan that this configuration does not define (a REPRISE_CONFIG left out) gets
  // the free plan's limits: said at start, not found out from 429s.
  for (const account of accounts) {
    if (!Object.hasOwn(config.plans, account.plan)) {
      logger.warn(
        { account: account.name, plan: account.plan, plans: Object.keys(config.plans) },
        "an account's plan is not defined here (REPRISE_CONFIG): it gets the free plan's limits",
      );
    }
  }
  app.log.info(
    {
      url,
      store: runtime.ctx.store.kind,
      embedder: runtime.embedder?.id ?? 'none',
      limiter: config.redisUrl ? 'redis' : 'in-process',
      embedder_backend: runtime.embedder?.backend,
      vectors: runtime.index.size,
      vectors_from_snapshot: runtime.vectorsFromSnapshot,
      index: runtime.ctx.cache.indexReady ? 'ready' : 'loading',
      startup_ms: Math.round(performance.now() - started),
    },
    'Reprise is listening',
  );
  await destination.flush();
  let closing: Promise<void> | null = null;
  return {
    app,
    runtime,
    url,
    close() {
      closing ??= (async () => {
        await app.close();
        await runtime.close();
        await destination.flush();
      })();
      return closing;
    },
  };
}

/**
 * Runs until SIGTERM or SIGINT, then stops taking requests, finishes those in flight and flushes
 * counters. A signal that comes while the server starts stops the start (see StartOptions.signal),
 * and the process ends with status 0 as after a stop. `stops` may be watched from earlier on (the
 * CLI does, before it loads the server's modules).
 */
export async function serve(config: Config, stops: StopSignals = watchStopSignals()): Promise<void> {
  // V8 moves objects of allocation sites whose objects often survive straight to the old
  // generation. Here that is mostly per-request objects that die a little later, and the old
  // generation filled with them: under semantic load, twice as many full collections (each with
  // steps of up to 10 ms on the event loop) as without (bench/README.md). The flag is read at
  // each collection, so setting it now applies from here on.
  setFlagsFromString('--no-allocation-site-pretenuring');
  // A stop that does not end in 10 s (counters or a snapshot that cannot be written) ends the process.
  const forceExit = () => setTimeout(() => process.exit(1), 10_000).unref();
  const signalled = () => String(stops.signal.reason);
  let server: Server;
  const stopStarting = () => forceExit();
  if (stops.signal.aborted) forceExit();
  else stops.signal.addEventListener('abort', stopStarting, { once: true });
  try {
    server = await startServer(config, { signal: stops.signal });
  } catch (err) {
    if (err instanceof StartStoppedError) process.exit(0);
    throw err;
  } finally {
    stops.signal.removeEventListener('abort', stopStarting);
  }
  let stopping = false;
  const stop = () => {
    stopping = true;
    server.app.log.info({ signal: signalled() }, 'shutting down');
    forceExit();
    server.close().then(
      () => process.exit(0),
      (err: unknown) => {
        server.app.log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  // A second signal (an impatient supervisor, Ctrl-C twice) must not cut the shutdown short:
  // requests in flight, the last counters and the index snapshot are still being written.
  stops.onRepeat((signal) => {
    if (stopping) server.app.log.warn({ signal }, 'already shutting down');
  });
  // A signal that came after the start's last step: the server is up, and stops as usual.
  if (stops.signal.aborted) stop();
  else stops.signal.addEventListener('abort', stop, { once: true });
}
