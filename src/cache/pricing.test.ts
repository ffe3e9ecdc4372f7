import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DEFAULT_PRICES, formatUsd, Pricing, withoutProvider } from './pricing.ts';

describe('pricing', () => {
  const pricing = new Pricing(DEFAULT_PRICES, 2);

  test('a model is priced by its name, its dated or suffixed form, in any case', () => {
    assert.equal(pricing.pricePerMillion('gpt-4o'), 10);
    assert.equal(pricing.pricePerMillion('GPT-4o-2024-08-06'), 10);
    assert.equal(pricing.pricePerMillion('gpt-4o-mini-2024-07-18'), 0.6);
    assert.equal(pricing.pricePerMillion('claude-3-5-sonnet-20241022'), 15);
    assert.equal(pricing.pricePerMillion('claude-3-5-sonnet@20240620'), 15);
    assert.equal(pricing.pricePerMillion('gpt-5-mini-2025-08-07'), 2);
    // The longest name that prefixes it, not the first: the small models are not the large one's price.
    assert.equal(pricing.pricePerMillion('o1-mini-2024-09-12'), 4.4);
    assert.equal(pricing.pricePerMillion('o3-pro'), 80);
    assert.equal(pricing.pricePerMillion('claude-opus-4-5-20251101'), 25);
    assert.equal(pricing.pricePerMillion('claude-opus-4-1-20250805'), 75);
  });

  test('a name with its provider in front is priced as the model', () => {
    assert.equal(pricing.pricePerMillion('openai/gpt-4o'), 10);
    assert.equal(pricing.pricePerMillion('azure/gpt-4.1-mini'), 1.6);
    assert.equal(pricing.pricePerMillion('openrouter/anthropic/claude-sonnet-4'), 15);
    assert.equal(pricing.pricePerMillion('us.anthropic.claude-3-5-haiku-20241022-v1:0'), 4);
    assert.equal(pricing.pricePerMillion('vertex_ai/gemini-2.5-flash-lite'), 0.4);
    // A dot inside the model's own name is not a provider.
    assert.equal(withoutProvider('gpt-4.1'), 'gpt-4.1');
    assert.equal(withoutProvider('us.anthropic.claude-3-haiku'), 'claude-3-haiku');
  });

  test("an operator's own name with a provider wins over the model's default, and unknown models cost the default", () => {
    const own = new Pricing({ ...DEFAULT_PRICES, 'azure/gpt-4o': 7 }, 3);
    assert.equal(own.pricePerMillion('azure/gpt-4o'), 7);
    assert.equal(own.pricePerMillion('openai/gpt-4o'), 10);
    assert.equal(own.pricePerMillion('my-fine-tune'), 3);
    assert.equal(own.pricePerMillion('acme/my-fine-tune'), 3);
  });

  test('savings are dollars for the tokens at the price, formatted as the usage body shows them', () => {
    assert.equal(pricing.cost('gpt-4o', 1_000_000), 10);
    assert.equal(formatUsd(pricing.cost('openai/gpt-4o', 250_000)), '$2.50');
    assert.equal(formatUsd(pricing.cost('gpt-4o-mini', 1000)), '$0.0006');
  });

  test('tiny savings are shown with their first figures, never as nothing saved; nothing saved stays $0.00', () => {
    assert.equal(formatUsd(0), '$0.00');
    // 50 tokens of gpt-4o-mini: $0.00003, which four decimals made "$0.0000".
    assert.equal(formatUsd(pricing.cost('gpt-4o-mini', 50)), '$0.00003');
    assert.equal(formatUsd(0.0000456), '$0.000046');
    assert.equal(formatUsd(0.00012345), '$0.00012');
    assert.equal(formatUsd(0.0012345), '$0.0012');
    assert.equal(formatUsd(0.000001), '$0.000001');
    // Below a millionth of a dollar (one token of a cheap model), still an amount.
    assert.equal(formatUsd(pricing.cost('gpt-4o-mini', 1)), '$0.0000006');
    assert.equal(formatUsd(0.00000015), '$0.00000015');
    assert.equal(formatUsd(0.01), '$0.01');
    assert.equal(formatUsd(1234.5), '$1,234.50');
  });
});
