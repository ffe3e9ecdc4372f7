import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Tokenizer } from '@tensorflow-models/universal-sentence-encoder';
import { seededRandom } from '../util/random.ts';
import { SentencePieceTokenizer } from './tokenizer.ts';
import { readVocabulary } from './use-lite.model.ts';

const vocabulary = readVocabulary();
const published = new Tokenizer(vocabulary);
const tokenizer = new SentencePieceTokenizer(vocabulary);

test("gives the published tokenizer's ids", () => {
  const texts = [
    '',
    ' ',
    '  two  spaces  ',
    'What is the capital city of Australia?',
    'How do I reverse a linked list in Python without using extra memory?',
    'Ünïcödé, emoji 🚀 and numbers 3.14159 / 2,718 — all in one line!',
    '東京から大阪まで何キロですか',
    'ｆｕｌｌｗｉｄｔｈ and ﬁ ligatures',
    'e\u0301 combining, 👍🏽 skin tone, 🇫🇷 flag, 👨‍👩‍👧 family',
    '\u2581 the separator itself, \u0000 and \t tabs\nand lines',
    'zzzzqqqqxxxxjjjj unknown runs ǂǂǂǂ ᚠᚢᚦ',
    'x'.repeat(300),
  ];
  // And random strings from letters, digits, punctuation, other scripts, marks and emoji.
  const random = seededRandom(42);
  const pool = Array.from(
    'abcdefghij klmnop qrstuv wxyz  ABCXYZ 0123456789 .,!?-_\'"()[] éüßçñ 漢字かな 한국어 ру́с 😀👍🏽\u200d\u0301 \u2581\t\n',
  );
  for (let i = 0; i < 2000; i++) {
    let s = '';
    const length = Math.floor(random() * 50);
    for (let j = 0; j < length; j++) s += pool[Math.floor(random() * pool.length)];
    texts.push(s);
  }
  for (const text of texts) assert.deepEqual(tokenizer.encode(text), published.encode(text), JSON.stringify(text));
});
