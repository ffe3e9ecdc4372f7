import assert from 'node:assert/strict';
import { test } from 'node:test';
import { acronymsIn, expandAcronyms, namesWords, otherAcronyms } from './acronyms.ts';

test('acronyms are written out as words of prose, with plurals and possessives', () => {
  assert.equal(expandAcronyms('What is ML?'), 'What is machine learning?');
  assert.equal(expandAcronyms('How do APIs work?'), 'How do application programming interfaces work?');
  assert.equal(expandAcronyms("NASA's budget"), "national aeronautics and space administration's budget");
  assert.equal(expandAcronyms('Is the CPU or the GPU faster?'), 'Is the central processing unit or the graphics processing unit faster?');
  assert.equal(expandAcronyms('I use AI.'), 'I use artificial intelligence.');
  assert.equal(expandAcronyms('set up 2FA'), 'set up two factor authentication');
  // A number counts them; millilitres alone are a unit.
  assert.equal(expandAcronyms('top 10 AI tools'), 'top 10 artificial intelligence tools');
  assert.equal(expandAcronyms('rent 2 GPUs'), 'rent 2 graphics processing units');
});

test('most acronyms are written out however they are typed; those that are words in lower case only in capitals', () => {
  assert.equal(expandAcronyms('whats an api'), 'whats an application programming interface');
  assert.equal(expandAcronyms('what is nato'), 'what is north atlantic treaty organization');
  assert.equal(expandAcronyms('How much RAM do I need?'), 'How much random access memory do I need?');
  for (const text of ['how much ram do I need?', 'un perro', 'a led light', 'how many ml in a cup', 'UN PERRO'])
    assert.equal(expandAcronyms(text), text);
  assert.equal(expandAcronyms('the UN summit'), 'the united nations summit');
});

test('acronyms inside code, after a number or joined to another word are left as they are', () => {
  for (const text of [
    'JSON.parse fails',
    'import os; os.path',
    'src/api/routes',
    'api_key',
    'convert 500 ML to cups',
    'AI-powered tools',
    'Ides of March',
  ])
    assert.equal(expandAcronyms(text), text);
});

test('acronyms are found by their words in the singular, and those words in another text, plural or not', () => {
  assert.deepEqual(
    [...acronymsIn('How do GPUs and the CPU differ? See the FAQs')],
    ['graphics processing unit', 'central processing unit', 'frequently asked questions'],
  );
  assert.equal(namesWords('what are application programming interfaces', 'application programming interface'), true);
  assert.equal(namesWords('what is machine learning', 'machine learning'), true);
  assert.equal(namesWords('a machine learner', 'machine learning'), false);
  assert.equal(namesWords('the xmachine learning', 'machine learning'), false);
});

test('only some acronyms are written out when asked', () => {
  const only = new Set(['central processing unit']);
  assert.equal(expandAcronyms('GPUs and CPUs', only), 'GPUs and central processing units');
  assert.equal(expandAcronyms('no acronym here', only), 'no acronym here');
});

test('texts that each name an acronym the other does not name are other requests', () => {
  const read = (text: string) => ({ acronyms: acronymsIn(text), normalised: text.toLowerCase() });
  assert.match(otherAcronyms(read('what is dna'), read('what is rna')) ?? '', /deoxyribonucleic acid \/ ribonucleic acid/);
  assert.equal(otherAcronyms(read('what is dna'), read('what is deoxyribonucleic acid made of')), null);
  assert.equal(otherAcronyms(read('ai and ml jobs'), read('ml jobs')), null);
  // An acronym and its plural are one thing.
  assert.equal(otherAcronyms(read('What are LLMs?'), read('What is an LLM?')), null);
  // ECG and EKG are one test.
  assert.equal(otherAcronyms(read('what does an ecg show'), read('what does an ekg show')), null);
});
