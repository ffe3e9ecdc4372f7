import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, describe, test } from 'node:test';
import { closeSharedEmbedder, sharedEmbedder, startTestApp, testConfig, user } from './helpers.ts';

describe('data survives a restart', () => {
  const config = testConfig();
  after(async () => {
    rmSync(config.dataDir, { recursive: true, force: true });
    await closeSharedEmbedder();
  });

  test('entries, keys, usage and the vector index come back', async () => {
    const embedder = await sharedEmbedder();
    const first = await startTestApp({ config, embedder, keepData: true });
    const key = await first.key('persistent');
    const messages = [user('Which planet is known as the Red Planet?')];
    await first.post('/api/v1/store', { messages, answer: 'Mars.', model: 'gpt-4o', tokens_used: 5 }, key);
    await first.post('/api/v1/check', { messages }, key);
    await first.post('/api/v1/check', { messages: [user('unrelated question about cooking pasta')] }, key);
    await first.close();

    const second = await startTestApp({ config, embedder, keepData: true });
    try {
      const exact = (await second.post('/api/v1/check', { messages }, key)).json();
      assert.equal(exact.cache_type, 'exact');
      assert.equal(exact.answer, 'Mars.');
      assert.equal(exact.metadata.usage_count, 2);
      // The index is rebuilt from the store: a paraphrase finds the entry (at a loose threshold,
      // since this is about the reload, not about where the line is drawn).
      const semantic = (
        await second.post('/api/v1/check', { messages: [user('Which planet is called the Red Planet?')], similarity_threshold: 0.6 }, key)
      ).json();
      assert.equal(semantic.cache_type, 'semantic', JSON.stringify(semantic));
      assert.equal(semantic.answer, 'Mars.');
      const usage = (await second.get('/api/v1/usage', key)).json();
      assert.equal(usage.total_requests, 4);
      assert.equal(usage.exact_hits, 2);
      assert.equal(usage.semantic_hits, 1);
      assert.equal(usage.cache_misses, 1);
    } finally {
      await second.close();
    }
  });
});
