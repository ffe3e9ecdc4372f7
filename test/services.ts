import pg from 'pg';
import { randomBytes } from 'node:crypto';

/**
 * The PostgreSQL and Redis servers of the machine, from DATABASE_URL and REDIS_URL. Without them
 * a test is skipped with a message naming the variable, except under CI=true, where it fails.
 */
export function serviceUrl(name: 'DATABASE_URL' | 'REDIS_URL'): string | null {
  const v = process.env[name];
  if (v) return v;
  if (process.env.CI === 'true') throw new Error(`${name} must be set under CI`);
  return null;
}

export function skipReason(name: 'DATABASE_URL' | 'REDIS_URL'): string | false {
  return serviceUrl(name)
    ? false
    : `set ${name} to run this test (e.g. ${name === 'DATABASE_URL' ? 'postgres://postgres@127.0.0.1:5432/test' : 'redis://127.0.0.1:6379'})`;
}

/** A fresh, uniquely named schema and a function that drops it. */
export function freshSchema(): { schema: string; drop: () => Promise<void> } {
  const schema = `reprise_test_${randomBytes(6).toString('hex')}`;
  return {
    schema,
    async drop() {
      const url = serviceUrl('DATABASE_URL');
      if (!url) return;
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await client.end();
    },
  };
}

export const uniquePrefix = () => `reprise-test:${randomBytes(6).toString('hex')}:`;

/** Polls `fn` until it returns true or the deadline passes. */
export async function eventually(fn: () => Promise<boolean>, timeoutMs = 10_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await fn()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return fn();
}
