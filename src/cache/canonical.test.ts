import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { canonicalMessages, promptHash, type Message } from './canonical.ts';

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

test('prompt_hash is the SHA-256 of the canonical text, asked once or again, short or long', () => {
  const asked: Message[][] = [
    [{ role: 'user', content: 'What is the capital of Australia?' }],
    [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Wie heißt die Hauptstadt? "Quoted" \u2028' },
    ],
    [{ role: 'user', content: 'x'.repeat(5000) }],
  ];
  for (let round = 0; round < 3; round++) {
    for (const messages of asked) assert.equal(promptHash(messages), sha256(canonicalMessages(messages)));
  }
  assert.equal(promptHash([{ role: 'user', content: 'hi' }]), sha256('[{"role":"user","content":"hi"}]'));
});

test('prompt_hash stays right for a conversation asked again after thousands of others', () => {
  const first: Message[] = [{ role: 'user', content: 'the first question' }];
  const expected = sha256(canonicalMessages(first));
  assert.equal(promptHash(first), expected);
  for (let i = 0; i < 10_000; i++) {
    const messages: Message[] = [{ role: 'user', content: `question ${i}` }];
    assert.equal(promptHash(messages), sha256(canonicalMessages(messages)));
  }
  assert.equal(promptHash(first), expected);
});
