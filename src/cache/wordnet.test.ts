import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { ROOT } from '../../test/process.ts';
import { tempDir } from '../../test/helpers.ts';
import { kinWords, type KinFile } from './wordnet.ts';

describe('kinWords', () => {
  test('antonyms, and nouns under one hypernym, in their commonest senses', () => {
    assert.equal(kinWords('ascending', 'descending'), 'antonyms');
    assert.equal(kinWords('major', 'minor'), 'antonyms');
    assert.equal(kinWords('boiling', 'freezing'), 'antonyms');
    assert.equal(kinWords('half', 'full'), 'antonyms');
    assert.equal(kinWords('tennis', 'badminton'), 'siblings');
    assert.equal(kinWords('iron', 'calcium'), 'siblings');
    assert.equal(kinWords('haiku', 'sonnet'), 'siblings');
    // Inflected forms, by WordNet's endings.
    assert.equal(kinWords('violins', 'cellos'), 'siblings');
    assert.equal(kinWords('strawberries', 'blueberries'), 'siblings');
  });

  test('no kin: one lemma, a shared sense, one a kind of the other, unknown words, numbers', () => {
    assert.equal(kinWords('roses', 'rose'), null);
    assert.equal(kinWords('fall', 'autumn'), null);
    assert.equal(kinWords('hard', 'difficult'), null);
    assert.equal(kinWords('movie', 'film'), null);
    assert.equal(kinWords('vegan', 'vegetarian'), null);
    assert.equal(kinWords('fridge', 'freezer'), null);
    assert.equal(kinWords('tmux', 'vim'), null);
    assert.equal(kinWords('3', '5'), null);
    assert.equal(kinWords('tennis', 'tennis'), null);
  });

  test('the shipped table is what scripts/wordnet-kin.ts makes from WordNet, with its licence', () => {
    const out = path.join(tempDir(), 'kin.json');
    execFileSync(process.execPath, ['--import', 'tsx', 'scripts/wordnet-kin.ts', '--out', out], { cwd: ROOT, stdio: 'pipe' });
    const shipped = readFileSync(new URL('./wordnet-kin.json', import.meta.url), 'utf8');
    assert.ok(readFileSync(out, 'utf8') === shipped, 'src/cache/wordnet-kin.json differs from a fresh npm run wordnet');
    const file = JSON.parse(shipped) as KinFile;
    assert.match(file.license.join('\n'), /Copyright 2006 by Princeton University/);
    assert.equal(file.senses, 2);
  });
});
