import assert from 'node:assert/strict';
import { test } from 'node:test';
import { plainWording, unwrap } from './wording.ts';

const asked = (text: string) => unwrap(text).asked;

test('a polite wrapper around a request is taken off, and a question only in its wrapper becomes the request', () => {
  assert.equal(plainWording('Can you tell me the capital of France?'), 'What is the capital of France?');
  assert.equal(plainWording('Do you know the capital of France?'), 'What is the capital of France?');
  assert.equal(plainWording('I want to know the capital of France'), 'What is the capital of France?');
  assert.equal(plainWording('Tell me the capital of France.'), 'What is the capital of France?');
  assert.equal(plainWording('Could you please explain photosynthesis to me?'), 'Explain photosynthesis to me');
  assert.equal(plainWording('can u show me how to reverse a list in python?'), 'show me how to reverse a list in python');
  assert.equal(plainWording('Would you mind explaining what a black hole is?'), 'Explain what a black hole is');
  assert.equal(plainWording('Is it possible to tell me how many ounces are in a pound?'), 'Tell me how many ounces are in a pound');
  assert.equal(plainWording('I was wondering if you could tell me who wrote Hamlet'), 'Tell me who wrote Hamlet');
  assert.equal(plainWording('Any idea what year the Berlin Wall fell?'), 'Tell me what year the Berlin Wall fell');
  assert.equal(plainWording("What's the population of Canada, do you know?"), "What's the population of Canada?");
  assert.equal(plainWording('Please explain recursion'), 'Explain recursion');
  // A greeting stays; the wrapper after it goes.
  assert.equal(plainWording('Hi, can you tell me who wrote Hamlet?'), 'Hi, tell me who wrote Hamlet');
  // Each line of a conversation's text on its own.
  assert.equal(plainWording('Who wrote Hamlet?\ncan you tell me when it was written?'), 'Who wrote Hamlet?\ntell me when it was written');
});

test('a question of what a word or short phrase means is read in one form', () => {
  for (const text of [
    'What is the meaning of ephemeral?',
    'what is the definition of ephemeral?',
    "What's meant by ephemeral?",
    'Define ephemeral?',
    'ephemeral meaning?',
    'the meaning of the word ephemeral?',
    'Could you tell me what ephemeral means?',
  ])
    assert.equal(plainWording(text).toLowerCase(), 'what does ephemeral mean?', text);
  assert.equal(plainWording('What does quid pro quo mean'), 'What does quid pro quo mean?');
  // "Define" a phrase asks what the thing is, and is left as typed.
  assert.equal(plainWording('Define machine learning'), 'Define machine learning');
  assert.equal(plainWording('What is the definition of machine learning?'), 'What does machine learning mean?');
  // A follow-up's "it" and a longer request are no word asked the meaning of.
  for (const text of [
    'What does it mean?',
    'Define a function that returns the sum of two numbers',
    'What is the meaning of the number seven in the Bible and in other old texts?',
  ])
    assert.equal(plainWording(text), text);
});

test('texts without a wrapper, and wrappers that are the request, are left as they are', () => {
  for (const text of [
    'What is the capital of France?',
    'Can you swim?',
    'Do you know Python?',
    'Can I use a VPN at work?',
    'Tell me a joke',
    'Tell me about the Eiffel Tower',
    'Would you rather fly or be invisible?',
    'I want to know more',
    "Can't you tell me?",
    '',
  ])
    assert.equal(plainWording(text), text, text);
  // A document is left as it is.
  const doc = `Can you tell me the capital of France? ${'word '.repeat(1000)}`;
  assert.equal(plainWording(doc), doc);
});

test('what was taken off is said by its kind, alike for wrappers of one kind', () => {
  assert.equal(unwrap('What is the capital of France?').wrapper, '');
  assert.equal(unwrap('Can you tell me the speed of light?').wrapper, unwrap('Could you please tell me the speed of sound?').wrapper);
  assert.notEqual(unwrap('Can you tell me the speed of light?').wrapper, unwrap('Do you know the speed of light?').wrapper);
  assert.notEqual(unwrap('Define ephemeral').wrapper, unwrap('What is the meaning of ephemeral?').wrapper);
  // Idempotent.
  for (const text of ['Can you tell me the capital of France?', 'Define ephemeral', 'Do you know who wrote Hamlet?'])
    assert.equal(plainWording(plainWording(text)), plainWording(text));
});

test('a request of one line that amounts to a question is also put as that question, with its kind and verb', () => {
  assert.equal(asked('Explain recursion in programming')?.typed, 'What is recursion in programming?');
  assert.equal(asked('tell me about the Eiffel Tower.')?.typed, 'what is the Eiffel Tower?');
  assert.equal(asked('Tell me how to boil an egg')?.typed, 'How to boil an egg?');
  assert.equal(asked('Explain what a prime number is')?.typed, 'What is a prime number?');
  // Without its wrapper too.
  assert.deepEqual(asked('Can you explain recursion?'), {
    typed: 'Can you explain recursion?',
    plain: 'What is recursion?',
    typedRequest: '',
    plainRequest: 'explain',
  });
  assert.equal(asked('Explain how solar panels work')?.typed, 'How solar panels work?');
  assert.equal(asked('Explain what causes a solar eclipse')?.typed, 'What causes a solar eclipse?');
  assert.equal(asked('tell me how long to boil an egg')?.typed, 'how long to boil an egg?');
  assert.equal(asked('Define recursion in programming')?.typed, 'What is recursion in programming?');
  // A task: what it is asked for, read as the thing asked about.
  assert.equal(asked('Give me a recipe for scones')?.typed, 'What is a recipe for scones?');
  assert.equal(asked('write a haiku about the ocean')?.typed, 'what is a haiku about the ocean?');
  assert.equal(asked('Explain recursion')?.typedRequest, asked('Explain iteration')?.typedRequest);
  assert.notEqual(asked('Give me a recipe for scones')?.typedRequest, asked('Write a recipe for scones')?.typedRequest);
  assert.notEqual(asked('Explain recursion')?.typedRequest, asked('Describe iteration')?.typedRequest);
  // Another side of a topic asked with the same verb.
  assert.equal(
    asked('Explain the history of the Electoral College')?.typedRequest,
    asked('Explain how the Electoral College works')?.typedRequest,
  );
  // No question: about the assistant, a joke, what follows, a conversation's lines.
  for (const text of [
    'Tell me about yourself',
    'Tell me a joke',
    'Explain the following code:',
    'Translate this into Spanish: see you later',
    'Write the following as a list',
    'Explain this',
    'What is recursion?',
    'Tell me about the Eiffel Tower.\nhow tall is it',
  ])
    assert.equal(asked(text), null, text);
});

test('a chat opener and a closing courtesy around what is asked are taken off', () => {
  assert.equal(plainWording('Quick question: how do I clear the cache in Chrome?'), 'How do I clear the cache in Chrome?');
  assert.equal(plainWording('quick q - how long should a steak rest?'), 'how long should a steak rest?');
  assert.equal(plainWording("I'm curious, how does a microwave heat food?"), 'How does a microwave heat food?');
  assert.equal(plainWording('Just wondering, how long does a tattoo take to heal?'), 'How long does a tattoo take to heal?');
  assert.equal(plainWording('Out of curiosity, why is the sky blue?'), 'Why is the sky blue?');
  assert.equal(plainWording('Sorry to bother you, but how do I reset my router?'), 'How do I reset my router?');
  assert.equal(plainWording('Sorry if this is a dumb question, what is a REST API?'), 'What is a REST API?');
  assert.equal(
    plainWording("What's the difference between baking soda and baking powder, if you don't mind me asking?"),
    "What's the difference between baking soda and baking powder?",
  );
  assert.equal(plainWording('What is the capital of Peru? Thanks!'), 'What is the capital of Peru?');
  assert.equal(plainWording('Translate good morning into French please.'), 'Translate good morning into French.');
  // With a wrapper too: the question only in its wrapper is still the request.
  assert.equal(plainWording('Quick question, can you tell me the capital of France, please?'), 'What is the capital of France?');
  // An opener that is the question, a courtesy that is the request, and no punctuation after the opener.
  for (const text of ['Question time!', 'Say please', 'Sorry', 'so what is love?', 'Thank you', 'Curious George is a book I loved'])
    assert.equal(plainWording(text), text, text);
});

test('a word asked the meaning of is read in one form however it is set off or accented', () => {
  assert.equal(plainWording('Gaslighting - definition?'), 'What does Gaslighting mean?');
  assert.equal(plainWording('In lieu of — meaning?'), 'What does In lieu of mean?');
  assert.equal(plainWording('ubiquitous: meaning'), 'what does ubiquitous mean?');
});

test('a courtesy is a word of its own, not the end of one', () => {
  for (const text of [
    'What is beauty?',
    'How do I treat social anxiety?',
    'Is it safe to use a VPN on public wifi?',
    'Who wrote Pretty Woman?',
  ])
    assert.equal(plainWording(text), text, text);
});

test('two things set against each other as keywords are read as the question of their difference', () => {
  assert.equal(plainWording('weather vs climate'), 'what is the difference between weather and climate?');
  assert.equal(plainWording('major vs. minor key difference'), 'what is the difference between major and minor key?');
  assert.equal(
    plainWording('Quick question: iphone 15 versus iphone 15 pro'),
    'What is the difference between iphone 15 and iphone 15 pro?',
  );
  // A question put otherwise, a clause after a comma, a case name and a long line are left as typed.
  for (const text of [
    'Which is better, tea vs coffee?',
    'SSD vs HDD, which is faster?',
    'Roe v. Wade',
    'the battle of man vs nature in literature and film and art and other media',
  ])
    assert.equal(plainWording(text), text, text);
});
