import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { closeSharedEmbedder, sharedEmbedder, startTestApp, user, type TestApp } from '../../../test/helpers.ts';

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

describe('POST /api/v1/check', () => {
  let t: TestApp;
  let key: string;
  before(async () => {
    t = await startTestApp({ embedder: await sharedEmbedder() });
    key = await t.key();
  });
  after(async () => {
    await t.close();
    await closeSharedEmbedder();
  });

  test('a miss carries every miss field, with the documented prompt_hash', async () => {
    const messages = [{ role: 'system', content: 'Be brief.' }, user('What is the tallest mountain on Earth?')];
    const res = await t.post('/api/v1/check', { messages }, key);
    assert.equal(res.statusCode, 200);
    const body = res.json();
    assert.equal(body.cache_hit, false);
    assert.equal(typeof body.message, 'string');
    assert.ok(body.message.length > 0);
    const canonical = '[{"role":"system","content":"Be brief."},{"role":"user","content":"What is the tallest mountain on Earth?"}]';
    assert.equal(body.prompt_hash, createHash('sha256').update(canonical).digest('hex'));
    assert.equal(typeof body.lookup_time_ms, 'number');
    assert.ok(body.lookup_time_ms >= 0);
    assert.match(body.suggested_action, /store/);
    assert.deepEqual(body.search_results, { exact_checked: true, semantic_checked: true, closest_match_score: 0 });
  });

  test('prompt_hash ignores fields other than role and content', async () => {
    const a = await t.post('/api/v1/check', { messages: [user('hash me')] }, key);
    const b = await t.post('/api/v1/check', { messages: [{ role: 'user', content: 'hash me', name: 'x' }] }, key);
    assert.equal(a.json().prompt_hash, b.json().prompt_hash);
  });

  test('miss → store → exact hit with every hit field; usage_count counts uses', async () => {
    const messages = [user('Explain the difference between TCP and UDP in two sentences.')];
    const stored = await t.post(
      '/api/v1/store',
      { messages, answer: 'TCP is reliable and ordered; UDP is not.', model: 'gpt-4o', tokens_used: 42 },
      key,
    );
    assert.equal(stored.statusCode, 200);
    const s = stored.json();
    assert.equal(s.stored, true);
    assert.deepEqual(s.cache_types_stored, ['exact', 'semantic']);
    assert.equal(typeof s.message, 'string');
    assert.ok(s.storage_time_ms > 0);

    const first = (await t.post('/api/v1/check', { messages }, key)).json();
    assert.equal(first.cache_hit, true);
    assert.equal(first.answer, 'TCP is reliable and ordered; UDP is not.');
    assert.equal(first.cache_type, 'exact');
    assert.equal(first.similarity_score, null);
    assert.equal(first.tokens_saved, 42);
    assert.match(first.created_at, ISO);
    assert.ok(Date.now() - Date.parse(first.created_at) < 60_000);
    assert.ok(first.lookup_time_ms >= 0);
    assert.deepEqual(first.metadata, { model: 'gpt-4o', original_tokens: 42, usage_count: 1 });

    const second = (await t.post('/api/v1/check', { messages }, key)).json();
    assert.equal(second.metadata.usage_count, 2);
  });

  test('a paraphrase is a semantic hit with a score at or above the threshold', async () => {
    await t.post(
      '/api/v1/store',
      {
        messages: [user('How do I reset my password?')],
        answer: 'Use the reset link on the sign-in page.',
        model: 'gpt-4o-mini',
        tokens_used: 30,
      },
      key,
    );
    const res = await t.post('/api/v1/check', { messages: [user('How can I reset my password?')] }, key);
    const body = res.json();
    assert.equal(body.cache_hit, true, JSON.stringify(body));
    assert.equal(body.cache_type, 'semantic');
    assert.equal(body.answer, 'Use the reset link on the sign-in page.');
    assert.equal(typeof body.similarity_score, 'number');
    assert.ok(body.similarity_score >= 0.85 && body.similarity_score <= 1, String(body.similarity_score));
    assert.equal(body.metadata.model, 'gpt-4o-mini');
    assert.equal(body.tokens_saved, 30);
  });

  test('a near question stored beside the answer lowers its score; an unrelated one changes nothing', async () => {
    const own = await t.key();
    const q = { messages: [user('What is the difference between TCP and UDP?')], similarity_threshold: 0 };
    await t.post('/api/v1/store', { messages: [user('How do TCP and UDP differ?')], answer: 'A', model: 'm' }, own);
    const alone = (await t.post('/api/v1/check', q, own)).json();
    assert.equal(alone.answer, 'A');

    await t.post('/api/v1/store', { messages: [user('What is the best pizza topping?')], answer: 'B', model: 'm' }, own);
    const beside = (await t.post('/api/v1/check', q, own)).json();
    assert.equal(beside.answer, 'A');
    assert.equal(beside.similarity_score, alone.similarity_score);

    await t.post('/api/v1/store', { messages: [user('What is the difference between TCP and QUIC?')], answer: 'C', model: 'm' }, own);
    const crowded = (await t.post('/api/v1/check', q, own)).json();
    assert.equal(crowded.answer, 'A', JSON.stringify(crowded));
    assert.ok(crowded.similarity_score < alone.similarity_score, `${crowded.similarity_score} should be below ${alone.similarity_score}`);
  });

  test('a candidate below similarity_threshold is a miss that reports the closest score', async () => {
    await t.post(
      '/api/v1/store',
      { messages: [user('What is the boiling point of water at sea level?')], answer: '100 °C', model: 'gpt-4o' },
      key,
    );
    const q = { messages: [user('At sea level, what temperature does water boil at?')] };
    const strict = (await t.post('/api/v1/check', { ...q, similarity_threshold: 1 }, key)).json();
    assert.equal(strict.cache_hit, false);
    assert.ok(strict.search_results.closest_match_score > 0 && strict.search_results.closest_match_score < 1);
    const loose = (await t.post('/api/v1/check', { ...q, similarity_threshold: 0 }, key)).json();
    assert.equal(loose.cache_hit, true);
    assert.equal(loose.cache_type, 'semantic');
    // The scores shown are thresholds that take the same candidate: a client may set them.
    const atShown = (await t.post('/api/v1/check', { ...q, similarity_threshold: loose.similarity_score }, key)).json();
    assert.equal(atShown.cache_hit, true, `threshold ${loose.similarity_score}`);
    // A threshold above the score shown is a miss: a hit never shows a score below its threshold.
    const above = (await t.post('/api/v1/check', { ...q, similarity_threshold: loose.similarity_score + 0.000001 }, key)).json();
    assert.equal(above.cache_hit, false, `threshold ${loose.similarity_score + 0.000001}`);
    const atClosest = (
      await t.post('/api/v1/check', { ...q, similarity_threshold: strict.search_results.closest_match_score }, key)
    ).json();
    assert.equal(atClosest.cache_hit, true, `threshold ${strict.search_results.closest_match_score}`);
  });

  test('cache_types selects the caches searched', async () => {
    const messages = [user('Name three primary colours.')];
    await t.post('/api/v1/store', { messages, answer: 'Red, yellow, blue.', model: 'gpt-4o' }, key);

    const semanticOnly = (await t.post('/api/v1/check', { messages, cache_types: ['semantic'] }, key)).json();
    assert.equal(semanticOnly.cache_hit, true);
    assert.equal(semanticOnly.cache_type, 'semantic');
    assert.ok(semanticOnly.similarity_score > 0.99);

    const paraphrase = [user('List three primary colours.')];
    const exactOnly = (await t.post('/api/v1/check', { messages: paraphrase, cache_types: ['exact'] }, key)).json();
    assert.equal(exactOnly.cache_hit, false);
    assert.deepEqual(exactOnly.search_results, { exact_checked: true, semantic_checked: false, closest_match_score: 0 });
  });

  test('the same follow-up after a different first question is a miss', async () => {
    const a = [
      user('Tell me about the Treaty of Versailles.'),
      { role: 'assistant', content: 'It ended WWI.' },
      user('When was it signed?'),
    ];
    await t.post('/api/v1/store', { messages: a, answer: 'On 28 June 1919.', model: 'gpt-4o' }, key);
    const b = [
      user('Tell me about the Declaration of Independence.'),
      { role: 'assistant', content: 'It declared independence.' },
      user('When was it signed?'),
    ];
    const res = (await t.post('/api/v1/check', { messages: b }, key)).json();
    assert.equal(res.cache_hit, false);
  });

  test('the same follow-up after a near question about something else is a miss', async () => {
    // Embedded with its context, "when was it founded?" after the United Nations and after NATO
    // is nearly the same text; the first questions alone are not the same question.
    const a = [
      user('What are the main functions of the United Nations?'),
      { role: 'assistant', content: '(reply)' },
      user('when was it founded'),
    ];
    await t.post('/api/v1/store', { messages: a, answer: 'In 1945.', model: 'gpt-4o' }, key);
    const b = [user('What are the main functions of NATO?'), { role: 'assistant', content: '(reply)' }, user('when was it founded')];
    const res = (await t.post('/api/v1/check', { messages: b }, key)).json();
    assert.equal(res.cache_hit, false);
    assert.ok(res.search_results.closest_match_score < 0.5, `closest_match_score ${res.search_results.closest_match_score}`);
  });

  test('the same follow-up after a reworded first question and the same reply is a semantic hit', async () => {
    // The reply is the same when the reworded first question was itself answered from the cache.
    const a = [user('Tell me about the Amazon River.'), { role: 'assistant', content: 'It flows through Brazil.' }, user('how long is it')];
    await t.post('/api/v1/store', { messages: a, answer: 'About 6,400 km.', model: 'gpt-4o' }, key);
    const b = [
      user('What can you tell me about the Amazon River?'),
      { role: 'assistant', content: 'It flows through  Brazil. ' },
      user('how long is it'),
    ];
    const res = (await t.post('/api/v1/check', { messages: b }, key)).json();
    assert.equal(res.cache_hit, true);
    assert.equal(res.cache_type, 'semantic');
    assert.equal(res.answer, 'About 6,400 km.');
    assert.ok(res.similarity_score >= 0.85, `similarity_score ${res.similarity_score}`);
  });

  test('a follow-up typed as keywords after a reworded first question is a semantic hit; one asking another thing is a miss', async () => {
    const reply = { role: 'assistant', content: 'A physicist and chemist who won two Nobel Prizes.' };
    const a = [user('Who was Marie Curie?'), reply, user('when did she die')];
    await t.post('/api/v1/store', { messages: a, answer: 'On 4 July 1934.', model: 'gpt-4o' }, key);
    const check = async (followUp: string) =>
      (await t.post('/api/v1/check', { messages: [user('Tell me about Marie Curie.'), reply, user(followUp)] }, key)).json();
    const same = await check('date of her death');
    assert.equal(same.cache_hit, true);
    assert.equal(same.cache_type, 'semantic');
    assert.equal(same.answer, 'On 4 July 1934.');
    assert.ok(same.similarity_score >= 0.85, `similarity_score ${same.similarity_score}`);
    for (const other of ['date of her birth', 'her place of birth']) {
      const res = await check(other);
      assert.equal(res.cache_hit, false, other);
    }
  });

  test('a follow-up typed as keywords that names another kind of answer than the question is a miss', async () => {
    const reply = { role: 'assistant', content: 'A machine that presses inked type onto paper.' };
    const a = [user('Tell me about the printing press.'), reply, user('who invented it')];
    await t.post('/api/v1/store', { messages: a, answer: 'Johannes Gutenberg.', model: 'gpt-4o' }, key);
    const check = async (followUp: string) =>
      (await t.post('/api/v1/check', { messages: [user('What was the printing press?'), reply, user(followUp)] }, key)).json();
    const same = await check('inventor of the press');
    assert.equal(same.cache_hit, true);
    assert.equal(same.answer, 'Johannes Gutenberg.');
    // A year, not a person: scored 0.97 before the kinds of answer were compared.
    const other = await check('year of its invention');
    assert.equal(other.cache_hit, false);
  });

  test('an acronym and its words written out are one request; another acronym is a miss', async () => {
    await t.post('/api/v1/store', { messages: [user('What is ML?')], answer: 'Machine learning is…', model: 'gpt-4o' }, key);
    const spelled = (await t.post('/api/v1/check', { messages: [user('What is machine learning?')] }, key)).json();
    assert.equal(spelled.cache_hit, true);
    assert.equal(spelled.cache_type, 'semantic');
    assert.equal(spelled.answer, 'Machine learning is…');
    // Scored 0.001 before acronyms were written out.
    assert.ok(spelled.similarity_score >= 0.85, `similarity_score ${spelled.similarity_score}`);
    const other = (await t.post('/api/v1/check', { messages: [user('What is NLP?')] }, key)).json();
    assert.equal(other.cache_hit, false);
    // The same follow-up after the first question typed either way.
    const reply = { role: 'assistant', content: 'A field of AI in which programs learn from data.' };
    await t.post(
      '/api/v1/store',
      { messages: [user('What is ML?'), reply, user('who coined the term')], answer: 'Arthur Samuel.', model: 'gpt-4o' },
      key,
    );
    const followUp = (
      await t.post('/api/v1/check', { messages: [user('What is machine learning?'), reply, user('who coined the term')] }, key)
    ).json();
    assert.equal(followUp.cache_hit, true);
    assert.equal(followUp.answer, 'Arthur Samuel.');

    await t.post('/api/v1/store', { messages: [user('How much RAM does a laptop need?')], answer: '16 GB.', model: 'gpt-4o' }, key);
    // "ram" is written out only in capitals; the same words typed in lower case are the same request.
    const lower = (await t.post('/api/v1/check', { messages: [user('how much ram does a laptop need?')] }, key)).json();
    assert.equal(lower.cache_hit, true);
    assert.equal(lower.answer, '16 GB.');
  });

  test('a request wrapped in "can you tell me", "do you know" or a form of "what does it mean" hits the plain one; another request in the same wrapper is a miss', async () => {
    await t.post('/api/v1/store', { messages: [user('What is the capital of France?')], answer: 'Paris.', model: 'gpt-4o' }, key);
    for (const text of [
      'Do you know the capital of France?',
      'Can you tell me the capital of France?',
      "I'd like to know the capital of France",
    ]) {
      const hit = (await t.post('/api/v1/check', { messages: [user(text)] }, key)).json();
      assert.equal(hit.cache_hit, true, text);
      assert.equal(hit.answer, 'Paris.', text);
    }
    const other = (await t.post('/api/v1/check', { messages: [user('Do you know the capital of Germany?')] }, key)).json();
    assert.equal(other.cache_hit, false);

    await t.post(
      '/api/v1/store',
      { messages: [user('What does ephemeral mean?')], answer: 'Lasting a very short time.', model: 'gpt-4o' },
      key,
    );
    for (const text of ['What is the meaning of ephemeral?', 'define ephemeral', 'Could you tell me what ephemeral means?']) {
      const hit = (await t.post('/api/v1/check', { messages: [user(text)] }, key)).json();
      assert.equal(hit.cache_hit, true, text);
      assert.equal(hit.answer, 'Lasting a very short time.', text);
      // Scored 0.26 to 0.74 before wrappers were taken off.
      assert.ok(hit.similarity_score >= 0.95, `${text}: similarity_score ${hit.similarity_score}`);
    }
    assert.equal((await t.post('/api/v1/check', { messages: [user('What does ubiquitous mean?')] }, key)).json().cache_hit, false);

    // The same wrapper around another request.
    await t.post(
      '/api/v1/store',
      { messages: [user('Could you tell me the speed of light?')], answer: '299,792 km/s.', model: 'gpt-4o' },
      key,
    );
    const sound = (await t.post('/api/v1/check', { messages: [user('Could you tell me the speed of sound?')] }, key)).json();
    assert.equal(sound.cache_hit, false);
    const light = (await t.post('/api/v1/check', { messages: [user('What is the speed of light?')] }, key)).json();
    assert.equal(light.answer, '299,792 km/s.');
  });

  test('two requests made with the same verb are read as the questions they amount to: another thing asked is a miss', async () => {
    await t.post(
      '/api/v1/store',
      { messages: [user('Explain recursion in programming')], answer: 'A function that calls itself…', model: 'gpt-4o' },
      key,
    );
    // Scored 0.99 as two requests; as "What is recursion / iteration in programming?", 0.15.
    const other = (await t.post('/api/v1/check', { messages: [user('Explain iteration in programming')] }, key)).json();
    assert.equal(other.cache_hit, false);
    for (const text of ['Can you explain recursion in programming?', 'What is recursion in programming?']) {
      const hit = (await t.post('/api/v1/check', { messages: [user(text)] }, key)).json();
      assert.equal(hit.cache_hit, true, text);
      assert.equal(hit.answer, 'A function that calls itself…', text);
    }
  });

  test('two requests typed as keywords that differ in one word are read as questions: a sibling is a miss, a synonym or a word that asks nothing more hits', async () => {
    const cases: [string, string, boolean][] = [
      ['when to prune hydrangeas', 'when to fertilize hydrangeas', false],
      ['how to stop all docker containers', 'how to remove all docker containers', false],
      ['regex to match a US phone number', 'regex to match a UK phone number', false],
      ['python add an item to a list', 'python append an item to a list', true],
      ['how can i hide a column in google sheets', 'how do i hide a column in google sheets', true],
    ];
    for (const [stored, asked, hit] of cases) {
      const namespace = `keywords-${Math.random()}`;
      await t.post('/api/v1/store', { messages: [user(stored)], answer: `for ${stored}`, model: 'gpt-4o', namespace }, key);
      const res = (await t.post('/api/v1/check', { messages: [user(asked)], namespace }, key)).json();
      assert.equal(res.cache_hit, hit, `${stored} / ${asked}: ${JSON.stringify(res)}`);
      if (hit) assert.equal(res.answer, `for ${stored}`);
    }
  });

  test('the same follow-up after the same question but another reply is a miss', async () => {
    // "Multiply it by 3" is about the reply: 7 and 4 have different answers.
    const first = user('Pick a random number from 1 to 10.');
    const a = [first, { role: 'assistant', content: '7' }, user('Multiply it by 3.')];
    await t.post('/api/v1/store', { messages: a, answer: '21', model: 'gpt-4o' }, key);
    const b = [first, { role: 'assistant', content: '4' }, user('Multiply it by 3.')];
    const res = (await t.post('/api/v1/check', { messages: b }, key)).json();
    assert.equal(res.cache_hit, false);
    const same = (
      await t.post('/api/v1/check', { messages: [first, { role: 'assistant', content: '7' }, user('multiply it by 3')] }, key)
    ).json();
    assert.equal(same.cache_hit, true);
    assert.equal(same.answer, '21');
  });

  test('a long shared text with another instruction or question around it is a miss; the same request reworded around it hits', async () => {
    const text =
      'The Treaty of Westphalia, signed in 1648, ended the Thirty Years War in the Holy Roman Empire and the Eighty Years War ' +
      'between Spain and the Dutch Republic. It established the principle of state sovereignty.';
    for (const [stored, other] of [
      [`Summarize this: ${text}`, `Translate this to French: ${text}`],
      [`${text}\nWho signed it?`, `${text}\nWhen was it signed?`],
    ] as const) {
      const namespace = `around-${Math.random()}`;
      await t.post('/api/v1/store', { messages: [user(stored)], answer: 'cached', model: 'gpt-4o', namespace }, key);
      const res = (await t.post('/api/v1/check', { messages: [user(other)], namespace }, key)).json();
      assert.equal(res.cache_hit, false, other);
      const same = (
        await t.post('/api/v1/check', { messages: [user(stored.replace('Summarize this', 'Please summarize this'))], namespace }, key)
      ).json();
      if (stored.startsWith('Summarize')) assert.equal(same.answer, 'cached');
    }
  });

  test('the same text with another instruction before or after it is a miss; the same instruction reworded hits', async () => {
    const review = 'The battery died after two days and support never answered my emails.';
    const code = 'def average(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total / len(xs) - 1';
    // Longer than the shared passage of 30 words that is judged apart by its own score.
    const article =
      'The city council voted on Tuesday to expand the bike lane network across the downtown area, adding twelve miles of ' +
      'protected lanes over the next three years. Supporters said the plan would cut traffic deaths, while several shop ' +
      'owners worried that losing parking spaces would drive customers away.';
    const check = async (stored: string, query: string) => {
      const namespace = `instruction-${Math.random()}`;
      await t.post('/api/v1/store', { messages: [user(stored)], answer: 'cached', model: 'gpt-4o', namespace }, key);
      return (await t.post('/api/v1/check', { messages: [user(query)], namespace }, key)).json();
    };
    for (const [a, b] of [
      [`Classify the sentiment: ${review}`, `Classify the topic: ${review}`],
      [`Rewrite in passive voice: ${review}`, `Rewrite in future tense: ${review}`],
      [`Summarize in one sentence: ${review}`, `Summarize in three bullet points: ${review}`],
      [`${code}\n\nFind the bug`, `${code}\n\nAdd comments`],
    ] as const) {
      assert.equal((await check(a, b)).cache_hit, false, `${a} / ${b}`);
      assert.equal((await check(b, a)).cache_hit, false, `${b} / ${a}`);
    }
    for (const [a, b] of [
      [`Summarize this: ${review}`, `Give me a summary of this: ${review}`],
      [`Summarize this: ${article}`, `Give me a summary of this: ${article}`],
      [`Fix the grammar: ${article}`, `Correct the grammar: ${article}`],
      [`Translate into French: ${article}`, `Translate to French: ${article}`],
    ] as const) {
      const there = await check(a, b);
      assert.equal(there.answer, 'cached', `${a} / ${b}: ${JSON.stringify(there)}`);
      const back = await check(b, a);
      assert.equal(back.answer, 'cached', `${b} / ${a}: ${JSON.stringify(back)}`);
    }
  });

  test('a template edited here and there with another request inside is a miss; with the same request it hits', async () => {
    // Edited at its start and its end: no long passage is shared at the start and end together.
    const template = (tutor: string, problem: string, thanks: string) =>
      `You are a ${tutor} maths tutor. I will give you a problem; think step by step, show each step on its own line, ` +
      'check your arithmetic twice, and give the final answer in bold at the end. Keep the explanation short and plain, ' +
      'and use words a twelve year old would know. When a step needs a formula, write the formula first and then put the ' +
      'numbers into it. When there is more than one way to solve it, choose the shortest and mention the other in one ' +
      'sentence. Round money to the cent and lengths to one decimal place, and always state the units. ' +
      `Avoid jargon, and say so if the problem cannot be solved.\n\nProblem: ${problem}\n\n${thanks}`;
    const train = 'A train leaves at 3 pm travelling at 60 km/h. How far has it gone by 5:30 pm?';
    const namespace = `template-${Math.random()}`;
    const stored = template('careful', train, 'Thanks!');
    await t.post('/api/v1/store', { messages: [user(stored)], answer: 'cached', model: 'gpt-4o', namespace }, key);
    const other = template('patient', 'A farmer has 17 sheep and all but 9 run away. How many are left?', 'Thank you!');
    const miss = (await t.post('/api/v1/check', { messages: [user(other)], namespace }, key)).json();
    assert.equal(miss.cache_hit, false);
    const same = (await t.post('/api/v1/check', { messages: [user(template('patient', train, 'Thank you!'))], namespace }, key)).json();
    assert.equal(same.cache_hit, true);
    assert.equal(same.answer, 'cached');
  });

  test('a request naming another thing of one kind, swapping two things, naming other quantities or another person, or with one word replaced by its opposite is a miss; a farther entry asking the same is served', async () => {
    // The query is nearer the first entry (cosine 0.83–0.98) than the second (0.52–0.91).
    for (const [other, same, query] of [
      [
        'How do I sort a list in ascending order in Python?',
        'In Python, how can I sort a list from largest to smallest (descending)?',
        'How do I sort a list in descending order in Python?',
      ],
      ['Convert 10 miles to km', 'How many miles are 10 kilometres?', 'Convert 10 km to miles'],
      ['Give me a lasagna recipe for 2 people', 'I need lasagna for a party of 20: recipe?', 'Give me a lasagna recipe for 20 people'],
      // Typed in lower case: another person.
      ['how tall is lebron james', 'stephen curry height in feet and inches', 'how tall is stephen curry'],
      // The same words but for one of a pair that has other senses too.
      [
        'How do I turn on Bluetooth on Windows 11?',
        'Windows 11: how can I switch Bluetooth off?',
        'How do I turn off Bluetooth on Windows 11?',
      ],
    ] as const) {
      const namespace = `contrast-${Math.random()}`;
      const check = { messages: [user(query)], namespace, similarity_threshold: 0 };
      await t.post('/api/v1/store', { messages: [user(other)], answer: 'other', model: 'gpt-4o', namespace }, key);
      const res = (await t.post('/api/v1/check', check, key)).json();
      assert.equal(res.cache_hit, false, query);
      await t.post('/api/v1/store', { messages: [user(same)], answer: 'same', model: 'gpt-4o', namespace }, key);
      const served = (await t.post('/api/v1/check', check, key)).json();
      assert.equal(served.answer, 'same', JSON.stringify(served));
    }
  });

  test('the same words but for two things of one kind in WordNet are other requests, and so is a farther entry that says the same other thing', async () => {
    const miss = async (stored: string[], query: string) => {
      const namespace = `kin-${Math.random()}`;
      for (const text of stored) await t.post('/api/v1/store', { messages: [user(text)], answer: text, model: 'gpt-4o', namespace }, key);
      const res = (await t.post('/api/v1/check', { messages: [user(query)], namespace, similarity_threshold: 0 }, key)).json();
      assert.equal(res.cache_hit, false, `${query}: ${JSON.stringify(res)}`);
      assert.equal(res.search_results.closest_match_score, 0);
    };
    await miss(['best badminton racket for beginners'], 'best tennis racket for beginners');
    await miss(['foods high in calcium'], 'foods high in iron');
    await miss(['What notes are in a C major chord?'], 'What notes are in a C minor chord?');
    // "full" where the query says "half": the second entry, in other words, was served at 0.90.
    await miss(['how to tie a full windsor knot', 'How do I tie a full Windsor knot?'], 'how to tie a half windsor knot');
  });

  test('a word of a pair among the same words in another order, a ranked superlative, a conversion the other way and a negation added are other requests', async () => {
    const miss = async (stored: string, query: string) => {
      const namespace = `other-${Math.random()}`;
      await t.post('/api/v1/store', { messages: [user(stored)], answer: stored, model: 'gpt-4o', namespace }, key);
      const res = (await t.post('/api/v1/check', { messages: [user(query)], namespace, similarity_threshold: 0 }, key)).json();
      assert.equal(res.cache_hit, false, `${query}: ${JSON.stringify(res)}`);
      assert.equal(res.search_results.closest_match_score, 0);
    };
    // Served at 0.96, 0.99 and 0.94 before.
    await miss('python write a list to a csv file', 'python read csv file into a list');
    await miss('SQL query to find the highest salary', 'SQL query to find the second highest salary');
    await miss('Convert 5 kilometers to miles.', 'how many km is 5 miles');
    // A negation added: 0.98.
    await miss('Excel formula to count cells that are blank', 'Excel formula to count cells that are not blank');
  });

  test('another request behind the served entry is no rival to it: its score is as when alone', async () => {
    const namespace = `rival-${Math.random()}`;
    const check = { messages: [user('How do I sort a list in descending order in Python?')], namespace, similarity_threshold: 0 };
    // Cosines with the query: 0.980 and 0.963.
    await t.post(
      '/api/v1/store',
      { messages: [user('In Python, how do I sort a list in descending order?')], answer: 'desc', model: 'm', namespace },
      key,
    );
    const alone = (await t.post('/api/v1/check', check, key)).json();
    await t.post(
      '/api/v1/store',
      { messages: [user('How do I sort a list in ascending order in Python?')], answer: 'asc', model: 'm', namespace },
      key,
    );
    const beside = (await t.post('/api/v1/check', check, key)).json();
    assert.equal(beside.answer, 'desc');
    assert.equal(beside.similarity_score, alone.similarity_score);
  });

  test('the runner-up is found behind more other requests than a first search returns: the score is as with it alone', async () => {
    const query = 'How do I use the `set_column` method of a pyarrow Table?';
    const served = 'How to use the set_column method of a pyarrow Table?';
    const rival = 'How do I work with a pyarrow Table in Python?';
    const others = ['add_column', 'append_column', 'remove_column', 'rename_columns', 'select', 'drop_columns', 'cast', 'filter', 'slice'];
    const score = async (stored: string[]) => {
      const namespace = `runner-up-${Math.random()}`;
      for (const text of stored) await t.post('/api/v1/store', { messages: [user(text)], answer: text, model: 'm', namespace }, key);
      const res = (await t.post('/api/v1/check', { messages: [user(query)], namespace, similarity_threshold: 0 }, key)).json();
      assert.equal(res.answer, served, JSON.stringify(res));
      return res.similarity_score as number;
    };
    const withRival = await score([served, rival]);
    // Each of the others names another method: another request, nearer than the rival and no rival.
    const behind = await score([served, rival, ...others.map((m) => `How do I use the \`${m}\` method of a pyarrow Table?`)]);
    assert.equal(behind, withRival);
    // Alone, the first stage decides: the rival counts.
    assert.notEqual(await score([served]), withRival);
  });

  test('a conversation whose earlier turn asks another thing is passed over for one that asks the same', async () => {
    const later = (first: string) => [
      user(first),
      { role: 'assistant', content: 'Day 1: the Colosseum. Day 2: the Vatican. Day 3: Trastevere.' },
      user('Which restaurants would you add?'),
      { role: 'assistant', content: 'Roscioli, Da Enzo and Armando al Pantheon.' },
      user('Make it cheaper.'),
    ];
    for (const order of [0, 1]) {
      const namespace = `earlier-${order}-${Math.random()}`;
      const stored = [
        { messages: later('Plan a 3 day trip to Rome for 20 people'), answer: 'twenty', model: 'm', namespace },
        { messages: later('Please plan a 3 day trip to Rome for 2 people'), answer: 'two', model: 'm', namespace },
      ];
      for (const body of order === 0 ? stored : [...stored].reverse()) await t.post('/api/v1/store', body, key);
      const res = (
        await t.post('/api/v1/check', { messages: later('Plan a 3-day trip to Rome for 2 people, please'), namespace }, key)
      ).json();
      assert.equal(res.answer, 'two', `stored ${order === 0 ? '20 first' : '2 first'}: ${JSON.stringify(res)}`);
    }
  });

  test('a different system prompt never matches semantically', async () => {
    const q = 'Translate "good morning" into French.';
    await t.post(
      '/api/v1/store',
      { messages: [{ role: 'system', content: 'Answer in English.' }, user(q)], answer: 'Bonjour', model: 'gpt-4o' },
      key,
    );
    const res = (await t.post('/api/v1/check', { messages: [{ role: 'system', content: 'Answer like a pirate.' }, user(q)] }, key)).json();
    assert.equal(res.cache_hit, false);
  });

  test('entries for another model nearer the query do not hide one for the requested model', async () => {
    // An account of its own: the candidates are these entries only.
    const key = await t.key();
    const store = (content: string, answer: string, model: string) =>
      t.post('/api/v1/store', { messages: [user(content)], answer, model }, key);
    // The same question, further from the query (cosine 0.77) than each of the other model's (0.79–0.97).
    assert.equal(
      (await store('For my geography homework I need to know the capital of France.', 'Paris, for gpt-4o', 'gpt-4o')).statusCode,
      200,
    );
    const nearer = [
      "What's the capital of France?",
      'Capital of France?',
      "What is France's capital?",
      'Which city is the capital of France?',
      'Tell me the capital of France.',
      'What is the capital city of France?',
      'Name the capital of France.',
      'Which city is France’s capital?',
      'What city is the capital of France?',
    ];
    for (const q of nearer) assert.equal((await store(q, 'Paris', 'gpt-4o-mini')).statusCode, 200);
    const messages = [user('What is the capital of France, please?')];
    // Any usable candidate is served at this threshold: which one is the point.
    const anyModel = (await t.post('/api/v1/check', { messages, similarity_threshold: 0 }, key)).json();
    assert.equal(anyModel.answer, 'Paris');
    const forModel = (await t.post('/api/v1/check', { messages, similarity_threshold: 0, model: 'gpt-4o' }, key)).json();
    assert.equal(forModel.cache_hit, true, JSON.stringify(forModel));
    assert.equal(forModel.answer, 'Paris, for gpt-4o');
    assert.equal(forModel.metadata.model, 'gpt-4o');
  });

  test('questions in a script the encoder has no pieces for are a miss when those letters differ, and hit when they are the same', async () => {
    // Each run of such letters is one unknown piece to the encoder: these pairs embed exactly alike.
    for (const [stored, other] of [
      ['北京是哪个国家的首都？', '东京是哪个国家的首都？'],
      ['東京の人口は？', '大阪の人口は？'],
      ['ما هي عاصمة فرنسا؟', 'ما هي عاصمة ألمانيا؟'],
      ['What does 你好 mean?', 'What does 谢谢 mean?'],
    ] as const) {
      const namespace = `unreadable ${stored}`;
      await t.post('/api/v1/store', { messages: [user(stored)], answer: `the answer to ${stored}`, namespace }, key);
      const res = (await t.post('/api/v1/check', { messages: [user(other)], namespace }, key)).json();
      assert.equal(res.cache_hit, false, `${stored} / ${other}: ${JSON.stringify(res)}`);
    }
    const same = (
      await t.post('/api/v1/check', { messages: [user('What is the meaning of 你好?')], namespace: 'unreadable What does 你好 mean?' }, key)
    ).json();
    assert.equal(same.cache_type, 'semantic', JSON.stringify(same));
    assert.equal(same.answer, 'the answer to What does 你好 mean?');
  });
});

describe('POST /api/v1/check, the text of an exact hit', () => {
  test('is JSON.stringify of the hit in the spec order, hit after hit and after the answer is stored again', async () => {
    const t = await startTestApp();
    try {
      const key = await t.key();
      const messages = [user('Quote me exactly.')];
      // The last is longer than the answers whose text is kept: written out as any other body.
      for (const answer of [
        'Say "hi" \\ — 你好 \u2028 \t end </script>',
        'A second answer.',
        `${'a "long" answer '.repeat(2000)}\u2028 end`,
      ]) {
        const stored = await t.post('/api/v1/store', { messages, answer, model: 'gpt-4o', tokens_used: 7 }, key);
        assert.equal(stored.statusCode, 200);
        // An answer stored again is counted afresh.
        let uses = 0;
        for (let i = 0; i < 3; i++) {
          const res = await t.post('/api/v1/check', { messages }, key);
          assert.equal(res.statusCode, 200);
          assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
          const body = res.json();
          assert.equal(body.metadata.usage_count, ++uses);
          const expected = {
            cache_hit: true,
            answer,
            cache_type: 'exact',
            lookup_time_ms: body.lookup_time_ms,
            tokens_saved: 7,
            created_at: body.created_at,
            similarity_score: null,
            metadata: { model: 'gpt-4o', original_tokens: 7, usage_count: uses },
            entry_id: stored.json().entry_id,
          };
          assert.equal(res.body, JSON.stringify(expected));
          assert.equal(res.headers['content-length'], String(Buffer.byteLength(res.body)));
        }
      }
    } finally {
      await t.close();
    }
  });
});
