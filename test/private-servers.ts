import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** A free TCP port on loopback. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** A Redis server of the test's own, on its own port, that the test may stop and start. */
export class PrivateRedis {
  private child: ChildProcess | null = null;
  constructor(readonly port: number) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    this.child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: 'ignore',
    });
    for (let i = 0; i < 100; i++) {
      try {
        execFileSync('redis-cli', ['-p', String(this.port), 'ping'], { stdio: 'pipe' });
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    throw new Error('private redis did not start');
  }

  /** Holds every client's commands for `ms` while connections stay open: a Redis that hangs. */
  pause(ms: number): void {
    execFileSync('redis-cli', ['-p', String(this.port), 'CLIENT', 'PAUSE', String(ms), 'ALL'], { stdio: 'pipe' });
  }

  async stop(): Promise<void> {
    const c = this.child;
    this.child = null;
    if (!c || c.exitCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGKILL');
    await exited;
  }
}

function pgBin(name: string): string {
  const versions = readdirSync('/usr/lib/postgresql').sort();
  return path.join('/usr/lib/postgresql', versions[versions.length - 1] as string, 'bin', name);
}

/**
 * A PostgreSQL cluster of the test's own (initdb in a temporary directory, run as the
 * `postgres` user, trust authentication), on its own port, that the test may stop and start.
 */
export class PrivatePostgres {
  private readonly dir: string;
  constructor(readonly port: number) {
    this.dir = mkdtempSync(path.join(tmpdir(), 'reprise-pg-'));
    chmodSync(this.dir, 0o777);
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  private asPostgres(args: string[]): void {
    execFileSync('runuser', ['-u', 'postgres', '--', ...args], { stdio: 'pipe' });
  }

  async init(): Promise<void> {
    this.asPostgres([pgBin('initdb'), '-D', path.join(this.dir, 'data'), '-A', 'trust', '-U', 'postgres', '--no-sync']);
  }

  async start(): Promise<void> {
    this.asPostgres([
      pgBin('pg_ctl'),
      '-D',
      path.join(this.dir, 'data'),
      '-l',
      path.join(this.dir, 'log'),
      '-w',
      '-o',
      `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=on`,
      'start',
    ]);
  }

  async stop(): Promise<void> {
    this.asPostgres([pgBin('pg_ctl'), '-D', path.join(this.dir, 'data'), '-m', 'fast', '-w', 'stop']);
  }

  /**
   * Stops every process of the cluster (SIGSTOP) without closing a connection: a server that hangs,
   * or one cut off by a network that drops packets. `thaw` lets them go on.
   */
  freeze(): void {
    this.signal('SIGSTOP');
  }

  thaw(): void {
    this.signal('SIGCONT');
  }

  private signal(sig: NodeJS.Signals): void {
    const postmaster = Number(readFileSync(path.join(this.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
    const children = execFileSync('pgrep', ['-P', String(postmaster)], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number);
    for (const pid of [postmaster, ...children]) process.kill(pid, sig);
  }

  async destroy(): Promise<void> {
    await this.stop().catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
