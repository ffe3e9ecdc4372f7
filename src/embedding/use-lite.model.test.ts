import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import * as tf from '@tensorflow/tfjs-core';
import * as tfconv from '@tensorflow/tfjs-converter';
import { Tokenizer } from '@tensorflow-models/universal-sentence-encoder';
import { dot } from '../cache/scorer.ts';
import { DIMENSIONS, UseLiteModel, readArtifacts, readVocabulary } from './use-lite.model.ts';
import { startWasmBackend } from './use-lite.tfjs.ts';

/**
 * The published graph, run by tfjs's graph executor: the reference the eager forward pass must
 * reproduce, so that vectors stored by any version stay comparable.
 */
async function graphReference(): Promise<(text: string) => Promise<Float32Array>> {
  await startWasmBackend();
  const graph = await tfconv.loadGraphModel({ load: async () => readArtifacts() });
  const tokenizer = new Tokenizer(readVocabulary());
  return async (text) => {
    let ids = tokenizer.encode(text);
    if (ids.length === 0) ids = [0];
    // One window of at most 256 tokens, as the embedder makes for texts of that size.
    ids = ids.slice(0, 256);
    const indices = new Int32Array(ids.length * 2);
    ids.forEach((_, j) => (indices[2 * j + 1] = j));
    const indicesT = tf.tensor2d(indices, [ids.length, 2], 'int32');
    const valuesT = tf.tensor1d(ids, 'int32');
    const out = (await graph.executeAsync({ indices: indicesT, values: valuesT })) as tf.Tensor;
    const v = out.dataSync() as Float32Array;
    tf.dispose([out, indicesT, valuesT]);
    return v;
  };
}

for (const backend of ['onnx', 'tfjs-wasm'] as const) {
  describe(`USE-lite forward pass on ${backend}`, () => {
    let model: UseLiteModel;
    let reference: (text: string) => Promise<Float32Array>;
    before(async () => {
      model = await UseLiteModel.load(backend);
      reference = await graphReference();
    });

    test('runs on the backend asked for', () => {
      assert.equal(model.backend, backend);
    });

    const texts = [
      'What is the capital city of Australia?',
      'hi',
      '',
      'How do I reverse a linked list in Python without using extra memory? Explain step by step, with code.',
      // About 200 tokens: longer than the 128 the encoder reads of a window.
      'The committee met on Tuesday to discuss the budget, the schedule and the new hires. '.repeat(12),
      'Ünïcödé, emoji 🚀 and numbers 3.14159 / 2,718 — all in one line!',
    ];

    test("each text alone gives the graph's vector", async () => {
      for (const text of texts) {
        const [mine, theirs] = [await model.embed([text]), await reference(text)];
        assert.equal(mine.length, DIMENSIONS);
        assert.ok(dot(mine, theirs) > 0.99999, `${JSON.stringify(text.slice(0, 40))}: cosine ${dot(mine, theirs)}`);
      }
    });

    test("a long text, tokenized a piece at a time, gives the published tokenizer's ids of the whole text", () => {
      const sentences = texts.filter((t) => t.length > 0).join('  ');
      const long = `${sentences} `.repeat(20);
      assert.ok(long.length > 5000);
      const pieces = (model as unknown as { encode(text: string): number[] }).encode(long);
      const whole = new Tokenizer(readVocabulary()).encode(long);
      assert.deepEqual(pieces, whole);
    });

    test('texts of different lengths in one batch give the same vectors as alone', async () => {
      const together = await model.embed(texts);
      for (const [i, text] of texts.entries()) {
        const theirs = await reference(text);
        const mine = together.subarray(i * DIMENSIONS, (i + 1) * DIMENSIONS);
        assert.ok(dot(mine, theirs) > 0.99999, `${JSON.stringify(text.slice(0, 40))} in a batch: cosine ${dot(mine, theirs)}`);
      }
    });
  });
}
