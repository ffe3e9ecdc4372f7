#!/usr/bin/env node
// Runs the compiled CLI when `npm run build` has been run, the TypeScript sources otherwise.
import { existsSync } from 'node:fs';

const compiled = new URL('../dist/src/main.js', import.meta.url);
if (existsSync(compiled)) {
  await import(compiled.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import(new URL('../src/main.ts', import.meta.url).href);
}
