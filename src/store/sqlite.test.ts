import { rmSync } from 'node:fs';
import path from 'node:path';
import { tempDir } from '../../test/helpers.ts';
import { storeConformance } from './conformance.ts';
import { SqliteStore } from './sqlite.ts';

storeConformance('SQLite', async () => {
  const dir = tempDir();
  return { store: new SqliteStore(path.join(dir, 'reprise.db')), cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
});
