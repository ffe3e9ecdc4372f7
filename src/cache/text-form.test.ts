import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Embedder } from '../embedding/interface.ts';
import { ofEmbedder, TEXT_FORM, vectorId } from './text-form.ts';

const embedder = { id: 'use-lite@3', dimensions: 512, maxBatch: 8 } as Embedder;

test("a stored vector is the embedder's whatever text form it was made from, and of the current form only with its id", () => {
  assert.equal(vectorId(embedder), `use-lite@3+text${TEXT_FORM}`);
  // Stored as typed, before the text form was part of the id; and of the current form.
  assert.ok(ofEmbedder('use-lite@3', embedder));
  assert.ok(ofEmbedder(vectorId(embedder), embedder));
  for (const other of ['use-lite@2', 'use-lite@33', 'use-lite@3x+text2', 'http:model', '', null])
    assert.equal(ofEmbedder(other, embedder), false, String(other));
});
