/**
 * The benchmark: drives the real server over loopback and prints each figure beside a baseline
 * measured in the same run; writes bench/results/latest.json.
 *
 *   npm run bench -- [--quick] [--scale 10000,100000] [--vectors sentences,random] [--skip http,store,semantic,index,mix]
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { runCli, startServerProcess, ROOT } from '../test/process.ts';
import { load, probe, type LoadResult, type ProbeResult } from './load.ts';
import { indexScaleInChild, type ScaleResult, type VectorSource } from './scale.ts';
import { replayPrompts, type MixResult } from './mix.ts';

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    scale: { type: 'string' },
    skip: { type: 'string', default: '' },
    vectors: { type: 'string', default: 'sentences,random' },
  },
});
const quick = values.quick;
const skip = new Set(values.skip.split(',').filter(Boolean));
const seconds = quick ? 3 : 8;
const evalDir = fileURLToPath(new URL('../../shared/eval', import.meta.url));

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const fmt = (x: number, d = 2) => x.toFixed(d);
const rows: string[][] = [];
const summary: Record<string, unknown> = { machine: { cpus: cpus().length, model: cpus()[0]?.model, node: process.version }, quick };
const row = (...cells: (string | number)[]) => {
  rows.push(cells.map(String));
  console.log(cells.join(' | '));
};

/** Runs `rounds` alternating measurements of a and b; returns the medians. */
async function paired(rounds: number, a: () => Promise<LoadResult>, b: () => Promise<LoadResult>) {
  const ra: LoadResult[] = [];
  const rb: LoadResult[] = [];
  for (let i = 0; i < rounds; i++) {
    ra.push(await a());
    rb.push(await b());
  }
  const med = (rs: LoadResult[]) => ({
    requestsPerSecond: median(rs.map((r) => r.requestsPerSecond)),
    p50: median(rs.map((r) => r.p50)),
    p99: median(rs.map((r) => r.p99)),
    errors: rs.reduce((s, r) => s + r.errors + r.non2xx, 0),
  });
  return [med(ra), med(rb)] as const;
}

async function startBaseline(size: number): Promise<{ url: string; stop: () => void }> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('./baseline.ts', import.meta.url)), String(size)], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve) => {
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (out.includes('\n')) resolve(out.trim());
    });
  });
  return { url, stop: () => child.kill('SIGTERM') };
}

const user = (content: string) => ({ role: 'user', content });

if (!skip.has('http')) {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'reprise-bench-'));
  const env = { REPRISE_DATA_DIR: dataDir, LOG_LEVEL: 'warn' };
  const created = await runCli(['keys', 'create', '--account', 'bench', '--plan', 'unlimited', '--json'], env);
  const key = (JSON.parse(created.stdout) as { key: string }).key;
  const auth = { authorization: `Bearer ${key}` };
  // The server logs every request, to a file: read from a pipe, its lines would cost this
  // process, which also generates the load, CPU that the bare route's load does not pay.
  const server = await startServerProcess({ ...env, LOG_LEVEL: 'info' }, undefined, { logFile: path.join(dataDir, 'server.log') });
  const base = server.url;
  let baselineServer: { url: string; stop: () => void } | null = null;
  console.log(`server ${base}, data ${dataDir}, ${cpus().length} cores`);

  try {
    // 1. Exact hits against a bare Fastify route with a body of the same size.
    const exactMessages = [user('What is the capital of Australia?')];
    await fetch(`${base}/api/v1/store`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: exactMessages, answer: 'Canberra is the capital of Australia.', model: 'gpt-4o', tokens_used: 12 }),
    });
    const hitBody = await (
      await fetch(`${base}/api/v1/check`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ messages: exactMessages }),
      })
    ).text();
    const baseline = await startBaseline(hitBody.length);
    baselineServer = baseline;
    const checkBody = JSON.stringify({ messages: exactMessages });
    const [exact, bare] = await paired(
      quick ? 1 : 3,
      () => load({ url: `${base}/api/v1/check`, headers: auth, body: checkBody, connections: 16, duration: seconds }),
      () => load({ url: `${baseline.url}/check`, body: checkBody, connections: 16, duration: seconds }),
    );
    const serverSide: number[] = [];
    for (let i = 0; i < 300; i++) {
      const r = (await (
        await fetch(`${base}/api/v1/check`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: checkBody })
      ).json()) as { lookup_time_ms: number };
      serverSide.push(r.lookup_time_ms);
    }
    serverSide.sort((a, b) => a - b);
    const serverP99 = serverSide[Math.floor(serverSide.length * 0.99)] as number;
    console.log('\nfigure | value | baseline | ratio');
    row(
      'exact-hit check, req/s (c=16)',
      fmt(exact.requestsPerSecond, 0),
      fmt(bare.requestsPerSecond, 0),
      fmt(exact.requestsPerSecond / bare.requestsPerSecond),
    );
    row('exact-hit check, p50 / p99 ms', `${exact.p50} / ${exact.p99}`, `${bare.p50} / ${bare.p99}`, '');
    row('exact lookup, server-side p50 / p99 ms', `${serverSide[150]} / ${serverP99}`, '', '');
    summary.exact = {
      exact,
      bare,
      ratio: exact.requestsPerSecond / bare.requestsPerSecond,
      serverSideP50: serverSide[150],
      serverSideP99: serverP99,
    };

    if (!skip.has('store')) {
      // 2. Durable stores.
      const stores = await load({
        url: `${base}/api/v1/store`,
        headers: auth,
        connections: 16,
        duration: seconds,
        body: (i) =>
          JSON.stringify({
            messages: [user(`store benchmark question ${i} ${Math.random()}`)],
            answer: 'An answer of moderate length for the benchmark.',
            model: 'gpt-4o',
          }),
      });
      row('store (durable, embedded), req/s (c=16)', fmt(stores.requestsPerSecond, 0), '', '');
      summary.store = stores;
    }

    if (!skip.has('semantic')) {
      // 3. Semantic checks: misses (new questions) and hits (paraphrases of stored ones).
      const mock = readFileSync(path.join(evalDir, 'gptcache_mock.dev.jsonl'), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { a: string; b: string; label: number })
        .filter((p) => p.label === 1);
      await Promise.all(
        mock.map((p) =>
          fetch(`${base}/api/v1/store`, {
            method: 'POST',
            headers: { ...auth, 'content-type': 'application/json' },
            body: JSON.stringify({ messages: [user(p.a)], answer: 'cached', model: 'gpt-4o' }),
          }),
        ),
      );
      const semantic: Record<string, unknown> = {};
      let n = 0;
      for (const c of [1, 8, 32]) {
        const miss = await load({
          url: `${base}/api/v1/check`,
          headers: auth,
          connections: c,
          duration: seconds,
          body: () =>
            JSON.stringify({
              messages: [user(`An unseen question number ${n++} about topic ${Math.random()}`)],
              cache_types: ['semantic'],
            }),
        });
        const hit = await load({
          url: `${base}/api/v1/check`,
          headers: auth,
          connections: c,
          duration: seconds,
          body: () => JSON.stringify({ messages: [user(`${mock[n++ % mock.length]?.b} ${n}`)] }),
        });
        row(`semantic miss c=${c}: req/s, p50 / p99 ms`, `${fmt(miss.requestsPerSecond, 0)}, ${miss.p50} / ${miss.p99}`, '', '');
        row(`semantic check (paraphrase) c=${c}: req/s, p50 / p99 ms`, `${fmt(hit.requestsPerSecond, 0)}, ${hit.p50} / ${hit.p99}`, '', '');
        semantic[`c${c}`] = { miss, hit };
      }
      summary.semantic = semantic;

      // 4. Exact hits alone and while a semantic load runs, and the same for the bare route (the
      // control: what the load generator and the embedding workers on the same 2 cores do to a
      // server that does nothing else): paced probes (1,000/s on 4 connections, timed to the
      // microsecond), alternating, medians of 5 rounds each.
      const probeAt = (url: string, headers: Record<string, string>, duration = seconds) =>
        probe({ url, headers, body: checkBody, connections: 4, rate: 1000, duration });
      const probeExact = (duration = seconds) => probeAt(`${base}/api/v1/check`, auth, duration);
      const probeBare = (duration = seconds) => probeAt(`${baseline.url}/check`, {}, duration);
      // The semantic load runs in a process of its own, so the probe's timings are not those of a
      // process busy generating load; the probe starts once that process is loaded and sending.
      const semanticLoad = async <T>(rate: number | undefined, during: () => Promise<T>): Promise<[T, LoadResult]> => {
        const options = { url: `${base}/api/v1/check`, key, connections: 16, duration: seconds, ...(rate ? { rate } : {}) };
        const child = spawn(
          process.execPath,
          ['--import', 'tsx', fileURLToPath(new URL('./semantic-load.ts', import.meta.url)), JSON.stringify(options)],
          { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
        );
        let out = '';
        const started = new Promise<void>((resolve) =>
          child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d).includes('start\n') && resolve()),
        );
        const ended = new Promise<LoadResult>((resolve, reject) =>
          child.on('exit', (code) => {
            const last = out.trim().split('\n').pop() ?? '';
            if (code === 0) resolve(JSON.parse(last) as LoadResult);
            else reject(new Error(`the semantic load exited with ${code}`));
          }),
        );
        await started;
        return [await during(), await ended];
      };
      // Unmeasured: the probe's own first seconds (connections, compiled code) read high.
      await probeExact(2);
      await probeBare(2);
      // Saturating: 16 connections as fast as checks are answered. Paced: 200 checks/s, above the
      // 150/s asked of concurrency 32, which leaves the cores room.
      // Each with the probes measured under it and the load's own results.
      const loads = [
        { name: 'saturating', rate: undefined },
        { name: 'paced', rate: 200 },
      ].map((l) => ({ ...l, exact: [] as ProbeResult[], bare: [] as ProbeResult[], background: [] as LoadResult[] }));
      const alone: ProbeResult[] = [];
      const bareAlone: ProbeResult[] = [];
      for (let round = 0; round < (quick ? 1 : 5); round++) {
        alone.push(await probeExact());
        bareAlone.push(await probeBare());
        for (const l of loads) {
          const [e, eb] = await semanticLoad(l.rate, () => probeExact());
          l.exact.push(e);
          l.background.push(eb);
          const [b, bb] = await semanticLoad(l.rate, () => probeBare());
          l.bare.push(b);
          l.background.push(bb);
        }
      }
      const p99 = (rs: ProbeResult[]) => median(rs.map((r) => r.p99));
      const p50 = (rs: ProbeResult[]) => median(rs.map((r) => r.p50));
      const underLoad: Record<string, unknown> = { alone, bareAlone };
      for (const { name, exact, bare, background } of loads) {
        const backgroundRate = median(background.map((r) => r.requestsPerSecond));
        row(
          `exact-hit p50 / p99 ms under a ${name} semantic load (${fmt(backgroundRate, 0)} semantic checks/s)`,
          `${p50(exact)} / ${p99(exact)}`,
          `${p50(alone)} / ${p99(alone)} alone`,
          fmt(p99(exact) / p99(alone)),
        );
        row(
          `control: bare route p50 / p99 ms while Reprise serves the same ${name} load`,
          `${p50(bare)} / ${p99(bare)}`,
          `${p50(bareAlone)} / ${p99(bareAlone)} alone`,
          fmt(p99(bare) / p99(bareAlone)),
        );
        underLoad[name] = {
          loaded: exact,
          bareLoaded: bare,
          background,
          ratio: p99(exact) / p99(alone),
          bareRatio: p99(bare) / p99(bareAlone),
        };
      }
      summary.exactUnderLoad = underLoad;
    }

    // 6. Realistic mix: replay of real prompts (check, store on miss).
    if (!skip.has('mix')) {
      const mix: MixResult = await replayPrompts(base, key, evalDir, quick ? 400 : 2000);
      row('prompt replay: hit rate %, p50 / p99 ms', `${fmt(mix.hitRate * 100, 1)}, ${fmt(mix.p50)} / ${fmt(mix.p99)}`, '', '');
      summary.mix = mix;
    }
  } finally {
    baselineServer?.stop();
    await server.stop('SIGTERM');
    rmSync(dataDir, { recursive: true, force: true });
  }
}

// 5. Index scale, in process.
if (!skip.has('index')) {
  const sizes = (values.scale ?? (quick ? '10000' : '10000,100000')).split(',').map(Number);
  const scale: ScaleResult[] = [];
  for (const size of sizes) {
    for (const source of values.vectors.split(',') as VectorSource[]) {
      const r = await indexScaleInChild(size, source, evalDir);
      scale.push(r);
      row(
        `index ${size} (${source}): search p50 / p99 ms, recall@1, bytes/entry, build s, snapshot save / load s`,
        `${fmt(r.p50, 3)} / ${fmt(r.p99, 3)}, ${fmt(r.recall, 3)}, ${fmt(r.bytesPerEntry, 0)}, ${fmt(r.buildSeconds, 1)}, ${fmt(r.saveSeconds, 1)} / ${fmt(r.loadSeconds, 1)}`,
        `exact scan p50 ${fmt(r.exactP50, 3)}`,
        fmt(r.exactP50 / r.p50, 1),
      );
    }
  }
  summary.index = scale;
}

const out = fileURLToPath(new URL('./results/', import.meta.url));
mkdirSync(out, { recursive: true });
writeFileSync(path.join(out, 'latest.json'), `${JSON.stringify({ ...summary, table: rows }, null, 2)}\n`);
console.log(`\nwrote ${path.join(out, 'latest.json')}`);
