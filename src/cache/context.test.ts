import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sameReplies } from './context.ts';

describe('earlier replies of a follow-up', () => {
  test('are the same apart from runs of whitespace, not apart from their words', () => {
    assert.ok(sameReplies(['It flows through Brazil.'], [' It flows  through\nBrazil. ']));
    assert.ok(sameReplies([], []));
    assert.ok(!sameReplies(['7'], ['4']));
    assert.ok(!sameReplies(['It flows through Brazil.'], ['It flows throughBrazil.']));
    assert.ok(!sameReplies(['a'], ['a', 'b']));
    assert.ok(!sameReplies(['The answer is 7'], ['The answer is 7.']));
  });
});
