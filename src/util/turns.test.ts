import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Turns } from './turns.ts';

test('turns are granted in order, one per pass of the event loop', async () => {
  const turns = new Turns();
  const order: string[] = [];
  // Marks each pass of the event loop until the turns are done.
  let done = false;
  const tick = () => {
    if (done) return;
    order.push('|');
    setImmediate(tick);
  };
  setImmediate(tick);
  await Promise.all(['a', 'b', 'c'].map((name) => turns.next().then(() => order.push(name))));
  done = true;
  assert.deepEqual(order, ['|', 'a', '|', 'b', '|', 'c']);
});
