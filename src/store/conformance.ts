import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AccountGoneError, type NewEntry, type Store } from './interface.ts';
import { StorageQuotaError } from './quota.ts';

/** A new entry of `accountId` with test values, changed by `over`. */
export const entry = (accountId: string, over: Partial<NewEntry> = {}): NewEntry => ({
  accountId,
  exactHash: `h-${Math.random()}`,
  contextHash: 'ctx',
  namespace: null,
  prefixHash: 'p',
  messages: [{ role: 'user', content: 'q' }],
  queryText: 'q',
  prefixText: '',
  answer: 'a',
  model: 'm',
  tokens: 3,
  embedderId: 'e',
  vector: Float32Array.from([0.6, 0.8]),
  prefixVector: null,
  createdAt: new Date().toISOString(),
  expiresAt: null,
  ...over,
});

/** The bytes an entry counts for: its messages' JSON and its answer, in UTF-8. */
export const bytesOf = (e: NewEntry): number => Buffer.byteLength(JSON.stringify(e.messages)) + Buffer.byteLength(e.answer);

/** One suite for every Store implementation. */
export function storeConformance(
  name: string,
  open: () => Promise<{ store: Store; cleanup: () => Promise<void> }>,
  skip: string | false = false,
): void {
  describe(`${name} store`, { skip }, () => {
    let store: Store;
    let cleanup: () => Promise<void>;
    before(async () => {
      ({ store, cleanup } = await open());
    });
    after(async () => {
      await store.close();
      await cleanup();
    });

    test('accounts: create, find by id and name, update, list; names are unique', async () => {
      const a = await store.createAccount('conf-a', 'free');
      assert.equal((await store.getAccount(a.id))?.name, 'conf-a');
      assert.equal((await store.getAccountByName('conf-a'))?.id, a.id);
      const u = await store.updateAccount(a.id, { plan: 'pro', defaultThreshold: 0.9, entryTtlSeconds: 60 });
      assert.deepEqual([u?.plan, u?.defaultThreshold, u?.entryTtlSeconds], ['pro', 0.9, 60]);
      await assert.rejects(store.createAccount('conf-a', 'free'));
      assert.ok((await store.listAccounts()).some((x) => x.id === a.id));
      assert.equal(await store.getAccount('nope'), null);
    });

    test('keys: create, find by hash with the account, list, revoke (only within the account)', async () => {
      const a = await store.createAccount('conf-keys', 'free');
      const b = await store.createAccount('conf-keys-b', 'free');
      const k = await store.createKey({ accountId: a.id, name: 'ci', prefix: 'rp_live_abcd', secretHash: `hash-${Math.random()}` });
      const byHash = await store.findKeyByHash('missing');
      assert.equal(byHash, null);
      assert.deepEqual(
        (await store.listKeys(a.id)).map((x) => x.id),
        [k.id],
      );
      assert.equal(await store.revokeKey(k.id, b.id), null);
      assert.equal((await store.getKey(k.id))?.revokedAt, null);
      const r = await store.revokeKey(k.id, a.id);
      assert.ok(r?.revokedAt);
      await store.touchKeys(new Map([[k.id, '2030-01-01T00:00:00.000Z']]));
      assert.equal((await store.getKey(k.id))?.lastUsedAt, '2030-01-01T00:00:00.000Z');
    });

    test('findKeyByHash returns the key and its account', async () => {
      const a = await store.createAccount('conf-find', 'enterprise');
      const hash = `hash-${Math.random()}`;
      const k = await store.createKey({ accountId: a.id, name: null, prefix: 'rp_live_x', secretHash: hash });
      const f = await store.findKeyByHash(hash);
      assert.equal(f?.key.id, k.id);
      assert.equal(f?.account.id, a.id);
      assert.equal(f?.account.plan, 'enterprise');
    });

    test('entries: put, replace by exact hash (same id), get by hash and id, isolation, delete', async () => {
      const a = await store.createAccount('conf-entries', 'free');
      const b = await store.createAccount('conf-entries-b', 'free');
      const e1 = await store.putEntry(entry(a.id, { exactHash: 'same' }));
      assert.ok(e1.id > 0);
      assert.deepEqual(
        Array.from(e1.vector ?? []).map((x) => Math.round(x * 10) / 10),
        [0.6, 0.8],
      );
      await store.recordHits(new Map([[e1.id, { count: 2, at: '2030-01-01T00:00:00.000Z', lookupMs: 3, createdAt: e1.createdAt }]]));
      assert.equal((await store.getEntry(a.id, e1.publicId))?.usageCount, 2);
      const e2 = await store.putEntry(entry(a.id, { exactHash: 'same', answer: 'new', createdAt: '2030-01-02T00:00:00.000Z' }));
      assert.equal(e2.id, e1.id);
      assert.equal(e2.answer, 'new');
      assert.equal(e2.usageCount, 0);
      // Hits counted on the answer before it was stored again (a batch on its way, another
      // node's) do not land on the new one; hits on the new one do.
      await store.recordHits(new Map([[e1.id, { count: 4, at: '2030-01-03T00:00:00.000Z', lookupMs: 3, createdAt: e1.createdAt }]]));
      assert.equal((await store.getEntry(a.id, e1.publicId))?.usageCount, 0);
      await store.recordHits(new Map([[e2.id, { count: 1, at: '2030-01-03T00:00:00.000Z', lookupMs: 3, createdAt: e2.createdAt }]]));
      assert.equal((await store.getEntry(a.id, e1.publicId))?.usageCount, 1);
      assert.equal((await store.getEntryByHash(a.id, 'same'))?.answer, 'new');
      assert.equal(await store.getEntryByHash(b.id, 'same'), null);
      assert.equal(await store.getEntry(b.id, e1.publicId), null);
      // Stored again, an entry keeps its public id too.
      assert.equal(e2.publicId, e1.publicId);
      assert.equal(await store.deleteEntry(b.id, e1.publicId), null);
      assert.deepEqual(await store.deleteEntry(a.id, e1.publicId), { id: e1.id, accountId: a.id, contextHash: 'ctx' });
      assert.equal(await store.getEntry(a.id, e1.publicId), null);
    });

    test('the same answer stored again keeps when it was first cached and its hits, with the new expiry', async () => {
      const a = await store.createAccount('conf-restore', 'free');
      const e1 = await store.putEntry(entry(a.id, { exactHash: 'again', answer: 'same', createdAt: '2030-01-01T00:00:00.000Z' }));
      await store.recordHits(new Map([[e1.id, { count: 3, at: '2030-01-01T01:00:00.000Z', lookupMs: 3, createdAt: e1.createdAt }]]));
      const e2 = await store.putEntry(
        entry(a.id, { exactHash: 'again', answer: 'same', createdAt: '2030-01-02T00:00:00.000Z', expiresAt: '2031-01-01T00:00:00.000Z' }),
      );
      assert.equal(e2.id, e1.id);
      assert.equal(e2.createdAt, '2030-01-01T00:00:00.000Z');
      assert.equal(e2.usageCount, 3);
      assert.equal(e2.lastHitAt, '2030-01-01T01:00:00.000Z');
      assert.equal(e2.expiresAt, '2031-01-01T00:00:00.000Z');
      // Another model's answer of the same text is another response.
      const e3 = await store.putEntry(
        entry(a.id, { exactHash: 'again', answer: 'same', model: 'other', createdAt: '2030-01-03T00:00:00.000Z' }),
      );
      assert.equal(e3.createdAt, '2030-01-03T00:00:00.000Z');
      assert.equal(e3.usageCount, 0);
      assert.equal(e3.lastHitAt, null);
    });

    test('the same answer stored again after its entry expired starts anew', async () => {
      const a = await store.createAccount('conf-restore-expired', 'free');
      const e1 = await store.putEntry(
        entry(a.id, { exactHash: 'lapsed', answer: 'same', createdAt: '2030-01-01T00:00:00.000Z', expiresAt: '2030-01-01T00:01:00.000Z' }),
      );
      await store.recordHits(new Map([[e1.id, { count: 3, at: '2030-01-01T00:00:30.000Z', lookupMs: 3, createdAt: e1.createdAt }]]));
      const e2 = await store.putEntry(entry(a.id, { exactHash: 'lapsed', answer: 'same', createdAt: '2030-01-02T00:00:00.000Z' }));
      assert.equal(e2.createdAt, '2030-01-02T00:00:00.000Z');
      assert.equal(e2.usageCount, 0);
      assert.equal(e2.lastHitAt, null);
      assert.equal(e2.expiresAt, null);
    });

    test('public ids are random safe integers, unrelated to the row ids other accounts advance', async () => {
      const a = await store.createAccount('conf-public-a', 'free');
      const b = await store.createAccount('conf-public-b', 'free');
      const first = await store.putEntry(entry(b.id));
      const theirs = [];
      for (let i = 0; i < 5; i++) theirs.push(await store.putEntry(entry(a.id)));
      const second = await store.putEntry(entry(b.id));
      // The row ids count account a's entries in between; the public ids are far apart, whatever
      // happened between (a derived id such as 2 × the row id would be 12 apart).
      assert.equal(second.id - first.id, 6);
      assert.ok(Math.abs(second.publicId - first.publicId) > 1e6, `${first.publicId} ${second.publicId}`);
      for (const e of [first, second, ...theirs]) {
        assert.ok(Number.isSafeInteger(e.publicId) && e.publicId > 0, String(e.publicId));
        assert.notEqual(e.publicId, e.id);
      }
      assert.equal((await store.getEntry(b.id, second.publicId))?.id, second.id);
      assert.equal(await store.getEntry(b.id, second.id), null);
      assert.equal((await store.getEntryByHash(b.id, second.exactHash))?.publicId, second.publicId);
      const listed = await store.listEntries(a.id, { page: 1, perPage: 10 });
      assert.deepEqual(new Set(listed.entries.map((e) => e.publicId)), new Set(theirs.map((e) => e.publicId)));
    });

    test('concurrent stores all persist', async () => {
      const a = await store.createAccount('conf-concurrent', 'free');
      const puts = await Promise.all(Array.from({ length: 30 }, (_, i) => store.putEntry(entry(a.id, { exactHash: `c${i}` }))));
      assert.equal(new Set(puts.map((p) => p.id)).size, 30);
      const page = await store.listEntries(a.id, { page: 1, perPage: 100 });
      assert.equal(page.total, 30);
    });

    test('listEntries pages, searches and orders by hits', async () => {
      const a = await store.createAccount('conf-list', 'free');
      for (let i = 0; i < 5; i++) await store.putEntry(entry(a.id, { exactHash: `l${i}`, queryText: i === 3 ? 'special 100%' : `q${i}` }));
      const p1 = await store.listEntries(a.id, { page: 1, perPage: 2 });
      assert.equal(p1.total, 5);
      assert.equal(p1.entries.length, 2);
      const p3 = await store.listEntries(a.id, { page: 3, perPage: 2 });
      assert.equal(p3.entries.length, 1);
      const all = (await store.listEntries(a.id, { page: 1, perPage: 10 })).entries;
      await store.recordHits(
        new Map([
          [all[2]?.id ?? 0, { count: 2, at: '2030-01-01T00:00:00.000Z', lookupMs: 40, createdAt: all[2]?.createdAt ?? '' }],
          [all[1]?.id ?? 0, { count: 5, at: '2030-01-01T00:00:00.000Z', lookupMs: 5, createdAt: all[1]?.createdAt ?? '' }],
        ]),
      );
      const slowest = await store.listEntries(a.id, { page: 1, perPage: 2, order: 'slowest' });
      assert.deepEqual(
        slowest.entries.map((e) => e.id),
        [all[2]?.id, all[1]?.id],
      );
      assert.equal(slowest.entries[0]?.lookupMsTotal, 40);
      const hits = await store.listEntries(a.id, { page: 1, perPage: 1, order: 'hits' });
      assert.equal(hits.entries[0]?.id, all[1]?.id);
      const found = await store.listEntries(a.id, { page: 1, perPage: 10, q: '100%' });
      assert.deepEqual(
        found.entries.map((e) => e.queryText),
        ['special 100%'],
      );
    });

    test('listEntryPreviews: the start of each question and answer and their lengths in UTF-16 code units, as JavaScript counts them; never the whole texts', async () => {
      const a = await store.createAccount('conf-previews', 'free');
      // Characters of one, two, three and four bytes in UTF-8; the last one is two UTF-16 units.
      const long = `${'é€'.repeat(60)}${'\u{1F600}'.repeat(50)}${'x'.repeat(5000)}`;
      const texts = [
        { queryText: long, answer: `${'a'.repeat(199)}\u{1F600}${'b'.repeat(100)}` },
        { queryText: 'Short one', answer: 'Short.' },
        { queryText: '\u{1F600}'.repeat(150), answer: '' },
        { queryText: `${'y'.repeat(200)}`, answer: `${'\u{10FFFF}\u{40000}\u{1F600}'.repeat(3)}z` },
        // Not ASCII, and nothing beyond U+FFFF.
        { queryText: 'Café — naïve, 東京. '.repeat(20), answer: 'ü' },
      ];
      for (const [i, t] of texts.entries())
        await store.putEntry(entry(a.id, { exactHash: `pv${i}`, namespace: i === 1 ? 'docs' : null, ...t }));
      const cut = (s: string) => {
        if (s.length <= 20) return s;
        const last = s.charCodeAt(19);
        return s.slice(0, last >= 0xd800 && last <= 0xdbff ? 19 : 20);
      };
      const listed = await store.listEntryPreviews(a.id, { page: 1, perPage: 10 }, 20);
      assert.equal(listed.total, 5);
      const whole = (await store.listEntries(a.id, { page: 1, perPage: 10 })).entries;
      assert.deepEqual(
        listed.entries.map((e) => [e.publicId, e.queryPreview, e.queryLength, e.answerPreview, e.answerLength, e.hasVector]),
        whole.map((e) => [e.publicId, cut(e.queryText), e.queryText.length, cut(e.answer), e.answer.length, e.vector !== null]),
      );
      for (const e of listed.entries) {
        for (const field of ['messages', 'queryText', 'answer', 'vector', 'prefixVector', 'prefixText'])
          assert.ok(!(field in e), `a preview has no ${field}`);
      }
      // The same listing otherwise: searched, in a namespace, ordered, in pages.
      const found = await store.listEntryPreviews(a.id, { page: 1, perPage: 10, q: 'short' }, 20);
      assert.deepEqual(
        found.entries.map((e) => e.queryPreview),
        ['Short one'],
      );
      assert.equal((await store.listEntryPreviews(a.id, { page: 1, perPage: 10, namespace: 'docs' }, 20)).total, 1);
      const second = await store.listEntryPreviews(a.id, { page: 2, perPage: 3, order: 'hits' }, 20);
      assert.deepEqual([second.total, second.entries.map((e) => e.id)], [5, [whole[3]?.id, whole[4]?.id]]);
    });

    test('a search ignores case in any script, not only in ASCII', async () => {
      const a = await store.createAccount('conf-search-case', 'free');
      await store.putEntry(entry(a.id, { exactHash: 'fr', queryText: 'Café au lait', answer: 'Milchkaffee' }));
      await store.putEntry(entry(a.id, { exactHash: 'el', queryText: 'Ποιο είναι το ΑΛΦΑΒΗΤΟ;', answer: 'x' }));
      for (const [q, text] of [
        ['CAFÉ', 'Café au lait'],
        ['café AU', 'Café au lait'],
        ['αλφαβητο', 'Ποιο είναι το ΑΛΦΑΒΗΤΟ;'],
        ['MILCHKAFFEE', 'Café au lait'],
      ] as const) {
        const listed = await store.listEntries(a.id, { page: 1, perPage: 10, q });
        assert.deepEqual(
          listed.entries.map((e) => e.queryText),
          [text],
          q,
        );
      }
    });

    test('an entry keeps its namespace; listEntries keeps one namespace, also with a search', async () => {
      const a = await store.createAccount('conf-namespace', 'free');
      const plain = await store.putEntry(entry(a.id, { queryText: 'deploy steps' }));
      const docs = await store.putEntry(entry(a.id, { namespace: 'docs', queryText: 'deploy steps' }));
      await store.putEntry(entry(a.id, { namespace: 'docs', queryText: 'other' }));
      assert.equal(plain.namespace, null);
      assert.equal((await store.getEntry(a.id, docs.publicId))?.namespace, 'docs');
      assert.equal((await store.listEntries(a.id, { page: 1, perPage: 10 })).total, 3);
      const inDocs = await store.listEntries(a.id, { page: 1, perPage: 10, namespace: 'docs' });
      assert.equal(inDocs.total, 2);
      assert.ok(inDocs.entries.every((e) => e.namespace === 'docs'));
      const searched = await store.listEntries(a.id, { page: 1, perPage: 10, namespace: 'docs', q: 'deploy' });
      assert.deepEqual(
        searched.entries.map((e) => e.id),
        [docs.id],
      );
      // An empty namespace is none: the entries stored without one.
      const inNone = await store.listEntries(a.id, { page: 1, perPage: 10, namespace: '' });
      assert.deepEqual(
        inNone.entries.map((e) => e.id),
        [plain.id],
      );
    });

    test('expired entries are deleted and reported; vectors scan in id order', async () => {
      const a = await store.createAccount('conf-expiry', 'free');
      const old = await store.putEntry(entry(a.id, { expiresAt: '2000-01-01T00:00:00.000Z' }));
      const keep = await store.putEntry(entry(a.id, { expiresAt: '2999-01-01T00:00:00.000Z' }));
      // An expired entry is no entry to delete by id either.
      assert.equal(await store.deleteEntry(a.id, old.publicId), null);
      const gone = await store.deleteExpired(new Date().toISOString(), 1000);
      assert.ok(gone.some((g) => g.id === old.id && g.accountId === a.id && g.contextHash === 'ctx'));
      assert.ok(!gone.some((g) => g.id === keep.id));
      const rows = await store.scanVectors(old.id - 1, 1000);
      assert.ok(rows.some((r) => r.id === keep.id));
      assert.ok(!rows.some((r) => r.id === old.id));
      assert.deepEqual(
        rows.map((r) => r.id),
        [...rows.map((r) => r.id)].sort((x, y) => x - y),
      );
    });

    test('vectors made again are written where the entry still has the vector id read, and nothing else of it changes', async () => {
      const a = await store.createAccount('conf-vectors', 'free');
      const put = await store.putEntry(entry(a.id, { embedderId: 'e', prefixVector: Float32Array.from([1, 0]) }));
      await store.recordHits(new Map([[put.id, { count: 2, at: new Date().toISOString(), lookupMs: 1, createdAt: put.createdAt }]]));
      const before = (await store.getEntries([put.id]))[0];
      assert.equal((await store.getEntryByHash(a.id, put.exactHash))?.embedderId, 'e');
      const stale = { id: put.id, from: 'old', embedderId: 'e2', vector: Float32Array.from([0, 1]), prefixVector: null };
      assert.deepEqual(await store.replaceVectors([stale]), []);
      assert.deepEqual(
        await store.replaceVectors([
          { ...stale, from: 'e' },
          { ...stale, id: put.id + 1_000_000, from: 'e' },
        ]),
        [put.id],
      );
      const after = (await store.getEntries([put.id]))[0];
      assert.equal(after?.embedderId, 'e2');
      assert.deepEqual([...(after?.vector ?? [])], [0, 1]);
      assert.equal(after?.prefixVector, null);
      assert.deepEqual(
        { ...after, embedderId: undefined, vector: undefined, prefixVector: undefined },
        { ...before, embedderId: undefined, vector: undefined, prefixVector: undefined },
      );
      // The exact lookup sees the new vector id too (a cached head is not served stale).
      assert.equal((await store.getEntryByHash(a.id, put.exactHash))?.embedderId, 'e2');
      assert.equal((await store.scanVectors(put.id - 1, 1))[0]?.embedderId, 'e2');
    });

    test('the ids of vectors to make again: of the embedder, bare or of another text form, not the current one', async () => {
      const a = await store.createAccount('conf-stale', 'free');
      const bare = await store.putEntry(entry(a.id, { embedderId: 'use-lite@9' }));
      const older = await store.putEntry(entry(a.id, { embedderId: 'use-lite@9+text1' }));
      await store.putEntry(entry(a.id, { embedderId: 'use-lite@9+text2' }));
      await store.putEntry(entry(a.id, { embedderId: 'use-lite@99' }));
      await store.putEntry(entry(a.id, { embedderId: 'http:m' }));
      await store.putEntry(entry(a.id, { embedderId: 'use-lite@9', vector: null }));
      // Stored while the embedder could not embed.
      const pending = await store.putEntry(entry(a.id, { embedderId: 'use-lite@9+textpending', vector: null }));
      const ids = await store.staleVectorIds('use-lite@9+text2', 'use-lite@9', 'use-lite@9+text', bare.id - 1, 100);
      assert.deepEqual(ids, [bare.id, older.id, pending.id]);
      assert.deepEqual(await store.staleVectorIds('use-lite@9+text2', 'use-lite@9', 'use-lite@9+text', bare.id, 100), [
        older.id,
        pending.id,
      ]);
      assert.deepEqual(await store.staleVectorIds('use-lite@9+text2', 'use-lite@9', 'use-lite@9+text', bare.id - 1, 1), [bare.id]);
      // Found however far after the id asked from.
      assert.deepEqual(await store.staleVectorIds('use-lite@9+text2', 'use-lite@9', 'use-lite@9+text', bare.id - 20_001, 1), [bare.id]);
    });

    test('sessions: created, found until they expire, deleted', async () => {
      const a = await store.createAccount('conf-sessions', 'free');
      const now = Date.now();
      const s = {
        tokenHash: `t-${Math.random()}`,
        accountId: a.id,
        csrfToken: 'c',
        createdAt: new Date(now).toISOString(),
        expiresAt: new Date(now + 60_000).toISOString(),
      };
      await store.createSession(s);
      assert.deepEqual(await store.getSession(s.tokenHash, new Date(now).toISOString()), s);
      assert.equal(await store.getSession(s.tokenHash, new Date(now + 61_000).toISOString()), null);
      await store.deleteSession(s.tokenHash);
      assert.equal(await store.getSession(s.tokenHash, new Date(now).toISOString()), null);
    });

    test("a new password ends the account's sessions, and only its own", async () => {
      const a = await store.createAccount('conf-password', 'free');
      const b = await store.createAccount('conf-password-b', 'free');
      const now = new Date();
      const session = (accountId: string) => ({
        tokenHash: `t-${Math.random()}`,
        accountId,
        csrfToken: 'c',
        createdAt: now.toISOString(),
        expiresAt: new Date(now.getTime() + 60_000).toISOString(),
      });
      const sa = session(a.id);
      const sb = session(b.id);
      await store.createSession(sa);
      await store.createSession(sb);
      await store.setPassword(a.id, 'new-hash');
      assert.equal(await store.getPasswordHash(a.id), 'new-hash');
      assert.equal(await store.getSession(sa.tokenHash, now.toISOString()), null);
      assert.deepEqual(await store.getSession(sb.tokenHash, now.toISOString()), sb);
    });

    test('deleting an account removes its keys, sessions, entries and usage for good, and nothing of another account', async () => {
      const gone = await store.createAccount('conf-delete', 'pro');
      const kept = await store.createAccount('conf-delete-kept', 'pro');
      const now = new Date();
      const live = { createdAt: now.toISOString(), expiresAt: new Date(now.getTime() + 60_000).toISOString(), csrfToken: 'c' };
      const bucket = '2030-01-01T10:00:00.000Z';
      const setUp = async (accountId: string) => {
        const hash = `hash-${Math.random()}`;
        await store.createKey({ accountId, name: null, prefix: 'rp_live_x', secretHash: hash });
        const session = { ...live, tokenHash: `t-${Math.random()}`, accountId };
        await store.createSession(session);
        // The same conversation in both accounts: one entry each.
        const put = await store.putEntry(entry(accountId, { exactHash: 'shared', answer: `answer of ${accountId}` }));
        await store.putEntry(entry(accountId));
        await store.addUsage([
          { accountId, bucket, requests: 2, exactHits: 1, semanticHits: 0, lookupMsTotal: 1, tokensSaved: 1, costSaved: 0, stores: 1 },
        ]);
        return { hash, session, put };
      };
      const a = await setUp(gone.id);
      const b = await setUp(kept.id);
      const deleted = await store.deleteAccount(gone.id);
      assert.deepEqual(deleted, { account: gone, keys: 1, sessions: 1, entries: 2, usageBuckets: 1 });
      // Gone at once for everyone, also before the embedded store has removed the rows of its entries.
      assert.equal(await store.getAccount(gone.id), null);
      assert.equal(await store.getAccountByName('conf-delete'), null);
      assert.ok(!(await store.listAccounts()).some((x) => x.id === gone.id));
      assert.equal(await store.findKeyByHash(a.hash), null);
      assert.deepEqual(await store.listKeys(gone.id), []);
      assert.equal(await store.getSession(a.session.tokenHash, now.toISOString()), null);
      assert.deepEqual(await store.getStorage(gone.id), { entries: 0, bytes: 0 });
      assert.ok(!(await store.scanVectors(0, 100_000)).some((r) => r.accountId === gone.id));
      if (store.purgeDeletedAccounts) assert.deepEqual(await store.purgeDeletedAccounts(), { accounts: 1, entries: 2, usageBuckets: 1 });
      assert.equal(await store.getEntryByHash(gone.id, 'shared'), null);
      assert.deepEqual(await store.getEntries([a.put.id]), []);
      assert.equal((await store.listEntries(gone.id, { page: 1, perPage: 10 })).total, 0);
      assert.ok(!(await store.scanVectors(0, 100_000)).some((r) => r.accountId === gone.id));
      assert.deepEqual(await store.getUsage(gone.id, {}), []);
      // The other account keeps all it had.
      assert.equal((await store.findKeyByHash(b.hash))?.account.id, kept.id);
      assert.deepEqual(await store.getSession(b.session.tokenHash, now.toISOString()), b.session);
      assert.equal((await store.getEntryByHash(kept.id, 'shared'))?.answer, `answer of ${kept.id}`);
      assert.equal((await store.listEntries(kept.id, { page: 1, perPage: 10 })).total, 2);
      assert.equal((await store.getUsage(kept.id, {}))[0]?.requests, 2);
      // Done once.
      assert.equal(await store.deleteAccount(gone.id), null);
      // Counts of requests let in before the deletion, written after it, do not bring its usage
      // back; a store under way is refused, and another account's store of the same batch is kept.
      const row = { bucket, requests: 1, exactHits: 0, semanticHits: 0, lookupMsTotal: 1, tokensSaved: 0, costSaved: 0, stores: 0 };
      await store.addUsage([
        { ...row, accountId: gone.id },
        { ...row, accountId: kept.id },
      ]);
      assert.deepEqual(await store.getUsage(gone.id, {}), []);
      assert.equal((await store.getUsage(kept.id, {}))[0]?.requests, 3);
      const [late, other] = await Promise.allSettled([
        store.putEntry(entry(gone.id)),
        store.putEntry(entry(kept.id, { exactHash: 'late' })),
      ]);
      assert.equal(late.status, 'rejected');
      assert.ok(late.status === 'rejected' && late.reason instanceof AccountGoneError, String(late.status === 'rejected' && late.reason));
      assert.equal(other.status, 'fulfilled');
      assert.equal((await store.listEntries(gone.id, { page: 1, perPage: 10 })).total, 0);
      assert.equal((await store.getEntryByHash(kept.id, 'late'))?.answer, 'a');
    });

    test('usage adds up per account and hour bucket, within a period', async () => {
      const a = await store.createAccount('conf-usage', 'free');
      const row = {
        accountId: a.id,
        bucket: '2030-01-01T10:00:00.000Z',
        requests: 2,
        exactHits: 1,
        semanticHits: 0,
        lookupMsTotal: 1.5,
        tokensSaved: 10,
        costSaved: 0.25,
        stores: 1,
      };
      await store.addUsage([row]);
      await store.addUsage([row, { ...row, bucket: '2030-01-01T11:00:00.000Z' }]);
      const all = await store.getUsage(a.id, {});
      assert.equal(all.length, 2);
      assert.deepEqual(
        { ...all[0] },
        {
          bucket: '2030-01-01T10:00:00.000Z',
          requests: 4,
          exactHits: 2,
          semanticHits: 0,
          lookupMsTotal: 3,
          tokensSaved: 20,
          costSaved: 0.5,
          stores: 2,
        },
      );
      assert.equal((await store.getUsage(a.id, { from: '2030-01-01T11:00:00.000Z' })).length, 1);
    });

    test('storage: an account keeps its entries and their UTF-8 bytes, through stores, replacements, deletes and expiry', async () => {
      const a = await store.createAccount('conf-storage', 'free');
      const b = await store.createAccount('conf-storage-b', 'free');
      assert.deepEqual(await store.getStorage(a.id), { entries: 0, bytes: 0 });
      // Bytes, not characters: the conversation's JSON and the answer in UTF-8.
      const first = entry(a.id, { exactHash: 's1', messages: [{ role: 'user', content: 'Grüße, 世界 "quoted"' }], answer: 'Ça va 🙂' });
      assert.notEqual(bytesOf(first), JSON.stringify(first.messages).length + first.answer.length);
      const p1 = await store.putEntry(first);
      const second = entry(a.id, { exactHash: 's2', answer: 'second', expiresAt: '2000-01-01T00:00:00.000Z' });
      await store.putEntry(second);
      await store.putEntry(entry(b.id, { exactHash: 's1', answer: 'another account' }));
      assert.deepEqual(await store.getStorage(a.id), { entries: 2, bytes: bytesOf(first) + bytesOf(second) });
      // Stored again: still one entry, of the new bytes.
      const replaced = { ...first, answer: 'a longer answer than before, ünïcödé' };
      await store.putEntry(replaced);
      assert.deepEqual(await store.getStorage(a.id), { entries: 2, bytes: bytesOf(replaced) + bytesOf(second) });
      // An expired entry counts until it is removed; removing another account's leaves this one's.
      await store.deleteExpired(new Date().toISOString(), 1000, b.id);
      assert.equal((await store.getStorage(a.id)).entries, 2);
      assert.deepEqual(await store.deleteExpired(new Date().toISOString(), 1000, a.id).then((g) => g.map((x) => x.accountId)), [a.id]);
      assert.deepEqual(await store.getStorage(a.id), { entries: 1, bytes: bytesOf(replaced) });
      await store.deleteEntry(a.id, p1.publicId);
      assert.deepEqual(await store.getStorage(a.id), { entries: 0, bytes: 0 });
      assert.deepEqual(await store.getStorage(b.id), { entries: 1, bytes: bytesOf(entry(b.id, { answer: 'another account' })) });
    });

    test('a store past max_entries is refused and writes nothing; a replacement at the limit is taken; a delete makes room', async () => {
      const a = await store.createAccount('conf-max-entries', 'free');
      const b = await store.createAccount('conf-max-entries-b', 'free');
      const limits = { maxEntries: 2, maxStoredBytes: null };
      const kept = await store.putEntry(entry(a.id, { exactHash: 'e1' }), limits);
      await store.putEntry(entry(a.id, { exactHash: 'e2' }), limits);
      const before = await store.getStorage(a.id);
      await assert.rejects(store.putEntry(entry(a.id, { exactHash: 'e3' }), limits), (err: unknown) => {
        assert.ok(err instanceof StorageQuotaError, String(err));
        assert.deepEqual([err.limit, err.allowed, err.current, err.adding], ['max_entries', 2, 2, 1]);
        return true;
      });
      assert.equal(await store.getEntryByHash(a.id, 'e3'), null);
      assert.deepEqual(await store.getStorage(a.id), before);
      // Another account of the same plan stores as ever.
      await store.putEntry(entry(b.id, { exactHash: 'e3' }), limits);
      // Stored again at the limit: no entry more.
      const again = await store.putEntry(entry(a.id, { exactHash: 'e1', answer: 'replaced' }), limits);
      assert.equal(again.id, kept.id);
      assert.equal((await store.getEntryByHash(a.id, 'e1'))?.answer, 'replaced');
      assert.ok(await store.deleteEntry(a.id, kept.publicId));
      await store.putEntry(entry(a.id, { exactHash: 'e3' }), limits);
      assert.equal((await store.getStorage(a.id)).entries, 2);
      // Without limits (a plan with none), the same store is taken.
      await store.putEntry(entry(a.id, { exactHash: 'e4' }), { maxEntries: null, maxStoredBytes: null });
      assert.equal((await store.getStorage(a.id)).entries, 3);
    });

    test('a store past max_stored_bytes is refused; a replacement counts only the bytes it adds', async () => {
      const a = await store.createAccount('conf-max-bytes', 'free');
      const one = entry(a.id, { exactHash: 'b1', answer: 'x'.repeat(100) });
      const two = entry(a.id, { exactHash: 'b2', answer: 'y'.repeat(100) });
      const limits = { maxEntries: null, maxStoredBytes: bytesOf(one) + bytesOf(two) + 10 };
      await store.putEntry(one, limits);
      await store.putEntry(two, limits);
      const third = entry(a.id, { exactHash: 'b3', answer: 'z' });
      await assert.rejects(store.putEntry(third, limits), (err: unknown) => {
        assert.ok(err instanceof StorageQuotaError, String(err));
        assert.deepEqual(
          [err.limit, err.allowed, err.current, err.adding],
          ['max_stored_bytes', limits.maxStoredBytes, bytesOf(one) + bytesOf(two), bytesOf(third)],
        );
        return true;
      });
      // Ten bytes more fit; eleven do not, and the entry keeps its answer.
      await store.putEntry({ ...one, answer: 'x'.repeat(110) }, limits);
      await assert.rejects(store.putEntry({ ...one, answer: 'x'.repeat(111) }, limits), (err: unknown) => {
        assert.ok(err instanceof StorageQuotaError);
        assert.deepEqual([err.limit, err.current, err.adding], ['max_stored_bytes', limits.maxStoredBytes, 1]);
        return true;
      });
      assert.equal((await store.getEntryByHash(a.id, 'b1'))?.answer, 'x'.repeat(110));
      // A replacement that shrinks is taken, also past a limit lowered since.
      await store.putEntry({ ...one, answer: 'x' }, { maxEntries: 1, maxStoredBytes: 10 });
      assert.deepEqual(await store.getStorage(a.id), { entries: 2, bytes: bytesOf({ ...one, answer: 'x' }) + bytesOf(two) });
    });

    test('stores racing for the last room: as many are written as fit, the others refused', async () => {
      const a = await store.createAccount('conf-race', 'free');
      const limits = { maxEntries: 5, maxStoredBytes: null };
      await store.putEntry(entry(a.id, { exactHash: 'r-first' }), limits);
      const results = await Promise.allSettled(
        Array.from({ length: 12 }, (_, i) => store.putEntry(entry(a.id, { exactHash: `r${i}` }), limits)),
      );
      assert.equal(results.filter((r) => r.status === 'fulfilled').length, 4);
      for (const r of results) if (r.status === 'rejected') assert.ok(r.reason instanceof StorageQuotaError, String(r.reason));
      assert.equal((await store.getStorage(a.id)).entries, 5);
      assert.equal((await store.listEntries(a.id, { page: 1, perPage: 100 })).total, 5);
    });
  });
}
