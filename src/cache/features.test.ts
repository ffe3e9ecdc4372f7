import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { analyse, aroundShared, EXTRA_FEATURE_NAMES, extraPairFeatures, putAsQuestion } from './features.ts';

const P =
  'The Treaty of Westphalia was signed in 1648 and ended the Thirty Years War in the Holy Roman Empire and the Eighty ' +
  'Years War between Spain and the Dutch Republic, establishing the principle of state sovereignty that shapes ' +
  'international law to this day in Europe and beyond.';
const around = (a: string, b: string) => aroundShared(analyse(a), analyse(b));

describe('aroundShared', () => {
  test('what two texts say around a passage shared at their start and end', () => {
    assert.deepEqual(around(`Summarize this: ${P}`, `Translate this to French: ${P}`), {
      a: 'summarize this',
      b: 'translate this to french',
    });
    assert.deepEqual(around(`${P}\nWho signed it?`, `${P}\nWhen was it signed?`), { a: 'who signed it', b: 'when was it signed' });
  });

  test('a long text that repeats itself is read within a bound, and what differs around it is still found', () => {
    // Each place of a run compared to its end would be 100,000 × 20,000 words.
    const repeated = 'the same line of the log repeats here again and again '.repeat(10_000);
    assert.deepEqual(around(`Summarize this for me: ${repeated} thanks`, `Translate this into French: ${repeated} thanks a lot`), {
      a: 'summarize this for me',
      b: 'translate this into french',
    });
  });

  test('a document over 32 KB is compared whole: what differs in its middle is found', () => {
    const half = `${P} `.repeat(80);
    const a = analyse(`${half}Who signed it, and where? ${half}`);
    const b = analyse(`${half}When was it signed, and why? ${half}`);
    assert.ok(a.words.length > 6_000);
    assert.notEqual(a.canonical, b.canonical);
    assert.deepEqual(aroundShared(a, b), { a: 'who signed it and where', b: 'when was it signed and why' });
  });

  test('a passage shared in the middle, with the texts edited here and there around it', () => {
    // A word changed at the start (a stretch of one word, left to the whole texts' score) and
    // another request at the end.
    assert.deepEqual(around(`Kindly read ${P} Then tell me who signed the treaty.`, `Please read ${P} Then tell me when the war ended.`), {
      a: 'who signed the treaty',
      b: 'when the war ended',
    });
    // An instruction moved from the start to the end: the passage is found first, not the
    // instruction that comes early in one text and late in the other.
    assert.deepEqual(
      around(
        `Please answer in one short sentence only. ${P} Who signed the treaty?`,
        `${P} When was the treaty signed? Please answer in one short sentence only.`,
      ),
      {
        a: 'please answer in one short sentence only who signed the treaty',
        b: 'when was the treaty signed please answer in one short sentence only',
      },
    );
  });

  test('nothing to judge apart: words of the same meaning, edits of a word or two, no long passage', () => {
    assert.equal(around(`Summarize this: ${P}`, `Please summarize this: ${P}`), null);
    assert.equal(around(`Kindly read ${P} Thanks!`, `Please read ${P} Thank you!`), null);
    assert.equal(around('Who signed the Treaty of Westphalia?', 'When was the Treaty of Westphalia signed?'), null);
    assert.equal(around('', ''), null);
  });

  test('the same instruction in other words is nothing to judge apart; another one still is', () => {
    for (const [a, b] of [
      ['Summarize this:', 'Give me a summary of this:'],
      ['Fix the grammar:', 'Correct the grammar:'],
      ['Summarize in one sentence:', 'Summarize in a single sentence:'],
      ['Translate into French:', 'Translate to French:'],
      ['Shorten this:', 'Make this shorter:'],
    ]) {
      assert.equal(around(`${a} ${P}`, `${b} ${P}`), null, `${a} / ${b}`);
      assert.equal(around(`${b} ${P}`, `${a} ${P}`), null, `${b} / ${a}`);
    }
    assert.deepEqual(around(`Classify the sentiment: ${P}`, `Classify the topic: ${P}`), { a: 'sentiment', b: 'topic' });
    assert.deepEqual(around(`Summarize in one sentence: ${P}`, `Summarize in three bullet points: ${P}`), {
      a: 'one sentence',
      b: 'three bullet points',
    });
    // Other question words: other questions, however alike their other words.
    assert.deepEqual(around(`${P}\nWhat did it end?`, `${P}\nHow did it end?`), { a: 'what', b: 'how' });
  });
});

describe('putAsQuestion', () => {
  test('a last line opening with a question word or an auxiliary verb', () => {
    for (const q of ['when was it completed', 'Who invented it?', "what's its main use", 'is it safe', 'Tell me about it.\nhow tall is it'])
      assert.ok(putAsQuestion(q), q);
  });
  test('not keywords or an instruction, whatever comes before the last line', () => {
    for (const k of [
      'its completion date',
      'Its launch date?',
      'inventor of the press',
      'explain judicial review',
      'When was it built?\nits architect',
      '',
    ])
      assert.ok(!putAsQuestion(k), k);
  });
});

describe('analyse', () => {
  test('Latin letters are the same words with or without their accents, other scripts keep their marks', () => {
    assert.equal(analyse('What does bon appétit mean?').canonical, analyse('what does bon appetit mean').canonical);
    assert.equal(analyse('déjà vu').canonical, analyse('Deja vu').canonical);
    assert.equal(analyse('Déjà vu').canonical, analyse('De\u0301ja\u0300 vu').canonical);
    assert.notEqual(analyse('कमल').canonical, analyse('कमला').canonical);
    assert.notEqual(analyse('किताब').canonical, analyse('कताब').canonical);
    // Not in a question about the writing itself.
    assert.notEqual(analyse('How do you spell café?').canonical, analyse('How do you spell cafe?').canonical);
  });
});

describe('extraPairFeatures', () => {
  /** The named features of two texts. */
  const featuresOf = (a: string, b: string): Record<string, number> => {
    const values = extraPairFeatures(analyse(a), analyse(b));
    assert.equal(values.length, EXTRA_FEATURE_NAMES.length);
    return Object.fromEntries(EXTRA_FEATURE_NAMES.map((name, i) => [name, values[i] as number]));
  };

  test('words only one text has are told apart by whether they share a WordNet sense with one only the other has', () => {
    // "mistake" / "error" share a sense; "fix" / "correct" do not.
    const reworded = featuresOf('How do I fix this mistake in my essay?', 'How can I correct an error in my essay?');
    assert.equal(reworded.unshared_kin, Math.log1p(2));
    assert.equal(reworded.unshared_not_kin, Math.log1p(2));
    // "python" / "java" (and "quickly") share none: all four words only one side has count as not kin.
    const other = featuresOf('What is the best way to learn Python?', 'How do I learn Java quickly?');
    assert.equal(other.unshared_kin, 0);
    assert.equal(other.unshared_not_kin, Math.log1p(3));
    assert.ok((other.unshared_not_kin_rarity_max as number) > 10, 'a rare word only one side has');
    // The same content words: nothing unshared.
    const same = featuresOf('Why is the sky blue?', 'why is the sky blue');
    assert.deepEqual([same.unshared_kin, same.unshared_not_kin, same.unshared_not_kin_rarity_max], [0, 0, 0]);
  });

  test('roots overlap where words differ by a derivational ending', () => {
    // "organization" / "organizing": other stems, one root.
    assert.equal(featuresOf('What are the benefits of organization?', 'What are the benefits of organizing?').root_jaccard, 1);
    assert.equal(featuresOf('How do I get happy?', 'What brings happiness?').root_jaccard, 1 / 2);
  });

  test('the word a question asks with: the same, another, or none to compare', () => {
    assert.equal(featuresOf('Why is the sky blue?', 'Why does the sky look blue?').same_asking_word, 1);
    assert.equal(featuresOf('Does it rain in Spain?', 'Did it rain in Spain?').same_asking_word, 1);
    assert.equal(featuresOf('What is the best way to learn Python?', 'How do I learn Python?').same_asking_word, -1);
    assert.equal(featuresOf('Tell me why the sky is blue', 'Why is the sky blue?').same_asking_word, 1);
    assert.equal(featuresOf('the sky is blue', 'Why is the sky blue?').same_asking_word, 0);
  });
});
