import { Lru } from '../util/lru.ts';

/** Price in US dollars per million output tokens, by lower-cased model name. */
export type PriceTable = Readonly<Record<string, number>>;

/**
 * Defaults for common models (list prices of output tokens, in dollars per million, as published
 * by their providers in 2025; for prompts of up to 200,000 tokens where a price depends on it).
 * Operators override or extend them with the `prices` object of the REPRISE_CONFIG file.
 */
export const DEFAULT_PRICES: PriceTable = {
  'gpt-5': 10,
  'gpt-5-mini': 2,
  'gpt-5-nano': 0.4,
  'gpt-5-pro': 120,
  'gpt-4o': 10,
  'gpt-4o-mini': 0.6,
  'gpt-4.1': 8,
  'gpt-4.1-mini': 1.6,
  'gpt-4.1-nano': 0.4,
  'gpt-4.5': 150,
  'gpt-4-turbo': 30,
  'gpt-4': 60,
  'gpt-3.5-turbo': 1.5,
  o1: 60,
  'o1-mini': 4.4,
  'o1-pro': 600,
  o3: 8,
  'o3-mini': 4.4,
  'o3-pro': 80,
  'o4-mini': 4.4,
  'claude-3-5-sonnet': 15,
  'claude-3-7-sonnet': 15,
  'claude-sonnet-4': 15,
  'claude-3-5-haiku': 4,
  'claude-haiku-4-5': 5,
  'claude-3-haiku': 1.25,
  'claude-3-opus': 75,
  'claude-opus-4': 75,
  'claude-opus-4-5': 25,
  'gemini-1.5-pro': 5,
  'gemini-1.5-flash': 0.3,
  'gemini-2.0-flash': 0.4,
  'gemini-2.0-flash-lite': 0.3,
  'gemini-2.5-pro': 10,
  'gemini-2.5-flash': 2.5,
  'gemini-2.5-flash-lite': 0.4,
  'gemini-3-pro': 12,
  'llama-3.1-70b': 0.8,
  'llama-3.1-8b': 0.2,
  'mistral-large': 6,
  'mistral-small': 0.6,
};

/**
 * A model name without the provider in front of it, as gateways and clouds write it:
 * `openai/gpt-4o`, `azure/gpt-4o`, `openrouter/anthropic/claude-sonnet-4`, Bedrock's
 * `us.anthropic.claude-3-5-sonnet-20240620-v1:0`. The same name when it has none.
 */
export function withoutProvider(name: string): string {
  return name.slice(name.lastIndexOf('/') + 1).replace(/^(?:[a-z]+\.)+(?=[a-z])/, '');
}

export class Pricing {
  /** Prices of the model names seen lately: a hit is priced without a scan of the table. */
  private readonly seen = new Lru<string, number>(1000);

  constructor(
    private readonly table: PriceTable,
    private readonly fallbackPerMillion: number,
  ) {}

  /**
   * Price per million tokens for a model name (any case). Matches the exact name first, then the
   * longest table key that prefixes it (so `gpt-4o-2024-08-06` is priced as `gpt-4o`), then the
   * same for the name without its provider (`openai/gpt-4o`, `us.anthropic.claude-3-5-sonnet-…`),
   * then the default.
   */
  pricePerMillion(model: string): number {
    let price = this.seen.get(model);
    if (price === undefined) {
      price = this.lookup(model);
      this.seen.set(model, price);
    }
    return price;
  }

  private lookup(model: string): number {
    const name = model.toLowerCase();
    const bare = withoutProvider(name);
    return this.tablePrice(name) ?? (bare === name ? undefined : this.tablePrice(bare)) ?? this.fallbackPerMillion;
  }

  /** The exact name's price, else the longest key that prefixes it, else undefined. */
  private tablePrice(name: string): number | undefined {
    const exact = this.table[name];
    if (exact !== undefined) return exact;
    let best: string | null = null;
    for (const key of Object.keys(this.table)) {
      if (name.startsWith(key) && (best === null || key.length > best.length)) best = key;
    }
    return best === null ? undefined : this.table[best];
  }

  /** Dollars saved by not generating `tokens` tokens with `model`. */
  cost(model: string, tokens: number): number {
    return (tokens * this.pricePerMillion(model)) / 1_000_000;
  }
}

/**
 * Formats dollars as the usage body's currency string, e.g. `$12.35`. Amounts under a cent keep
 * four decimals, and as many more as their first two figures need (`$0.0006`, `$0.000046`): four
 * alone showed a few tokens of a cheap model as `$0.0000`, as if nothing were saved; one token of
 * `llama-3.1-8b` is `$0.0000002`: the string stays an amount a client can read back. Nothing saved
 * is `$0.00`. The dashboard's charts format
 * their figures the same way (`fmtUsd` in src/dashboard/static/app.js).
 */
export function formatUsd(amount: number): string {
  if (amount > 0 && amount < 0.01) {
    const decimals = Math.max(4, 1 - Math.floor(Math.log10(amount)));
    return `$${amount.toFixed(decimals).replace(/(\.\d{4}\d*?)0+$/, '$1')}`;
  }
  return `$${amount.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
}
