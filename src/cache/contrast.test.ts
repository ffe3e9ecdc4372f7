import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  contrastingWords,
  differentQuantities,
  differentRequest,
  negated,
  otherInstruction,
  otherPeriod,
  otherDirection,
  otherNames,
  otherRank,
  quantitiesOf,
  replacedReordered,
  replacedWord,
  swappedRoles,
} from './contrast.ts';
import { analyse } from './features.ts';

describe('contrastingWords', () => {
  const contrast = (a: string, b: string) => contrastingWords(analyse(a), analyse(b));

  test('names the two things of one kind that the texts differ in', () => {
    assert.equal(contrast('Sort the list in ascending order', 'sort the list in descending order'), 'ascending/descending');
    assert.equal(contrast('Find the second highest salary in SQL', 'find the 3rd highest salary in SQL'), 'second/third');
    assert.equal(contrast('Convert 10 km to miles', 'Convert 10 km to meters'), 'mile/meter');
    assert.equal(contrast('How do I reverse a list in python?', 'How do I reverse a list in java?'), 'python/java');
    assert.equal(contrast('What should I cook for dinner?', 'What should I cook for breakfast?'), 'dinner/breakfast');
    assert.equal(contrast('Translate "good morning" to French', 'translate good morning to german'), 'french/german');
    assert.equal(contrast('how many calories in a boiled egg', 'how many calories in a fried egg'), 'boil/fry');
    assert.equal(contrast('what is the atomic number of carbon', 'what is the atomic number of oxygen'), 'carbon/oxygen');
    assert.equal(contrast('how to deploy a docker container on aws', 'how to deploy a docker container on azure'), 'aws/azure');
    assert.equal(contrast('what happens during evaporation', 'what happens during condensation'), 'evaporation/condensation');
    assert.equal(contrast('How many bones are in the adult human hand?', 'How many bones are in the adult human foot?'), 'hand/foot');
    assert.equal(contrast('How do I create a component in React?', 'How do I create a component in Vue?'), 'react/vue');
    assert.equal(
      contrast('is it safe to take aspirin while pregnant', 'is it safe to take tylenol while pregnant'),
      'aspirin/acetaminophen',
    );
    assert.equal(contrast('What are the symptoms of ADHD?', 'What causes ADHD?'), 'symptom/causes');
    assert.equal(contrast('Explain the risks of AI', 'Explain the history of AI'), 'disadvantages/history');
    assert.equal(contrast('pros of electric cars', 'What are the drawbacks of electric cars?'), 'advantages/disadvantages');
    assert.equal(contrast('What is the capital of Canada', 'What is the largest city in Canada?'), 'capital/largest');
  });

  test('what a question asks of its topic, reworded, is no contrast; nor is an aspect word in another sense', () => {
    assert.equal(contrast('What are the symptoms of diabetes?', 'what are the signs of diabetes'), null);
    assert.equal(contrast('What causes migraines?', 'What are the reasons for migraines?'), null);
    assert.equal(contrast('What are the advantages of solar panels?', 'benefits of solar panels'), null);
    assert.equal(contrast('Can I take advantage of the free tier?', 'What are the drawbacks of the free tier?'), null);
    assert.equal(contrast('When was the treaty signed?', 'What caused the treaty?'), null);
  });

  test('spellings of one thing, and texts naming both things, are no contrast', () => {
    assert.equal(contrast('What is the 2nd largest city in Spain?', 'Which is the second-largest city in Spain?'), null);
    assert.equal(contrast('How many km is a mile?', 'How many kilometres are in one mile?'), null);
    assert.equal(contrast('Python or Java for a beginner?', 'Should a beginner learn Java?'), null);
    assert.equal(contrast('Sort the list from smallest to largest', 'Sort the list in ascending order'), null);
    // Words a request uses in other senses are in no set.
    assert.equal(contrast('My computer is slowing down', 'How can I speed up my computer?'), null);
    assert.equal(contrast('Show me how to make a div invisible', 'How do I hide a div?'), null);
    assert.equal(contrast('What time is it in Tokyo right now?', 'Tokyo time now? Left my watch at home'), null);
    assert.equal(contrast('Make me a 7-day meal plan', 'a meal plan for one week'), null);
    assert.equal(contrast('Write a Python script to load a CSV', 'Python script to read a CSV'), null);
    assert.equal(contrast('Will I lose muscle if I skip the gym?', 'Will skipping the gym undo my muscle gains?'), null);
    assert.equal(contrast('Fun things to do on a Saturday night', 'fun things to do on a Saturday evening'), null);
    assert.equal(contrast('how long to roast potatoes in the oven', 'how long to bake potatoes in the oven'), null);
    assert.equal(contrast('say hello in chinese', 'say hello in mandarin'), null);
    assert.equal(contrast('side effects of paracetamol', 'side effects of tylenol'), null);
    // English names the language asked in as often as the one asked about.
    assert.equal(contrast("What does 'merci' mean in English?", "Translate the French word 'merci'"), null);
  });

  test('inflections and possessives name the same thing', () => {
    assert.equal(contrast('How do I encrypt a file?', 'How does one decrypt files?'), 'encrypt/decrypt');
    assert.equal(contrast("what's on today's menu", "what's on tomorrow's menu"), 'today/tomorrow');
    assert.equal(contrast('Cheap flights on Mondays', 'cheap flights on Fridays'), 'monday/friday');
    assert.equal(contrast('interview questions for a junior developer', 'interview questions for a senior developer'), 'junior/senior');
    assert.equal(contrast('How far away is the Moon?', 'how far away is the sun'), 'moon/sun');
    assert.equal(contrast('what is gravity like on the moon', 'what is gravity like on earth'), 'moon/earth');
    assert.equal(
      contrast('Explain the French Revolution.\nwhat were its causes', 'Tell me about the French Revolution.\nwhat were its consequences'),
      'causes/effects',
    );
  });
});

describe('swappedRoles', () => {
  const swapped = (a: string, b: string) => swappedRoles(analyse(a), analyse(b));

  test('finds two things that change places around the same words', () => {
    assert.equal(swapped('Convert 10 miles to km', 'convert 10 km to miles'), 'mile to km');
    assert.equal(swapped('Is Python faster than Java?', 'Is Java faster than Python?'), 'python faster than java');
    assert.equal(swapped('cheap flights from Paris to Rome', 'Cheap flights from Rome to Paris'), 'paris to rome');
    assert.equal(swapped('Subtract 3 from 10', 'subtract 10 from 3'), '3 from 10');
    // Longer things and longer words between, articles and possessives aside.
    assert.equal(swapped('first train from Boston to New York', 'first train from New York to Boston'), 'boston to new york');
    assert.equal(swapped('20 is what percent of 80?', '80 is what percent of 20?'), '20 is what percent of 80');
    assert.equal(swapped('how to convert an int to a string in java', 'how to convert a string to an int in java'), 'integer to string');
    assert.equal(swapped('a polite email from a teacher to a parent', 'a polite email from a parent to the teacher'), 'teacher to parent');
    assert.equal(swapped('how many US dollars is 500 euros', 'how many euros is 500 US dollars'), 'us dollar is 500 euro');
  });

  test('a symmetric relation, a moved phrase, or both orders in one text are no swap', () => {
    assert.equal(swapped('What is the difference between Python and Java?', 'What is the difference between Java and Python?'), null);
    assert.equal(swapped('Compare Python with Java', 'Compare Java with Python'), null);
    assert.equal(swapped('Python vs Java for web apps', 'Java vs Python for web apps'), null);
    assert.equal(swapped('In Python, how do I sort a list?', 'How do I sort a list in Python?'), null);
    assert.equal(swapped('Convert miles to km and km to miles', 'convert km to miles'), null);
    assert.equal(swapped('How is Python different from Java?', 'How is Java different from Python?'), null);
    // A list in another order.
    assert.equal(swapped('results for 2002, 2001 and 2000', 'results for 2000, 2001 and 2002'), null);
    assert.equal(swapped('Can I mix bleach with vinegar?', 'Can I mix vinegar with bleach?'), null);
    assert.equal(swapped('weather in Paris in June', 'weather in June in Paris'), null);
    assert.equal(swapped('what is 7 times 8', 'what is 8 times 7'), null);
    assert.equal(swapped('How far is London from Paris?', 'How far is Paris from London?'), null);
    assert.equal(swapped('how many km from Tokyo to Osaka', 'How many kilometres from Osaka to Tokyo?'), null);
    assert.equal(swapped('how many hours from tokyo to osaka by train', 'how many hours from osaka to tokyo by train'), null);
    assert.equal(swapped('how many km is 10 miles', 'how many miles is 10 km'), 'km is 10 mile');
    assert.equal(swapped('how many hours from 9am to 5pm', 'how many hours from 5pm to 9am'), '9am to 5pm');
    assert.equal(swapped('Is happy the opposite of sad?', 'Is sad the opposite of happy?'), null);
    assert.equal(swapped('swap x with y in python', 'swap y with x in python'), null);
    // The same conversion asked both ways; converting the other way is another request.
    assert.equal(swapped('How many ml in 2 cups?', '2 cups in ml'), null);
    assert.equal(swapped('10 miles in km', '10 km in miles'), 'mile in km');
    // A list in another order, its commas gone.
    assert.equal(swapped('pros and cons of react, vue, angular', 'pros and cons of angular, vue, react'), null);
  });

  test('spellings of one thing read as one, and "with" orders what is replaced', () => {
    assert.equal(swapped('Convert 10 miles to km', 'Convert 10 kilometers to miles'), 'mile to km');
    assert.equal(swapped('100 USD to EUR', '100 euros to dollars'), 'dollar to euro');
    assert.equal(swapped('Replace tabs with spaces', 'replace spaces with tabs'), 'tabs with spaces');
    // Spellings of one thing of the pairs that count only as the one word replaced: "int" is "integer".
    assert.equal(swapped('How to convert an integer to a string in Java', 'How to convert string to int in Java'), 'integer to string');
  });
});

describe('quantities', () => {
  test('one quantity however written; digits inside words are none', () => {
    // "10k" is also read as 10: "a 10k race" is 10 km.
    assert.deepEqual([...quantitiesOf('under 10k, ₹10,000 or 10000 INR').keys()].sort(), ['10', '10000']);
    assert.deepEqual([...quantitiesOf('1.5 million people').keys()], ['1500000']);
    assert.deepEqual([...quantitiesOf('a recipe for two, not twenty-five').keys()], ['2', '25']);
    assert.deepEqual([...quantitiesOf('convert mp3 to wav, H2O, API v2').keys()], []);
    assert.deepEqual([...quantitiesOf('It costs 5.').keys()], ['5']);
    assert.deepEqual([...quantitiesOf('ten thousand steps, two hundred and ten dollars').keys()], ['10000', '210']);
    assert.deepEqual([...quantitiesOf('which one is better').keys()], []);
    assert.deepEqual([...quantitiesOf('a hundred and fifty, or five and seven').keys()], ['150', '5', '7']);
    for (const [x, y] of [
      ['3 pm', '15:00'],
      ['the 4th of July', 'July 4'],
      ['2.5kg', '2.5 kg'],
      ['1.1 millions', '1.1 million'],
      ['$85.6-million', '$85.6 million'],
      ['9.35AM', '09:35 AM'],
    ]) {
      assert.deepEqual([...quantitiesOf(x as string).keys()], [...quantitiesOf(y as string).keys()], `${x} / ${y}`);
    }
    // Versions keep their digits.
    assert.notDeepEqual([...quantitiesOf('Python 3.10').keys()], [...quantitiesOf('Python 3.1').keys()]);
  });

  test('differ when each text names a quantity the other does not', () => {
    const q = (a: string, b: string) => differentQuantities(quantitiesOf(a), quantitiesOf(b));
    assert.equal(q('a lasagna recipe for 2 people', 'a lasagna recipe for 20 people'), '2/20');
    assert.equal(q('best phone under 15k', 'best phone under 15,000'), null);
    assert.equal(q('a 5k training plan', 'a training plan for a 5 km race'), null);
    assert.equal(q('meet at 3pm', 'meet at 5pm'), 't900/t1020');
    // Forms that read two ways match either reading.
    for (const [x, y] of [
      ['a 2.5M budget', 'a 2.5 million budget'],
      ['at 3:00', 'at 3pm'],
      ['sort [3,1,2]', 'sort the list 3, 1, 2'],
      ['on 7/4/1776', 'on July 4, 1776'],
      ['1/2 cup of milk', '0.5 cup of milk'],
      ['1,5 kg', '1.5 kg'],
      ['kids aged five and seven', 'kids aged 5 and 7'],
    ]) {
      assert.equal(q(x as string, y as string), null, `${x} / ${y}`);
    }
    assert.equal(q('1.5kg of flour', '1.7kg of flour'), '1.5/1.7');
    // Roman numerals after a name; not the pronoun.
    assert.equal(q('Explain the causes of World War I', 'Explain the causes of World War II'), '1/2');
    assert.equal(q('who was the first wife of henry viii', 'who was the first wife of henry vii'), '8/7');
    assert.deepEqual([...quantitiesOf('Can I go? Then I went.').keys()], []);
    // Quantities of different things are often one amount in two units.
    assert.equal(q('Is a 90 minute nap too long?', 'is a 1.5 hour nap too long'), null);
    assert.equal(q('max dose of paracetamol, 4g a day?', 'paracetamol max dose: 4000 mg per day?'), null);
    assert.equal(q('Major events of the 21st century', 'major events of the twenty-first century'), null);
    // The same thing under another word, a hyphen, an irregular plural.
    assert.equal(q('Plan a trip to Paris for 2 people', 'Plan a trip to Paris for 20 guests'), '2/20');
    assert.equal(q('Birthday gift for a 5 year old', 'Birthday gift for a 7-year-old'), '5/7');
    assert.equal(q('a five-day trip to Rome', 'a seven-day trip to Rome'), '5/7');
    assert.equal(q('What is 15% of 200', 'what is 20 percent of 200'), '15/20');
    assert.equal(q('What happened in France in 1789', 'What happened in 1793 in France'), '1789/1793');
    // A numeral of a name is no year.
    assert.equal(q('Who won World War I?', 'Who won the First World War (1914-1918)?'), null);
    // A quantity added on one side only is a detail, not another request.
    assert.equal(q('best laptop under 1000', 'best laptop under 1000 for 3D work in 2024'), null);
    assert.equal(q('What is the capital of France?', 'What was the capital of France in 1800?'), null);
  });
});

describe('otherNames', () => {
  const names = (a: string, b: string) => otherNames(analyse(a), analyse(b));

  test('another person or place of the same kind, in a text typed in lower case or with capitals only where sentences start, or in texts the same but for a few words', () => {
    assert.equal(names('how tall is lebron james', 'how tall is stephen curry'), 'lebron james/stephen');
    assert.equal(names('best restaurants in porto', 'best restaurants in lisbon'), 'porto/lisbon');
    assert.equal(names('property tax in texas', 'property tax in mexico'), 'texas/mexico');
    // Cities, countries and regions are one kind, as the lexicon files "new york" as a region.
    assert.equal(names('best pizza in new york', 'best pizza in chicago'), 'nyc/chicago');
    // "america" after "south" is the continent; "york" without "new" is the English city.
    assert.equal(names('best beaches in south america', 'best beaches in the usa'), 'south america/usa');
    assert.equal(names('things to do in york', 'things to do in nyc'), 'york/nyc');
    // Names of several words.
    assert.equal(names('best tacos in los angeles', 'best tacos in san diego'), 'los angeles/san diego');
    assert.equal(names('do i need a visa for south korea', 'do i need a visa for north korea'), 'south korea/north korea');
    // One side in lower case is enough.
    assert.equal(names('what did albert einstein discover', 'What did Isaac Newton discover?'), 'albert/isaac');
    // Capitals at a sentence's start and "I" say nothing of names.
    assert.equal(names('What is the capital of new zealand', 'What is the capital of england'), 'new zealand/united kingdom');
    assert.equal(names('Can I visit lisbon in winter? Is it cold?', 'Can I visit porto in winter? Is it cold?'), 'lisbon/porto');
    // Short names of countries.
    assert.equal(names('What is the capital of NZ', 'What is the capital of england'), 'new zealand/united kingdom');
    // With capitals on the names, where the texts are the same words but for a stretch of a few.
    assert.equal(names('What did Albert Einstein discover?', 'What did Isaac Newton discover?'), 'albert/isaac');
    assert.equal(names('Flights from Paris to rome', 'Flights from Paris to Milan'), 'rome/milan');
    // One word for another: a name of any kind, as the lexicon files "sydney" and "houston" as people.
    assert.equal(names('time difference between london and tokyo', 'time difference between london and sydney'), 'tokyo/sydney');
    assert.equal(names('weather in houston tomorrow', 'weather in dallas tomorrow'), 'houston/dallas');
    // Cities the lexicon files as people are places too, in other words around them.
    assert.equal(
      names("What's the time difference between London and Tokyo?", 'time difference between london and sydney'),
      'tokyo/sydney',
    );
    assert.equal(names('best bbq in austin', 'where to eat bbq in dallas tonight'), 'austin/dallas');
    assert.equal(
      names(
        'What is the capital city of Australia? One word answer, no punctuation.',
        'What is the capital city of Austria? One word answer, no punctuation.',
      ),
      'australia/austria',
    );
  });

  test('no difference: capitals, the same name, two names of one place, other kinds, common words', () => {
    // With capitals on names, in texts that differ in more than a few words, the model reads the
    // names itself: news sentences name one person or place two ways.
    assert.equal(
      names(
        'Bush met Blair in London on Tuesday to discuss Iraq.',
        'President Bush and the British prime minister talked about Iraq in London.',
      ),
      null,
    );
    assert.equal(names('Who founded Microsoft and when?', 'When was Microsoft founded, and by Bill Gates alone?'), null);
    assert.equal(names('how tall is lebron james', 'lebron james height'), null);
    assert.equal(names('when was shakespeare born', "what is william shakespeare's birth date"), null);
    assert.equal(names('things to do in new york', 'things to do in nyc'), null);
    assert.equal(names('population of america', 'population of the usa'), null);
    assert.equal(names('weather in bangalore today', 'weather in bengaluru today'), null);
    assert.equal(names('how old is barack obama', 'how old is obama'), null);
    assert.equal(names('visa for the united states', 'visa for the usa'), null);
    assert.equal(names('cheap flights to nz', 'cheap flights to new zealand'), null);
    assert.equal(names('Who is the prime minister of the uk', 'Who is the prime minister of england'), null);
    // Short forms of one first name.
    assert.equal(names('how old is mike tyson', 'how old is michael tyson'), null);
    assert.equal(names('tom hanks net worth', 'Thomas Hanks net worth'), null);
    assert.equal(names('who is william gates', 'who is bill gates'), null);
    assert.equal(names('barack hussein obama birthday', 'barack obama birthday'), null);
    // An airport code or an abbreviation is no place.
    assert.equal(names('convert 10am ist to london time', 'convert 10am india time to london time'), null);
    assert.equal(names('capital gains tax in calif', 'capital gains tax in california'), null);
    // A person on one side and a place on the other are not two of a kind.
    assert.equal(names('restaurants in lisbon', 'restaurants opened by james'), null);
    assert.equal(names("south africa's mandela taken to hospital", 'nelson mandela taken to hospital'), null);
    // "mark" and "chase" are words of the tokenizer's vocabulary: common words as often as names.
    assert.equal(names('mark the email as read', 'chase the email as read'), null);
  });
});

describe('otherPeriod', () => {
  const period = (a: string, b: string) => otherPeriod(analyse(a), analyse(b));

  test('the same period placed elsewhere relative to the present', () => {
    assert.equal(period('Best stocks to buy this year', 'Best stocks to buy next year'), 'this year/next year');
    assert.equal(period('Top news this weekend', 'Top news last weekend'), 'this weekend/last weekend');
    assert.equal(period('What holidays are this month?', 'Which holidays are there next month?'), 'this month/next month');
    assert.equal(period("What was last week's top song?", 'top songs this week'), 'last week/this week');
    assert.equal(period('Plan my meals for the coming days', 'Plan my meals for the past days'), 'next day/last day');
  });

  test('no difference: the same place in other words, other periods, one side without one', () => {
    assert.equal(period('What happened in the news last week?', 'news from the past week'), null);
    assert.equal(period('What happened this past weekend?', 'What happened last weekend?'), null);
    assert.equal(period('events next week', 'events in the coming week'), null);
    assert.equal(period('Best stocks to buy this year', 'Best stocks to buy this month'), null);
    assert.equal(period('Best stocks to buy this year', 'Best stocks to buy'), null);
    // A year names the period.
    assert.equal(period('Who will win the league this season 2016-2017?', 'Who can win the league next season 2016-2017?'), null);
    assert.equal(period('How long does a battery last a week?', 'How long does a battery last in a week?'), null);
  });
});

describe('replacedWord', () => {
  const replaced = (a: string, b: string) => replacedWord(analyse(a), analyse(b));

  test('the same words but for one of a pair of words with other senses, in the same place', () => {
    assert.equal(replaced('How do I turn on Bluetooth on Windows 11?', 'how do i turn off bluetooth on windows 11'), 'on/off');
    assert.equal(replaced('how to zoom in on a mac', 'how to zoom out on a mac'), 'in/out');
    assert.equal(replaced('Which countries drive on the left?', 'Which countries drive on the right?'), 'left/right');
    assert.equal(replaced('sort a dictionary by value in python', 'sort a dictionary by key in python'), 'value/key');
    assert.equal(replaced('convert a list to a string in python', 'convert a list to a set in python'), 'string/set');
    assert.equal(replaced('check if a number is even', 'check if a number is odd'), 'even/odd');
    assert.equal(replaced('how to add a column in pandas', 'how to drop a column in pandas'), 'add/drop');
    assert.equal(replaced('SQL left join example', 'SQL inner join example'), 'left/inner');
    // Function words that differ beside it do not hide it.
    assert.equal(replaced('how to sign in to gmail', 'how to sign out of gmail'), 'in/out');
    // Any language of the set against English.
    assert.equal(replaced('translate good morning to english', 'translate good morning to swedish'), 'english/swedish');
    // A particle that moved as well.
    assert.equal(replaced('How do I turn on Bluetooth', 'How do I turn Bluetooth off'), 'on/off');
    // A letter standing for a thing.
    assert.equal(replaced('how much vitamin d should i take daily', 'how much vitamin c should i take daily'), 'd/c');
    // A thing had against a thing gone without.
    assert.equal(replaced('Coffee with milk calories', 'Coffee without milk calories'), 'with/without');
    assert.equal(replaced('Best way to cook rice with a rice cooker', 'Best way to cook rice without a rice cooker'), 'with/without');
    // A side taken against the other.
    assert.equal(replaced('Arguments for the death penalty', 'Arguments against the death penalty'), 'for/against');
    assert.equal(replaced('write an essay arguing for school uniforms', 'write an essay arguing against school uniforms'), 'for/against');
  });

  test('the same text, code or data given, and another thing asked done to it', () => {
    assert.equal(replaced('Explain this code: print(sum(range(10)))', 'Optimize this code: print(sum(range(10)))'), 'explain/optimize');
    assert.equal(replaced('Explain this code', 'Refactor this code'), 'explain/refactor');
    assert.equal(replaced('Sort these numbers: 5, 3, 9, 1', 'Sum these numbers: 5, 3, 9, 1'), 'sort/sum');
    assert.equal(
      replaced('Paraphrase: The meeting has been moved to Thursday.', 'Shorten: The meeting has been moved to Thursday.'),
      'paraphrase/shorten',
    );
    assert.equal(
      replaced(
        'Count the words in: the quick brown fox jumps over the lazy dog',
        'Reverse the words in: the quick brown fox jumps over the lazy dog',
      ),
      'count/reverse',
    );
    assert.equal(replaced('Fix this code: for i in range(10) print(i)', 'Comment this code: for i in range(10) print(i)'), 'fix/comment');
  });

  test('another tone asked, or another reader', () => {
    assert.equal(replaced('Make it more formal.', 'Make it more casual.'), 'formal/casual');
    assert.equal(replaced('Make this sentence more formal: hey whats up', 'Make this sentence more casual: hey whats up'), 'formal/casual');
    assert.equal(replaced('Make it funny.', 'Make it serious.'), 'funny/serious');
    assert.equal(replaced('Make it for kids.', 'Make it for adults.'), 'kids/adults');
    assert.equal(replaced('Explain photosynthesis to a child', 'Explain photosynthesis to an expert'), 'child/expert');
    // One tone, one reader, in other words.
    assert.equal(replaced('Make it more casual.', 'Make it more friendly.'), null);
    assert.equal(replaced('Write a formal letter to my landlord', 'Write a professional letter to my landlord'), null);
    assert.equal(replaced('Explain relativity to a child', 'Explain relativity to a kid'), null);
  });

  test('the same thing asked done in other words is no other request', () => {
    assert.equal(replaced('Explain this code: print(1)', 'Describe this code: print(1)'), null);
    assert.equal(replaced('Rephrase this: I cannot come.', 'Reword this: I cannot come.'), null);
    assert.equal(replaced('Summarize this paragraph: The vote was postponed.', 'Condense this paragraph: The vote was postponed.'), null);
    assert.equal(replaced('Optimize this function: def f(n): return n', 'Improve this function: def f(n): return n'), null);
    assert.equal(replaced('Refactor this function: def f(n): return n', 'Improve this function: def f(n): return n'), null);
    assert.equal(replaced('Fix this code: for i in range(10) print(i)', 'Debug this code: for i in range(10) print(i)'), null);
    assert.equal(replaced('Correct the grammar: she go to school', 'Fix the grammar: she go to school'), null);
    assert.equal(replaced('Categorize these expenses: rent, groceries', 'Classify these expenses: rent, groceries'), null);
  });

  test('the same words but for two things of one kind in WordNet, or its antonyms', () => {
    assert.equal(replaced('best tennis racket for beginners', 'best badminton racket for beginners'), 'tennis/badminton');
    assert.equal(replaced('foods high in iron', 'foods high in calcium'), 'iron/calcium');
    assert.equal(replaced('Write a haiku about the ocean', 'Write a sonnet about the ocean'), 'haiku/sonnet');
    assert.equal(replaced('what is the boiling point of ethanol', 'what is the freezing point of ethanol'), 'boiling/freezing');
    assert.equal(replaced('natural remedies for anxiety', 'natural remedies for depression'), 'anxiety/depression');
    // Inflected: read by WordNet's endings.
    assert.equal(replaced('how to tune violins', 'how to tune cellos'), 'violins/cellos');
  });

  test('no difference in WordNet: one sense shared, one a kind of the other, one lemma, a function word, one thing of the sets', () => {
    assert.equal(replaced('when do leaves change colour in the fall', 'when do leaves change colour in the autumn'), null);
    assert.equal(replaced('is a vegan diet healthy', 'is a vegetarian diet healthy'), null);
    assert.equal(replaced('how to grow roses indoors', 'how to grow a rose indoors'), null);
    assert.equal(replaced('how do I get a doctor appointment', 'how do I get a physician appointment'), null);
    // "at" and "in" are also astatine and indium.
    assert.equal(replaced('things to do at the beach', 'things to do in the beach'), null);
    assert.equal(replaced('a quiet place to read in the evening', 'a quiet place to read at night'), null);
    // Words WordNet does not list.
    assert.equal(replaced('scroll up in tmux', 'scroll up in vim'), null);
  });

  test('no difference: words of one thing, other words that differ, other lengths, phrases that say the same', () => {
    assert.equal(replaced('how to add an item to a list', 'how to append an item to a list'), null);
    assert.equal(replaced('average of a list in python', 'mean of a list in python'), null);
    assert.equal(replaced('fill in the visa form', 'fill out the visa form'), null);
    assert.equal(replaced('a story based on real events', 'a story based off real events'), null);
    // "right" also means correct: only a word in the same place, with the rest the same, counts.
    assert.equal(replaced('is this the right way to turn left', 'is this the correct way to turn left'), null);
    assert.equal(replaced('what time is it right now', 'what time is it now'), null);
    assert.equal(replaced('how to turn on wifi', 'how to switch on the wifi on my phone'), null);
    assert.equal(replaced('scroll up in tmux', 'scroll up in vim'), null);
    // Asked for alike: a list and an array, a number and an integer; "a list of" is no type.
    assert.equal(replaced('How to reverse a list in Python', 'How to reverse an array in Python'), null);
    assert.equal(replaced('check if a number is prime', 'check if an integer is prime'), null);
    assert.equal(replaced('Give me a list of interview questions', 'Give me a set of interview questions'), null);
    assert.equal(replaced('Break it down into steps', 'Break it up into steps'), null);
    assert.equal(replaced('Is Reddit down right now?', 'Is Reddit up right now?'), null);
    assert.equal(replaced('turn on the light in the kitchen', 'turn the light on in the kitchen'), null);
    assert.equal(replaced('what do Spanish and Portuguese have in common', 'what do portuguese and spanish have in common?'), null);
  });
});

describe('replacedReordered', () => {
  const reordered = (a: string, b: string) => replacedReordered(analyse(a), analyse(b));

  test('the same content words in another order but for one of a pair, or nouns of one kind in WordNet', () => {
    assert.equal(reordered('python read csv file into a list', 'python write a list to a csv file'), 'read/write');
    assert.equal(
      reordered('Explain the difference between median and mode', 'Explain the difference between mean and median'),
      'mode/mean',
    );
    assert.equal(reordered('import csv into mysql table', 'export mysql table to csv'), 'import/export');
    assert.equal(reordered('How does blockchain technology work?', 'What are the uses of blockchain technology?'), 'work/uses');
  });

  test('no difference: antonyms read in another order, pointing words, short texts, more than one word each', () => {
    // A question turned around names the antonym for the same question.
    assert.equal(reordered('What is wrong with having sex before marriage?', 'Is having sex before marriage right?'), null);
    assert.equal(reordered('Are there still Nazis?', 'Are the nazis still here?'), null);
    assert.equal(reordered('read csv', 'csv write'), null);
    assert.equal(reordered('python read a csv file into a list', 'python write a list to a json file'), null);
    // The same words in another order: another check's (`swappedRoles`).
    assert.equal(reordered('convert a list to a string in python', 'convert a string to a list in python'), null);
    assert.equal(reordered('laptop for students on a budget', 'a budget laptop for students'), null);
  });
});

describe('otherRank', () => {
  const rank = (a: string, b: string) => otherRank(analyse(a), analyse(b));

  test('a superlative ranked on one side only', () => {
    assert.equal(rank('SQL query to find the second highest salary', 'SQL query to find the highest salary'), 'second highest/highest');
    assert.equal(rank('what is the largest country in the world', 'the 3rd largest country'), 'largest/3rd largest');
    assert.equal(rank('the 21st largest city', 'the largest city'), '21st largest/largest');
  });

  test('no difference: the same rank, "first", a rank on both sides, no superlative', () => {
    assert.equal(rank('what is the second highest mountain', 'which mountain is the second highest'), null);
    assert.equal(rank('the 1st largest country', 'the largest country'), null);
    assert.equal(rank('the second largest planet', 'the third largest planet'), null);
    assert.equal(rank('the second world war', 'the world war'), null);
  });
});

describe('otherDirection', () => {
  const direction = (a: string, b: string) => otherDirection(analyse(a), analyse(b));

  test('the same two units converted the other way, however put', () => {
    assert.equal(direction('how many km is 5 miles', 'Convert 5 kilometers to miles.'), 'mile to km/km to mile');
    assert.equal(
      direction('celsius to fahrenheit', 'how many degrees celsius is 100 fahrenheit'),
      'celsius to fahrenheit/fahrenheit to celsius',
    );
    assert.equal(direction('how many cups are in a gallon', 'convert cups to gallons'), 'gallon to cup/cup to gallon');
    assert.equal(direction('100 usd to eur', 'how much is 100 euros in dollars'), 'dollar to euro/euro to dollar');
    // A pound is a weight beside kilograms.
    assert.equal(direction('how many pounds is 5 kg', 'convert 5 pounds to kilograms'), 'kg to pound/pound to kg');
  });

  test('no difference: the same way, a comparison, one unit, other kinds of unit', () => {
    assert.equal(direction('how many km is 5 miles', 'Convert 5 miles to kilometers.'), null);
    assert.equal(direction('how many ml in 2 cups', '2 cups in ml'), null);
    assert.equal(direction('what is the difference between km and miles', 'miles to km'), null);
    assert.equal(direction('how far is 5 km', 'how long is 5 miles'), null);
    assert.equal(direction('convert 5 kg to pounds', 'convert 5 km to miles'), null);
  });
});

describe('negated', () => {
  const negation = (a: string, b: string) => negated(analyse(a), analyse(b));

  test('the same words but for a negation', () => {
    assert.equal(negation('Excel formula to count cells that are not blank', 'Excel formula to count cells that are blank'), 'not added');
    assert.equal(negation('Why is the sky blue?', "Why isn't the sky blue?"), 'not added');
    assert.equal(negation('git ignore a file', "git don't ignore a file"), 'not added');
    assert.equal(negation('You should do it.', 'You should never do it.'), 'never added');
  });

  test('no difference: both negated, other words that differ, a contraction written out', () => {
    assert.equal(negation("What should I do if I can't sleep?", 'What should I do if I cannot sleep?'), null);
    assert.equal(negation("why can't I sleep", 'why am I not able to sleep'), null);
    assert.equal(negation('how to check if a file exists', 'how to check if a file does not exist'), null);
    assert.equal(negation('is it not safe to swim after eating', 'is it safe to swim after eating a meal'), null);
  });
});

describe('differentRequest', () => {
  test('is null for a rewording and names the difference otherwise', () => {
    const d = (a: string, b: string) => differentRequest(analyse(a), analyse(b));
    assert.equal(d('How do I reverse a string in Python?', 'Python: what is the way to reverse a string?'), null);
    assert.equal(d('Sort ascending', 'sort descending'), 'ascending/descending');
    assert.equal(d('Convert 10 miles to km', 'Convert 10 km to miles'), 'mile to km');
    assert.equal(d('plan a 3 day trip to Rome', 'plan a 7 day trip to Rome'), '3/7');
    assert.equal(d('plan a 3 day trip to rome', 'plan a 3 day trip to paris'), 'rome/paris');
    assert.equal(d('how to zoom in on a mac', 'how to zoom out on a mac'), 'in/out');
    // The same words are the same request, however a number is grouped.
    assert.equal(d('Is 10,000 steps a day enough?', 'Is 10 000 steps a day enough?'), null);
  });

  test('the same period placed elsewhere relative to the present is another request', () => {
    const d = (a: string, b: string) => differentRequest(analyse(a), analyse(b));
    assert.equal(d('Best stocks to buy this year', 'Best stocks to buy next year'), 'this year/next year');
    assert.equal(d('What movies came out last month?', 'What movies came out this month?'), 'last month/this month');
    assert.equal(d('What happened this past weekend?', 'What happened last weekend?'), null);
  });

  test('a date or time asked for in another format is another request; the same format with other separators is not', () => {
    const d = (a: string, b: string) => differentRequest(analyse(a), analyse(b));
    assert.equal(d('js get current date in YYYY-MM-DD format', 'js get current date in DD/MM/YYYY format'), 'yyyy mm dd/dd mm yyyy');
    assert.equal(d('python format date as dd/mm/yyyy', 'python format date as mm/dd/yyyy'), 'dd mm yyyy/mm dd yyyy');
    assert.equal(d('format a date as MM/DD/YYYY HH:mm', 'format a date as MM/DD/YYYY hh:mm'), null);
    assert.equal(d('python format date as yyyy-mm-dd', 'how do I format a date as YYYY/MM/DD in Python?'), null);
    assert.equal(d('python format date as yyyy-mm-dd', 'python date to string'), null);
  });

  test('a question that opens with another of who, when, where and why is another question', () => {
    const d = (a: string, b: string) => differentRequest(analyse(a), analyse(b));
    // A follow-up is read after the turn before it: the last line opens the question.
    assert.equal(
      d(
        'What is the significance of the Rosetta Stone?\nwhen was it discovered',
        'Tell me about the Rosetta Stone.\nwhere is it kept today',
      ),
      'when/where',
    );
    assert.equal(d('Who invented the telephone?', 'When was the telephone invented?'), 'who/when');
    // "What" and "how" ask for any of them.
    assert.equal(
      d('Tell me about the Eiffel Tower.\nwhat year was it completed', 'Tell me about the Eiffel Tower.\nwhen was it completed'),
      null,
    );
    assert.equal(d('How come the sky is blue?', 'Why is the sky blue?'), null);
    assert.equal(d('Whom did Henry VIII marry first?', 'Who did Henry VIII marry first?'), null);
    // One asks both.
    assert.equal(d('When/where does glycolysis occur? Why?', 'Where does glycolysis occur?'), null);
    // "When" opening a statement asks nothing; a contraction opens with its question word.
    assert.equal(d('When I run npm install I get an EACCES error', 'Why do I get an EACCES error on npm install?'), null);
    assert.equal(d("Where's the Louvre?", "When's the Louvre open?"), 'where/when');
  });

  test('a question and keywords that name another kind of answer', () => {
    const d = (a: string, b: string) => differentRequest(analyse(a), analyse(b));
    assert.equal(
      d('Tell me about the printing press.\nwho invented it', 'What was the printing press?\nyear of its invention'),
      'person/time',
    );
    assert.equal(
      d('What is the telephone?\nInventor of the telephone?', 'Tell me about the telephone.\nWhen was it invented?'),
      'time/person',
    );
    assert.equal(d('Tell me about Mozart.\nwhen did he die', 'Who was Mozart?\nplace of his death'), 'time/place');
    assert.equal(d('Tell me about the Great Wall.\nwhy was it built', 'What is the Great Wall?\nits builders'), 'reason/person');
    // An amount or a measure: "how many", "how tall"; "what year" asks for a time.
    assert.equal(d('Tell me about the Titanic.\nhow many people died', 'What was the Titanic?\ncause of the sinking'), 'amount/reason');
    assert.equal(d('Tell me about Netflix.\nwhen did it start streaming', 'What is Netflix?\nnumber of subscribers'), 'time/amount');
    assert.equal(d('Tell me about the Eiffel Tower.\nwhat year was it built', 'What is the Eiffel Tower?\nits architect'), 'time/person');
    // "What caused it" asks for a reason; a city is a place (a country may be who did it).
    assert.equal(d('Tell me about the Black Death.\nwhat caused it', 'What was the Black Death?\ndeath toll'), 'reason/amount');
    assert.equal(d('Tell me about Airbnb.\nWho founded it?', 'What is Airbnb?\ncity where it was founded'), 'person/place');
    assert.equal(
      d(
        'Tell me about the Statue of Liberty.\nWho gave it to the United States?',
        'What is the Statue of Liberty?\ncountry that gifted it',
      ),
      null,
    );
    assert.equal(d('Tell me about Tokyo.\nhow many people live there', 'What is Tokyo like?\nits population'), null);
    assert.equal(d('Tell me about the Eiffel Tower.\nhow tall is it', 'What is the Eiffel Tower?\nheight of the tower'), null);
    // "who" and "where" join a clause in keywords and name nothing.
    assert.equal(d('How many scientists believe in Evolution?', 'Percentage of scientists who believe in evolution?'), null);
    // Keywords that ask for what the question asks for, or name no kind of answer, say nothing.
    assert.equal(d('Tell me about the printing press.\nwho invented it', 'What was the printing press?\ninventor of the press'), null);
    assert.equal(d('Who was Mozart?\nwhen was he born', 'Tell me about Mozart.\nhis date of birth'), null);
    assert.equal(d('Tell me about Jupiter.\nhow many moons does it have', 'What is Jupiter?\nits largest moon'), null);
    assert.equal(d('Tell me about sushi.\nwhere did it originate', 'What is sushi?\norigin of sushi'), null);
    // The question asks for that kind too; the other line is put as a question, or is more than keywords.
    assert.equal(d('Tell me about the press.\nwho invented it and when', 'What was the press?\nyear of its invention'), null);
    assert.equal(d('Tell me about the press.\nwho invented it', 'What was the press?\nwhat year was it invented'), null);
    assert.equal(
      d(
        'Tell me about the press.\nwho invented it',
        'What was the press?\nThe year it was invented matters for my essay on early modern European printing',
      ),
      null,
    );
  });
});

describe('what two texts quote', () => {
  const d = (a: string, b: string) => differentRequest(analyse(a), analyse(b));

  test('the same words around other quotes are other requests', () => {
    assert.equal(d("what does 'SMH' mean in texting", "What does 'TBH' mean in texting?"), '"smh"/"tbh"');
    assert.equal(
      d('Translate "see you later" into Spanish', 'Translate “see you tomorrow” into Spanish'),
      '"see you later"/"see you tomorrow"',
    );
    assert.equal(d('Define `affect`', 'define `effect`'), '"affect"/"effect"');
  });

  test('the same quote, a quote reworded around, apostrophes and a quote on one side only are left alone', () => {
    assert.equal(d("What does 'carpe diem' mean?", 'What does "Carpe Diem" mean'), null);
    assert.equal(d('What does "carpe diem" mean?', 'What does carpe diem mean?'), null);
    assert.equal(d("Don't say 'yes' yet", "Don't say 'no' yet"), '"yes"/"no"');
    assert.equal(d("What's the plural of 'cactus'", 'What is the plural of "octopus"'), null);
    assert.equal(d("It's John's car", "It's Mary's car"), null);
  });
});

describe('other instructions around the same passage', () => {
  const d = (a: string, b: string) => differentRequest(analyse(a), analyse(b));
  const REVIEW = 'The battery died after two days and support never answered my emails.';
  const CODE = 'def average(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total / len(xs) - 1';

  test('an instruction that asks for another thing before or after the same text is another request, both ways', () => {
    for (const [a, b, why] of [
      [`Classify the sentiment: ${REVIEW}`, `Classify the topic: ${REVIEW}`, 'instruction: sentiment/topic'],
      [`Rewrite in passive voice: ${REVIEW}`, `Rewrite in future tense: ${REVIEW}`, 'instruction: passive voice/future tense'],
      [
        `Summarize in one sentence: ${REVIEW}`,
        `Summarize in three bullet points: ${REVIEW}`,
        'instruction: one sentence/three bullet points',
      ],
      [`Fix the grammar: ${REVIEW}`, `Make this shorter: ${REVIEW}`, 'instruction: fix grammar/shorter'],
      [`${CODE}\n\nFind the bug`, `${CODE}\n\nAdd comments`, 'instruction: find bug/add comments'],
      [`Extract the names from this text:\n${REVIEW}`, `Extract the dates from this text:\n${REVIEW}`, 'instruction: names/dates'],
      [`Write a haiku about this: ${REVIEW}`, `Write a limerick about this: ${REVIEW}`, 'instruction: haiku/limerick'],
    ] as const) {
      assert.equal(otherInstruction(analyse(a), analyse(b)), why, `${a} / ${b}`);
      assert.equal(otherInstruction(analyse(b), analyse(a)), why.replace(/^instruction: (.*)\/(.*)$/, 'instruction: $2/$1'), `${b} / ${a}`);
      assert.notEqual(d(a, b), null, `${a} / ${b}`);
      assert.notEqual(d(b, a), null, `${b} / ${a}`);
    }
    // Another language is also another thing of one kind of the sets.
    assert.notEqual(d(`Translate to French: ${REVIEW}`, `Translate to German: ${REVIEW}`), null);
    assert.equal(
      otherInstruction(analyse(`Translate to French: ${REVIEW}`), analyse(`Translate to German: ${REVIEW}`)),
      'instruction: french/german',
    );
  });

  test('the same instruction reworded, or one that only adds to the other, is no other request', () => {
    for (const [a, b] of [
      [`Summarize this: ${REVIEW}`, `Give me a summary of this: ${REVIEW}`],
      [`Translate into French: ${REVIEW}`, `Translate to French: ${REVIEW}`],
      [`Fix the grammar: ${REVIEW}`, `Correct the grammar: ${REVIEW}`],
      [`Summarize in one sentence: ${REVIEW}`, `Summarize in a single sentence: ${REVIEW}`],
      [`Summarize the following text: ${REVIEW}`, `Please summarize this text: ${REVIEW}`],
      [`Shorten this: ${REVIEW}`, `Make this shorter: ${REVIEW}`],
      [`Corect the speling: ${REVIEW}`, `Correct the spelling: ${REVIEW}`],
      [
        `Spell this number out in words:\nThe total is 1,204 and the battery died after two days.`,
        `Spell this number out in words:\nThe total is 1204 and the battery died after two days.`,
      ],
      [`${CODE}\n\nFind the bug`, `${CODE}\n\nFind the bug in this code`],
      [`${CODE}\n\nFind the bug`, `${CODE}\n\nCan you find the bug?`],
    ] as const) {
      assert.equal(d(a, b), null, `${a} / ${b}`);
      assert.equal(d(b, a), null, `${b} / ${a}`);
    }
  });

  test('statements before a colon, two questions, short passages and texts without a break are left alone', () => {
    const list = 'General usage, Audio, Vision, Text, Tabular, and Dataset repository.';
    assert.equal(
      otherInstruction(
        analyse(`The guides are organized into six sections: ${list}`),
        analyse(`Guides have been divided into six parts: ${list}`),
      ),
      null,
    );
    assert.equal(
      otherInstruction(
        analyse('What is the population of Tokyo?\nhow has it changed since 2000'),
        analyse('How many people live in Tokyo?\nhow has it changed since 2000'),
      ),
      null,
    );
    assert.equal(otherInstruction(analyse('Classify the sentiment: great phone'), analyse('Classify the topic: great phone')), null);
    assert.equal(otherInstruction(analyse(`Classify the sentiment ${REVIEW}`), analyse(`Classify the topic ${REVIEW}`)), null);
    // A time's colon is no break.
    assert.equal(
      otherInstruction(
        analyse('Is the store open at 10:30 on the first Monday of the month'),
        analyse('Is the store closed at 10:30 on the first Monday of the month'),
      ),
      null,
    );
  });

  const ARTICLE = 'The city council voted on Tuesday to expand the bike lane network across the downtown area.';
  const MEETING = 'the meeting has been moved to Thursday afternoon';

  test('the same passage in quotes, after a sentence or before the instruction, under instructions that ask for other things, is another request', () => {
    for (const [a, b, why] of [
      [
        `Summarize the following article in one sentence. ${ARTICLE}`,
        `Summarize the following article in three bullet points. ${ARTICLE}`,
        'instruction: one sentence/three bullet points',
      ],
      [`Classify the sentiment of this review. ${REVIEW}`, `Classify the topic of this review. ${REVIEW}`, 'instruction: sentiment/topic'],
      [`${ARTICLE} Summarize this.`, `${ARTICLE} Translate this to French.`, 'instruction: summarize/translate french'],
      [`${REVIEW} Write a polite reply.`, `${REVIEW} Classify the sentiment!`, 'instruction: polite reply/classify sentiment'],
      [`Translate '${MEETING}' into French`, `Explain '${MEETING}' in simple words`, 'instruction: translate french/explain simple words'],
      [`Make "${MEETING}" sound more urgent.`, `Make "${MEETING}" sound more cheerful.`, 'instruction: urgent/cheerful'],
      [`Please count the words in “${MEETING}”`, `Please count the vowels in “${MEETING}”`, 'instruction: words/vowels'],
    ] as const) {
      assert.equal(otherInstruction(analyse(a), analyse(b)), why, `${a} / ${b}`);
      assert.notEqual(d(a, b), null, `${a} / ${b}`);
      assert.notEqual(d(b, a), null, `${b} / ${a}`);
    }
  });

  test('the same instruction reworded around such a passage, and statements or questions around a quote, are no other request', () => {
    for (const [a, b] of [
      [`Summarize the following article in one sentence. ${ARTICLE}`, `Summarize the following article in a single sentence. ${ARTICLE}`],
      [`Summarize this article. ${ARTICLE}`, `Give me a summary of this article. ${ARTICLE}`],
      [`${REVIEW} Fix the grammar.`, `${REVIEW} Correct the grammar.`],
      [`Translate '${MEETING}' into French`, `Please translate '${MEETING}' to French.`],
      [`Make "${MEETING}" sound more urgent.`, `Make "${MEETING}" sound urgent.`],
      // What someone said, quoted in the news: no request.
      [
        '"We are pleased with the results of the quarter," the company said.',
        '"We are pleased with the results of the quarter," a spokesman said.',
      ],
      [
        '"Stop the war now and bring the troops home," protesters chanted.',
        '"Stop the war now and bring the troops home," marchers shouted.',
      ],
      [`${REVIEW} What is the tone of this?`, `${REVIEW} Translate this into Spanish.`],
      [`Is "${MEETING}" correct English?`, `Translate "${MEETING}" into German`],
    ] as const) {
      assert.equal(otherInstruction(analyse(a), analyse(b)), null, `${a} / ${b}`);
      assert.equal(otherInstruction(analyse(b), analyse(a)), null, `${b} / ${a}`);
    }
    // Without a break, a bound or a quote around it, the passage is not found.
    assert.equal(otherInstruction(analyse(`Classify the sentiment of ${REVIEW}`), analyse(`Classify the topic of ${REVIEW}`)), null);
  });
});
