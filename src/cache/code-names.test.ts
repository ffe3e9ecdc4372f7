import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { codeNamesOf, otherCodeNames } from './code-names.ts';

describe('codeNamesOf', () => {
  test('reads names in backticks and code written as code, by their last part', () => {
    assert.deepEqual(
      [...codeNamesOf('Use `Dataset.save_to_disk()` or load_dataset("csv") with num_proc')],
      ['savetodisk', 'loaddataset', 'numproc'],
    );
    assert.deepEqual([...codeNamesOf('See PACKAGE_REFERENCE/MAIN_CLASSE and Metric.compute().')], ['mainclasse', 'compute']);
  });

  test('plain prose, versions, abbreviations and plurals in parentheses name no code', () => {
    assert.deepEqual([...codeNamesOf('How do I reset my password?')], []);
    assert.deepEqual([...codeNamesOf('Upgrade to v2.10.0, e.g. with pip, and list the file(s) in the U.S. office.')], []);
  });
});

describe('otherCodeNames', () => {
  test('each text naming code the other names nowhere is another request', () => {
    assert.equal(
      otherCodeNames('The `set_column` function replaces a column.', 'The `add_column` function adds a column.'),
      'code setcolumn/addcolumn',
    );
    assert.equal(
      otherCodeNames('How do I get the level with logging.get_verbosity()?', 'How do I set the level with `logging.set_verbosity()`?'),
      'code getverbosity/setverbosity',
    );
    assert.equal(
      otherCodeNames('The PACKAGE_REFERENCE/BUILDER_CLASSE page does not exist.', 'The PACKAGE_REFERENCE/MAIN_CLASSE page does not exist.'),
      'code builderclasse/mainclasse',
    );
  });

  test('the same code, code written in words or left out on one side says nothing', () => {
    assert.equal(otherCodeNames('Call `from_sql()` with your query.', 'Pass your query to the from_sql method.'), null);
    assert.equal(otherCodeNames('Use the `load_dataset` function.', 'Use the load dataset function with `split`.'), null);
    assert.equal(otherCodeNames('The `num_proc` parameter sets the number of processes.', 'How many processes are used?'), null);
    assert.equal(otherCodeNames('How do I sort a list?', 'How do I reverse a list?'), null);
  });
});
