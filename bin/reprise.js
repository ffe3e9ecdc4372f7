#!/usr/bin/env node
// Runs the TypeScript sources (through tsx) in a checkout, or the compiled files of
// `npm run build` where the sources are not shipped.
import { existsSync } from 'node:fs';

const source = new URL('../src/main.ts', import.meta.url);
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  await import(source.href);
} else {
  await import(new URL('../dist/src/main.js', import.meta.url).href);
}
