import { Lru } from '../util/lru.ts';

/** Price in US dollars per million output tokens, by lower-cased model name. */
export type PriceTable = Readonly<Record<string, number>>;

/**
 * Defaults for common models (list prices of output tokens). Operators override or extend
 * them with the `prices` object of the REPRISE_CONFIG file.
 */
export const DEFAULT_PRICES: PriceTable = {
  'gpt-4o': 10,
  'gpt-4o-mini': 0.6,
  'gpt-4.1': 8,
  'gpt-4.1-mini': 1.6,
  'gpt-4.1-nano': 0.4,
  'gpt-4-turbo': 30,
  'gpt-4': 60,
  'gpt-3.5-turbo': 1.5,
  o1: 60,
  o3: 8,
  'o3-mini': 4.4,
  'o4-mini': 4.4,
  'claude-3-5-sonnet': 15,
  'claude-3-7-sonnet': 15,
  'claude-sonnet-4': 15,
  'claude-3-5-haiku': 4,
  'claude-3-haiku': 1.25,
  'claude-3-opus': 75,
  'claude-opus-4': 75,
  'gemini-1.5-pro': 5,
  'gemini-1.5-flash': 0.3,
  'gemini-2.0-flash': 0.4,
  'gemini-2.5-pro': 10,
  'gemini-2.5-flash': 2.5,
  'llama-3.1-70b': 0.8,
  'llama-3.1-8b': 0.2,
  'mistral-large': 6,
  'mistral-small': 0.6,
};

export class Pricing {
  /** Prices of the model names seen lately: a hit is priced without a scan of the table. */
  private readonly seen = new Lru<string, number>(1000);

  constructor(
    private readonly table: PriceTable,
    private readonly fallbackPerMillion: number,
  ) {}

  /**
   * Price per million tokens for a model name. Matches the exact name first, then the longest
   * table key that prefixes it (so `gpt-4o-2024-08-06` is priced as `gpt-4o`), then the default.
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
    const exact = this.table[name];
    if (exact !== undefined) return exact;
    let best: string | null = null;
    for (const key of Object.keys(this.table)) {
      if (name.startsWith(key) && (best === null || key.length > best.length)) best = key;
    }
    return best === null ? this.fallbackPerMillion : (this.table[best] ?? this.fallbackPerMillion);
  }

  /** Dollars saved by not generating `tokens` tokens with `model`. */
  cost(model: string, tokens: number): number {
    return (tokens * this.pricePerMillion(model)) / 1_000_000;
  }
}

/** Formats dollars as the usage body's currency string, e.g. `$12.35`; sub-cent amounts keep 4 decimals. */
export function formatUsd(amount: number): string {
  if (amount > 0 && amount < 0.01) return `$${amount.toFixed(4)}`;
  return `$${amount.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
}
