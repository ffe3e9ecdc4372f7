import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { closeSharedEmbedder, sharedEmbedder, tempDir } from '../../test/helpers.ts';
import type { Embedder } from '../embedding/interface.ts';
import { CalibratedScorer, loadHitModel } from './calibrated.ts';
import { dot, type Side } from './scorer.ts';

describe('CalibratedScorer', () => {
  let embedder: Embedder;
  let query: Side;
  let candidate: Side;
  let cosine: number;
  before(async () => {
    embedder = await sharedEmbedder();
    const q = 'How can I reset my password?';
    const c = 'How do I reset my password?';
    const [qv, cv] = await embedder.embed([q, c]);
    query = { text: q, vector: qv as Float32Array };
    candidate = { text: c, vector: cv as Float32Array };
    cosine = dot(query.vector, candidate.vector);
  });
  after(closeSharedEmbedder);

  test('the shipped model has a neighbourhood stage', () => {
    assert.ok(loadHitModel().neighbourhood);
  });

  test('a model whose neighbourhood stage has other features is refused with a clear error', () => {
    const model = JSON.parse(readFileSync(new URL('./hit-model.json', import.meta.url), 'utf8'));
    model.neighbourhood.features = ['logit', 'margin'];
    const file = path.join(tempDir(), 'hit-model.json');
    writeFileSync(file, JSON.stringify(model));
    assert.throws(() => loadHitModel(pathToFileURL(file)), /neighbourhood stage on other features/);
  });

  test('without a runner-up the score is the first stage alone', () => {
    const model = loadHitModel();
    const firstStage = new CalibratedScorer({ ...model, neighbourhood: undefined });
    const both = new CalibratedScorer(model);
    assert.equal(both.score(query, candidate, cosine), firstStage.score(query, candidate, cosine, cosine - 0.2));
    assert.notEqual(both.score(query, candidate, cosine, cosine - 0.2), firstStage.score(query, candidate, cosine));
  });

  test('a candidate far nearer than any other question scores above one among equally near ones', () => {
    const scorer = new CalibratedScorer();
    const alone = scorer.score(query, candidate, cosine, cosine - 0.25);
    const crowded = scorer.score(query, candidate, cosine, cosine - 0.005);
    assert.ok(alone > crowded, `${alone} should be above ${crowded}`);
    assert.ok(alone > 0 && alone < 1 && crowded > 0 && crowded < 1);
  });

  test('texts with the same words score 1, contractions written out and greetings as one, unless operators, signs or emoji tell them apart', () => {
    const scorer = new CalibratedScorer();
    const v = query.vector;
    const score = (a: string, b: string) => scorer.score({ text: a, vector: v }, { text: b, vector: v }, 1);
    assert.equal(score('what is the capital of france', 'What is the capital of France?!'), 1);
    assert.equal(score('## Steps\n- install *docker*', 'Steps\n* install docker'), 1);
    // Punctuation of any script, emphasis, joined words and emoji presentation are not symbols.
    for (const [x, y] of [
      ['什么是机器学习？', '什么是机器学习?'],
      ['¿Cuál es la capital de Francia?', 'Cuál es la capital de Francia?'],
      ['Is it state-of-the-art?', 'Is it state of the art?'],
      ['Plan a 3-day trip to Rome', 'Plan a 3 day trip to Rome'],
      ['I ❤️ Paris', 'I ❤ Paris'],
      ['Thanks!', 'thanks'],
      ['Explain **closures** in JS', 'Explain closures in JS'],
      // Contractions written out, with either apostrophe or none, and greetings.
      ["What's your name?", 'What is your name?'],
      ['I can’t log in', 'I cannot log in'],
      ['whats up', "what's up"],
      ['Hi!', 'Hello'],
      ['Hello there!', 'hey'],
      ['Hey, how are you?', 'hello how are you'],
      // A number in words as in digits.
      ['Give me ten tips for better sleep', 'Give me 10 tips for better sleep'],
      ['What are the five best movies of all time?', 'What are the 5 best movies of all time?'],
      ['a twenty-five minute workout', 'a 25 minute workout'],
      // Typed as keywords, without a question mark, as into a search box.
      ['hey, how are you', 'hello how are you'],
      ['whats love', 'what is love'],
      ["what's the time", 'what is the time'],
    ]) {
      assert.equal(score(x as string, y as string), 1, `${x} / ${y}`);
    }
    // Other numbers, and "one" (as often a pronoun), are not made the same.
    assert.notEqual(score('Give me ten tips for better sleep', 'Give me 12 tips for better sleep'), 1);
    assert.notEqual(score('Which one is better?', 'Which 1 is better?'), 1);
    for (const [a, b] of [
      ['What is 5+3?', 'What is 5-3?'],
      ['Is C++ hard to learn?', 'Is C# hard to learn?'],
      ['if x > 5: print(x)', 'if x < 5: print(x)'],
      ['What is -5 squared?', 'What is 5 squared?'],
      ['Reply with 👍', 'Reply with 👎'],
      ['Hi :)', 'Hi :('],
      ['Is x != y here?', 'Is x = y here?'],
      ['What is 5!?', 'What is 5?'],
      ['What is 2**3?', 'What is 2*3?'],
      ['What is ~5 in binary?', 'What is 5 in binary?'],
    ]) {
      assert.equal(score(a as string, b as string), 0, `${a} / ${b}`);
    }
    // Words whose vowel signs differ are other words ("my son" / "my daughter" in Hindi; "news" /
    // "rice" in Thai), and texts without words are themselves.
    for (const [a, b] of [
      ['मेरे बेटे के लिए नाम सुझाओ', 'मेरी बेटी के लिए नाम सुझाओ'],
      ['ข่าววันนี้', 'ข้าววันนี้'],
      ['???', '!!!'],
      // A request about the writing, or quoting it, keeps its words as written.
      ['Is it correct to write "I dont know"?', 'Is it correct to write "I don\'t know"?'],
      ['Fix the spelling: whats your name', "Fix the spelling: what's your name"],
      ["Is 'hey' too casual to open a work email?", "Is 'hello' too casual to open a work email?"],
    ]) {
      assert.notEqual(score(a as string, b as string), 1, `${a} / ${b}`);
    }
    // "its" and "it's" are other words; a greeting with more to it is more than a greeting.
    assert.notEqual(score('What is its size?', "What is it's size?"), 1);
    assert.notEqual(score('Hi, tell me a joke', 'Hello'), 1);
  });

  test('names typed in lower case tell questions apart; the same name reworded still hits', async () => {
    const scorer = new CalibratedScorer();
    const score = async (a: string, b: string) => {
      const [va, vb] = (await embedder.embed([a, b])) as Float32Array[];
      return scorer.score(
        { text: b, vector: vb as Float32Array },
        { text: a, vector: va as Float32Array },
        dot(va as Float32Array, vb as Float32Array),
      );
    };
    for (const [a, b] of [
      ['what is the population of lyon', 'what is the population of marseille'],
      ['how old is the colosseum in rome', 'how old is the pantheon in rome'],
    ]) {
      const s = await score(a as string, b as string);
      assert.ok(s < 0.85, `${a} / ${b}: ${s}`);
    }
    const same = await score('what is the capital of slovakia', 'whats the capital city of slovakia');
    assert.ok(same >= 0.85, `${same}`);
  });

  test('an acronym and its words written out are the same words; two other acronyms are other requests', () => {
    const scorer = new CalibratedScorer();
    const v = query.vector;
    const side = (text: string): Side => ({ text, vector: v });
    const score = (a: string, b: string) => scorer.score(side(a), side(b), 1);
    assert.equal(score('What is ML?', 'What is machine learning?'), 1);
    assert.equal(score('how do APIs work', 'How do application programming interfaces work?'), 1);
    // Capitals only: "ram" is also a word, and the same words typed in lower case are still the same.
    assert.equal(score('How much RAM do I need?', 'how much ram do i need'), 1);
    for (const [a, b] of [
      ['What port does HTTPS use?', 'What port does HTTP use?'],
      ["What's LDL cholesterol?", "What's HDL cholesterol?"],
      ['difference between CPU and RAM', 'difference between CPU and GPU'],
    ]) {
      assert.equal(score(a as string, b as string), 0, `${a} / ${b}`);
      assert.match(scorer.differs(side(a as string), side(b as string)) ?? '', /other acronyms/);
    }
    // An acronym the other text does not name is no difference of its own.
    assert.equal(scorer.differs(side('What did the FBI say about it?'), side('What did the agents say about it?')), null);
  });

  test('a request against a question that names another person or place is another request; the same request reworded is not', () => {
    const scorer = new CalibratedScorer();
    const side = (text: string): Side => ({ text, vector: new Float32Array(512) });
    assert.equal(scorer.differs(side('List the countries that border France'), side('Which countries border Spain?')), 'france/spain');
    assert.equal(scorer.differs(side('List the countries that border France'), side('Which countries border France?')), null);
    // Two questions with capitals on their names are left to the model (news sentences and QQP name
    // one place two ways).
    assert.equal(scorer.differs(side('Which countries border France?'), side('What countries are next to Spain?')), null);
  });

  test('texts whose letters the encoder has no pieces for differ are other requests; the same letters are not', () => {
    const scorer = new CalibratedScorer();
    const side = (text: string): Side => ({ text, vector: new Float32Array(512) });
    assert.match(scorer.differs(side('北京是哪个国家的首都？'), side('东京是哪个国家的首都？')) ?? '', /unreadable/);
    assert.match(scorer.differs(side('ما هي عاصمة فرنسا؟'), side('ما هي عاصمة ألمانيا؟')) ?? '', /unreadable/);
    assert.equal(scorer.score(side('東京の人口は？'), side('大阪の人口は？'), 1), 0);
    // Spaces and punctuation between them, and accents on Latin letters, are no difference.
    assert.equal(scorer.differs(side('北京是哪个国家的首都？'), side('北京 是哪个国家的首都?')), null);
    assert.equal(scorer.differs(side('What is the capital of Việt Nam?'), side('What is the capital of Viet Nam?')), null);
    assert.equal(scorer.differs(side('How do I reset my password?'), side('How can I reset my password?')), null);
  });

  test('texts that name other code (functions, methods, parameters) are other requests; the same code reworded around is not', () => {
    const scorer = new CalibratedScorer();
    const side = (text: string): Side => ({ text, vector: new Float32Array(512) });
    assert.equal(
      scorer.differs(
        side('The `set_column` function replaces a column in the table at a specified position.'),
        side('The `add_column` function adds a column to the table at a specified position.'),
      ),
      'code setcolumn/addcolumn',
    );
    assert.match(
      scorer.differs(
        side('How do I save a dataset with Dataset.save_to_disk()?'),
        side('How do I load a dataset with Dataset.load_from_disk()?'),
      ) ?? '',
      /code/,
    );
    assert.equal(
      scorer.differs(
        side('The `rename_columns` method is used to create a new table with columns renamed to provided names.'),
        side('A new table is generated by the rename_columns() method, with the columns renamed to the specified names.'),
      ),
      null,
    );
  });

  test('texts of no words that differ are other requests; a word on either side leaves them to the model', () => {
    const scorer = new CalibratedScorer();
    const v = new Float32Array(512);
    v[0] = 1;
    const side = (text: string): Side => ({ text, vector: v });
    for (const [a, b] of [
      ['😡', '🙂'],
      ['👍', '👎'],
      ['?', '!'],
    ]) {
      assert.match(scorer.differs(side(a as string), side(b as string)) ?? '', /no words/, `${a} / ${b}`);
      assert.equal(scorer.score(side(a as string), side(b as string), 0.998), 0, `${a} / ${b}`);
    }
    assert.equal(scorer.score(side('👍'), side('👍'), 1), 1);
    assert.equal(scorer.differs(side('😡'), side('I am angry')), null);
  });

  test('another instruction before or after the same text is a miss both ways; the same instruction reworded hits', async () => {
    const scorer = new CalibratedScorer();
    const score = async (a: string, b: string) => {
      const [va, vb] = (await embedder.embed([a, b])) as Float32Array[];
      const side = (text: string, vector: Float32Array): Side => ({ text, vector });
      return scorer.score(side(b, vb as Float32Array), side(a, va as Float32Array), dot(va as Float32Array, vb as Float32Array));
    };
    const review = 'The battery died after two days and support never answered my emails.';
    const code = 'def average(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total / len(xs) - 1';
    // Served at 0.87 to 0.98 before: the shared text outweighs the instruction in the vectors.
    for (const [a, b] of [
      [`Classify the sentiment: ${review}`, `Classify the topic: ${review}`],
      [`Rewrite in passive voice: ${review}`, `Rewrite in future tense: ${review}`],
      [`Translate to French: ${review}`, `Translate to German: ${review}`],
      [`Summarize in one sentence: ${review}`, `Summarize in three bullet points: ${review}`],
      [`Fix the grammar: ${review}`, `Make this shorter: ${review}`],
      [`${code}\n\nFind the bug`, `${code}\n\nAdd comments`],
    ] as const) {
      assert.equal(await score(a, b), 0, `${a} / ${b}`);
      assert.equal(await score(b, a), 0, `${b} / ${a}`);
    }
    for (const [a, b] of [
      [`Summarize this: ${review}`, `Give me a summary of this: ${review}`],
      [`Translate into French: ${review}`, `Translate to French: ${review}`],
      [`Fix the grammar: ${review}`, `Correct the grammar: ${review}`],
      [`${code}\n\nFind the bug`, `${code}\n\nCan you find the bug?`],
    ] as const) {
      const there = await score(a, b);
      const back = await score(b, a);
      assert.ok(there >= 0.85 && back >= 0.85, `${a} / ${b}: ${there}, ${back}`);
    }
  });

  test('the same text set off by a sentence, under another instruction, is a miss; reworded or in quotes, it hits', async () => {
    const scorer = new CalibratedScorer();
    const score = async (a: string, b: string) => {
      const [va, vb] = (await embedder.embed([a, b])) as Float32Array[];
      const side = (text: string, vector: Float32Array): Side => ({ text, vector });
      return scorer.score(side(b, vb as Float32Array), side(a, va as Float32Array), dot(va as Float32Array, vb as Float32Array));
    };
    const article = 'The city council voted on Tuesday to expand the bike lane network across the downtown area.';
    const review = 'The battery died after two days and support never answered my emails.';
    const meeting = 'the meeting has been moved to Thursday afternoon';
    // Served at 0.96 to 0.99 before.
    for (const [a, b] of [
      [`Summarize the following article in one sentence. ${article}`, `Summarize the following article in three bullet points. ${article}`],
      [`Classify the sentiment of this review. ${review}`, `Classify the topic of this review. ${review}`],
      [`${review} Classify the sentiment.`, `${review} Classify the topic.`],
      // Two requests of one verb, read as questions by the first stage ("What is a headline for this
      // news. T?"), are read as typed by the check too (0.66 before).
      [`Write a headline for this news. ${article}`, `Write a tweet about this news. ${article}`],
    ] as const) {
      assert.equal(await score(a, b), 0, `${a} / ${b}`);
      assert.equal(await score(b, a), 0, `${b} / ${a}`);
    }
    for (const [a, b] of [
      [`Summarize the following article in one sentence. ${article}`, `Summarize the following article in a single sentence. ${article}`],
      [`Summarize this article. ${article}`, `Give me a summary of this article. ${article}`],
      [`${review} Fix the grammar.`, `${review} Correct the grammar.`],
      [`Translate '${meeting}' into French`, `Please translate '${meeting}' into French.`],
    ] as const) {
      const there = await score(a, b);
      const back = await score(b, a);
      assert.ok(there >= 0.85 && back >= 0.85, `${a} / ${b}: ${there}, ${back}`);
    }
  });

  test('identical texts score 1 whatever the runner-up', () => {
    const scorer = new CalibratedScorer();
    assert.equal(scorer.score(candidate, { ...candidate }, 1, 0.999), 1);
  });
});
