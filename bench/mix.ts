import { performance } from 'node:perf_hooks';
import type { Message } from '../src/cache/canonical.ts';
import { promptConversations } from '../eval/data.ts';

export interface MixResult {
  conversations: number;
  checks: number;
  hits: number;
  exactHits: number;
  semanticHits: number;
  hitRate: number;
  p50: number;
  p90: number;
  p99: number;
}

/**
 * Replays real chat prompts as a client would: for every user turn, check the conversation so
 * far; on a miss, store the recorded reply (or a stand-in). Runs 4 clients at once.
 */
export async function replayPrompts(base: string, key: string, evalDir: string, limit: number): Promise<MixResult> {
  const chosen = promptConversations(evalDir).slice(0, limit);
  const latencies: number[] = [];
  let hits = 0;
  let exactHits = 0;
  let semanticHits = 0;
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  let next = 0;
  const client = async () => {
    while (next < chosen.length) {
      const conv = chosen[next++] as Message[];
      for (let i = 0; i < conv.length; i++) {
        if (conv[i]?.role !== 'user') continue;
        const messages = conv.slice(0, i + 1).map((m) => ({ role: m.role, content: m.content.slice(0, 50_000) }));
        const t = performance.now();
        const res = (await (
          await fetch(`${base}/api/v1/check`, { method: 'POST', headers, body: JSON.stringify({ messages }) })
        ).json()) as {
          cache_hit?: boolean;
          cache_type?: string;
        };
        latencies.push(performance.now() - t);
        if (res.cache_hit) {
          hits++;
          if (res.cache_type === 'exact') exactHits++;
          else semanticHits++;
        } else {
          const reply = conv[i + 1]?.role === 'assistant' ? (conv[i + 1] as Message).content : '(reply)';
          await fetch(`${base}/api/v1/store`, {
            method: 'POST',
            headers,
            body: JSON.stringify({ messages, answer: reply.slice(0, 100_000) || '(reply)' }),
          });
        }
      }
    }
  };
  await Promise.all([client(), client(), client(), client()]);
  latencies.sort((a, b) => a - b);
  const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] as number;
  return {
    conversations: chosen.length,
    checks: latencies.length,
    hits,
    exactHits,
    semanticHits,
    hitRate: latencies.length === 0 ? 0 : hits / latencies.length,
    p50: q(0.5),
    p90: q(0.9),
    p99: q(0.99),
  };
}
