/**
 * USE-lite's tokenizer (`src/embedding/tokenizer.ts`) beside the one published with the model (the
 * baseline, what Reprise ran before), on the same texts in the same run, alternating rounds,
 * medians: the user turns of ../shared/eval's prompt files, and long documents cut into the
 * embedder's pieces of 2,000 characters, as `UseLiteModel` tokenizes them.
 *
 *   node --import tsx bench/tokenizer.ts
 */
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Tokenizer } from '@tensorflow-models/universal-sentence-encoder';
import { promptConversations } from '../eval/data.ts';
import { SentencePieceTokenizer } from '../src/embedding/tokenizer.ts';
import { readVocabulary, textPieces } from '../src/embedding/use-lite.model.ts';

const ROUNDS = 5;
const vocabulary = readVocabulary();
const published = new Tokenizer(vocabulary);
const tokenizer = new SentencePieceTokenizer(vocabulary);
const evalDir = path.join(import.meta.dirname, '..', '..', 'shared', 'eval');
const turns = promptConversations(evalDir).flatMap((c) => c.filter((m) => m.role === 'user').map((m) => m.content));
const document = turns.join(' ');
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

function time(encode: (t: string) => number[], texts: readonly string[]): number {
  const t0 = performance.now();
  for (const t of texts) for (const p of textPieces(t)) encode(p);
  return performance.now() - t0;
}

const sets: [string, string[], number][] = [
  [
    `${turns.length} user turns (mean ${Math.round(turns.reduce((a, t) => a + t.length, 0) / turns.length)} characters)`,
    turns,
    turns.length,
  ],
  ['a document of 100 KB', [document.slice(0, 100_000)], 1],
  ['a document of 1 MB', [document.slice(0, 1_000_000).padEnd(1_000_000, ' lorem ipsum')], 1],
];
console.log('texts | published tokenizer | Reprise | published / Reprise');
for (const [name, texts, count] of sets) {
  const a: number[] = [];
  const b: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    a.push(time((t) => published.encode(t), texts));
    b.push(time((t) => tokenizer.encode(t), texts));
  }
  const unit = count > 1 ? 'µs per text' : 'ms';
  const scale = count > 1 ? 1000 / count : 1;
  console.log(
    `${name} | ${(median(a) * scale).toFixed(1)} ${unit} | ${(median(b) * scale).toFixed(1)} ${unit} | ${(median(a) / median(b)).toFixed(1)}`,
  );
}
