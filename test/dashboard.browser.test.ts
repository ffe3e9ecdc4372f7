import assert from 'node:assert/strict';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import { tempDir } from './helpers.ts';
import { api, ROOT, runCli, startServerProcess, type ServerProcess } from './process.ts';

const CHROMIUM = '/usr/bin/chromium';
const skip = existsSync(CHROMIUM)
  ? false
  : process.env.CI === 'true'
    ? false
    : `install Debian's chromium (${CHROMIUM}) to run the browser tests`;
const ARTIFACTS = path.join(ROOT, 'test-artifacts');

describe('dashboard in a real browser', { skip }, () => {
  const dir = tempDir('reprise-dash-');
  const env = { REPRISE_DATA_DIR: dir, REPRISE_EMBEDDER: 'none' };
  let server: ServerProcess;
  let browser: Browser;
  let page: Page;
  let apiKey: string;

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const created = await runCli(['keys', 'create', '--account', 'acme', '--plan', 'pro', '--json'], env);
    apiKey = (JSON.parse(created.stdout) as { key: string }).key;
    const pw = await runCli(['accounts', 'set-password', 'acme', '--password-stdin'], env, 'correct horse battery\n');
    assert.equal(pw.code, 0, pw.stderr);
    server = await startServerProcess(env);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
    });
    page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
    page.on('dialog', (d) => void d.accept());
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const shot = (name: string) => page.screenshot({ path: path.join(ARTIFACTS, `dashboard-${name}.png`), fullPage: true });
  const statValue = async (label: string) =>
    page
      .locator('.stat', { has: page.locator('.label', { hasText: label }) })
      .locator('.value')
      .innerText();

  test('sign in, generate a key and use it, see usage change, revoke it, delete an entry', async () => {
    await page.goto(`${server.url}/dashboard`);
    await page.locator('#login-form').waitFor();
    await shot('sign-in');
    await page.fill('#login-account', 'acme');
    await page.fill('#login-password', 'wrong password');
    await page.click('#login-form button[type=submit]');
    await page.locator('#login-error', { hasText: 'Wrong account name or password' }).waitFor();

    await page.fill('#login-password', 'correct horse battery');
    await page.click('#login-form button[type=submit]');
    await page.locator('#tab-usage').waitFor();
    assert.equal(await page.locator('#who-name').innerText(), 'acme');
    assert.equal(await statValue('Requests'), '0');

    // API Keys: generate, shown once, works against the API.
    await page.click('button[data-tab=keys]');
    await page.fill('#key-name', 'browser key');
    await page.click('#generate-key');
    await page.locator('#new-key').waitFor();
    const secret = await page.locator('#new-key-value').innerText();
    assert.match(secret, /^rp_live_[0-9A-Za-z]{40}$/);
    await page.locator('#keys-table td', { hasText: 'browser key' }).waitFor();
    await shot('keys');
    const messages = [{ role: 'user', content: 'What does the dashboard show?' }];
    assert.equal((await api(server.url, 'POST', '/api/v1/check', secret, { messages })).json.cache_hit, false);
    await api(server.url, 'POST', '/api/v1/store', secret, {
      messages,
      answer: 'Keys, usage and entries.',
      model: 'gpt-4o',
      tokens_used: 250,
    });
    assert.equal((await api(server.url, 'POST', '/api/v1/check', secret, { messages })).json.cache_type, 'exact');
    await api(server.url, 'POST', '/api/v1/store', apiKey, { messages: [{ role: 'user', content: 'A second entry' }], answer: 'Second.' });

    // Usage: the figures and the chart follow.
    await page.click('button[data-tab=usage]');
    await page.locator('.stat .value', { hasText: '50%' }).waitFor();
    assert.equal(await statValue('Requests'), '2');
    assert.equal(await statValue('Exact hits'), '1');
    // What the account keeps: the two entries stored.
    assert.equal(await statValue('Storage'), '2');
    assert.ok(await page.locator('#chart-requests canvas').count());
    await page.locator('#top-entries td', { hasText: 'What does the dashboard show?' }).waitFor();
    await shot('usage');

    // Revoke: the API refuses the key at once.
    await page.click('button[data-tab=keys]');
    await page.locator('#keys-table tr', { hasText: 'browser key' }).locator('button.revoke').click();
    await page.locator('#keys-table tr', { hasText: 'browser key' }).locator('.status.revoked').waitFor();
    const refused = await api(server.url, 'GET', '/api/v1/usage', secret);
    assert.equal(refused.status, 401);

    // Entries: view one and delete it; it stops matching.
    await page.click('button[data-tab=entries]');
    await page.locator('#entries-table tr.clickable', { hasText: 'What does the dashboard show?' }).click();
    await page.locator('#entry .msg.answer', { hasText: 'Keys, usage and entries.' }).waitFor();
    await shot('entries');
    await page.click('#delete-entry');
    await page.locator('#entries-table tr.clickable', { hasText: 'What does the dashboard show?' }).waitFor({ state: 'detached' });
    assert.equal((await api(server.url, 'POST', '/api/v1/check', apiKey, { messages })).json.cache_hit, false);

    // Settings. While the current ones are on their way (held here), the form cannot be typed
    // into: what was typed would be overwritten when they arrive.
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    await page.route('**/dashboard/api/me', async (route) => {
      await held;
      await route.continue();
    });
    await page.click('button[data-tab=settings]');
    assert.equal(await page.locator('#threshold').isDisabled(), true);
    release();
    await page.fill('#threshold', '0.9');
    await page.fill('#ttl', '86400');
    await page.click('#settings-form button[type=submit]');
    await page.locator('#settings-saved').waitFor();
    await page.unroute('**/dashboard/api/me');
    const me = await page.evaluate(async () => (await fetch('/dashboard/api/me')).json());
    assert.equal(me.account.default_threshold, 0.9);
    assert.equal(me.account.entry_ttl_seconds, 86400);
    await shot('settings');

    await signOut();
  });

  /** Creates an account with a dashboard password and a key; returns the key. */
  async function accountWithPassword(name: string): Promise<string> {
    const created = await runCli(['keys', 'create', '--account', name, '--json'], env);
    assert.equal(created.code, 0, created.stderr);
    const pw = await runCli(['accounts', 'set-password', name, '--password-stdin'], env, 'correct horse battery\n');
    assert.equal(pw.code, 0, pw.stderr);
    return (JSON.parse(created.stdout) as { key: string }).key;
  }

  /** Signs `name` in at the dashboard in `tab` (the shared page unless told) and waits for the first tab. */
  async function signIn(name: string, tab: Page = page): Promise<void> {
    await tab.goto(`${server.url}/dashboard`);
    await tab.fill('#login-account', name);
    await tab.fill('#login-password', 'correct horse battery');
    await tab.click('#login-form button[type=submit]');
    await tab.locator('#tab-usage').waitFor();
  }

  /** Signs out and waits for the sign-in form. */
  async function signOut(): Promise<void> {
    await page.click('#logout');
    await page.locator('#login-form').waitFor();
  }

  /** A new account with a password and a key, signed in at the dashboard; returns the key. */
  async function signedInAs(name: string): Promise<string> {
    const key = await accountWithPassword(name);
    await signIn(name);
    return key;
  }

  test('requests that all missed are charted as a hit rate of 0% and no savings, not as no requests', async () => {
    const key = await accountWithPassword('all-misses');
    for (const content of ['first miss', 'second miss']) {
      assert.equal((await api(server.url, 'POST', '/api/v1/check', key, { messages: [{ role: 'user', content }] })).json.cache_hit, false);
    }
    await signIn('all-misses');
    await page
      .locator('.stat', { has: page.locator('.label', { hasText: 'Requests' }) })
      .locator('.value', { hasText: '2' })
      .waitFor();
    await page.locator('#chart-requests canvas').waitFor();
    for (const chart of ['#chart-rate', '#chart-savings']) {
      assert.equal(await page.locator(`${chart} .empty`).count(), 0, `${chart} does not say there were no requests`);
      assert.equal(await page.locator(`${chart} canvas`).count(), 1, `${chart} is drawn`);
    }
    await signOut();
  });

  test('entries never served are not listed as most reused', async () => {
    const key = await accountWithPassword('never-reused');
    const messages = [{ role: 'user', content: 'What is the tallest mountain?' }];
    await api(server.url, 'POST', '/api/v1/store', key, { messages, answer: 'Everest.', model: 'gpt-4o' });
    await signIn('never-reused');
    await page.locator('#top-entries td', { hasText: 'No entry reused yet.' }).waitFor();
    await signOut();
    assert.equal((await api(server.url, 'POST', '/api/v1/check', key, { messages })).json.cache_hit, true);
    await signIn('never-reused');
    await page.locator('#top-entries td', { hasText: 'What is the tallest mountain?' }).waitFor();
    assert.equal(await page.locator('#top-entries tbody tr').count(), 1);
    await signOut();
  });

  test('a revoke that the server refused (the session was signed out meanwhile) is not announced as done', async () => {
    const key = await signedInAs('signed-out-revoker');
    await page.click('button[data-tab=keys]');
    await page.locator('#keys-table button.revoke').waitFor();
    // The password is set again (a leaked one reset): every session of the account is signed out.
    const pw = await runCli(['accounts', 'set-password', 'signed-out-revoker', '--password-stdin'], env, 'another horse battery\n');
    assert.equal(pw.code, 0, pw.stderr);
    await page.locator('#keys-table button.revoke').click();
    await page.locator('#login-form').waitFor();
    const toast = page.locator('#toast');
    assert.ok(!(await toast.isVisible()) || (await toast.innerText()) !== 'Key revoked', 'no "Key revoked" for a key still active');
    assert.equal((await api(server.url, 'GET', '/api/v1/usage', key)).status, 200);
  });

  test('a delete that the server refused (the session was signed out meanwhile) is not announced as done', async () => {
    const key = await accountWithPassword('signed-out-deleter');
    const messages = [{ role: 'user', content: 'Is this entry still here?' }];
    await api(server.url, 'POST', '/api/v1/store', key, { messages, answer: 'Yes.' });
    await signIn('signed-out-deleter');
    await page.click('button[data-tab=entries]');
    await page.locator('#entries-table tr.clickable', { hasText: 'Is this entry still here?' }).click();
    await page.locator('#delete-entry').waitFor();
    const pw = await runCli(['accounts', 'set-password', 'signed-out-deleter', '--password-stdin'], env, 'another horse battery\n');
    assert.equal(pw.code, 0, pw.stderr);
    await page.click('#delete-entry');
    await page.locator('#login-form').waitFor();
    const toast = page.locator('#toast');
    assert.ok(!(await toast.isVisible()) || (await toast.innerText()) !== 'Entry deleted', 'no "Entry deleted" for an entry still cached');
    assert.equal((await api(server.url, 'POST', '/api/v1/check', key, { messages })).json.cache_hit, true);
  });

  test('signed in with the keyboard, the focus goes to the heading of the tab shown, not lost with the form', async () => {
    await accountWithPassword('keyboard-sign-in');
    for (const [hash, heading] of [
      ['', 'Usage'],
      ['#entries', 'Entries'],
    ] as const) {
      // A page loaded afresh, its form empty.
      await page.goto('about:blank');
      await page.goto(`${server.url}/dashboard${hash}`);
      await page.focus('#login-account');
      await page.keyboard.type('keyboard-sign-in');
      await page.keyboard.press('Tab');
      await page.keyboard.type('correct horse battery');
      await page.keyboard.press('Enter');
      await page.getByRole('tabpanel', { name: heading }).waitFor();
      const focused = await page.evaluate(() => ({
        tag: document.activeElement?.tagName,
        text: document.activeElement?.textContent,
        panel: document.activeElement?.closest('[role=tabpanel]')?.id,
      }));
      assert.deepEqual(focused, { tag: 'H1', text: heading, panel: `tab-${heading.toLowerCase()}` });
      // The next Tab goes on from there, into the tab's content.
      await page.keyboard.press('Tab');
      assert.equal(await page.evaluate(() => document.activeElement?.closest('[role=tabpanel]')?.id), `tab-${heading.toLowerCase()}`);
      await signOut();
    }
  });

  test('with the keyboard alone an entry is opened, read and deleted; focus goes to the entry opened', async () => {
    const key = await accountWithPassword('keyboard-only');
    const messages = [{ role: 'user', content: 'Can I open this without a mouse?' }];
    await api(server.url, 'POST', '/api/v1/store', key, { messages, answer: 'With Tab and Enter.' });
    await signIn('keyboard-only');
    await page.click('button[data-tab=entries]');
    await page.locator('#entries-table tr.clickable').waitFor();
    await page.focus('#search');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Can I open this without a mouse?');
    await page.keyboard.press('Enter');
    await page.locator('#entry .msg.answer', { hasText: 'With Tab and Enter.' }).waitFor();
    assert.equal(await page.evaluate(() => document.querySelector('#entry')?.contains(document.activeElement)), true);
    // On to the Delete button, as far as it is.
    for (let i = 0; i < 20 && (await page.evaluate(() => document.activeElement?.id)) !== 'delete-entry'; i++)
      await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await page.locator('#entries-table td', { hasText: 'Nothing cached yet' }).waitFor();
    assert.equal((await api(server.url, 'POST', '/api/v1/check', key, { messages })).json.cache_hit, false);
    await signOut();
  });

  test('with the keyboard alone, a key revoked or the last page reached leaves the focus on a control near, not lost at the top of the page', async () => {
    const key = await accountWithPassword('keyboard-focus');
    for (const name of ['second key', 'third key']) {
      assert.equal((await runCli(['keys', 'create', '--account', 'keyboard-focus', '--name', name, '--json'], env)).code, 0);
    }
    for (let i = 0; i < 21; i++) {
      await api(server.url, 'POST', '/api/v1/store', key, { messages: [{ role: 'user', content: `paged ${i}` }], answer: `answer ${i}` });
    }
    await signIn('keyboard-focus');
    const focused = () => page.evaluate(() => document.activeElement?.getAttribute('aria-label') ?? document.activeElement?.textContent);
    await page.click('button[data-tab=keys]');
    await page.getByRole('button', { name: 'Revoke second key' }).focus();
    await page.keyboard.press('Enter');
    await page.locator('#keys-table tr', { hasText: 'second key' }).locator('.status.revoked').waitFor();
    // On to the next key's Revoke button.
    assert.equal(await focused(), 'Revoke third key');
    await page.keyboard.press('Enter');
    await page.locator('#keys-table tr', { hasText: 'third key' }).locator('.status.revoked').waitFor();
    assert.equal(await focused(), 'Revoke Unnamed key');

    await page.click('button[data-tab=entries]');
    await page.locator('#page-info', { hasText: 'Page 1 of 2' }).waitFor();
    await page.focus('#next');
    await page.keyboard.press('Enter');
    await page.locator('#page-info', { hasText: 'Page 2 of 2' }).waitFor();
    // Next is disabled on the last page: the focus is on Previous, to go back.
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'prev');
    await page.keyboard.press('Enter');
    await page.locator('#page-info', { hasText: 'Page 1 of 2' }).waitFor();
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'next');
    await signOut();
  });

  test('on a slow server, Generate or Delete pressed again while the first is on its way acts once', async () => {
    const key = await signedInAs('impatient');
    await api(server.url, 'POST', '/api/v1/store', key, { messages: [{ role: 'user', content: 'Deleted once' }], answer: 'Once.' });
    await page.click('button[data-tab=keys]');
    await page.locator('#keys-table button.revoke').waitFor();
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    let asked = 0;
    await page.route('**/dashboard/api/keys', async (route) => {
      if (route.request().method() === 'POST') {
        asked++;
        await held;
      }
      await route.continue();
    });
    await page.fill('#key-name', 'pressed twice');
    await page.press('#key-name', 'Enter');
    await page.press('#key-name', 'Enter');
    await page.click('#generate-key', { force: true });
    release();
    await page.locator('#keys-table td', { hasText: 'pressed twice' }).first().waitFor();
    await page.unroute('**/dashboard/api/keys');
    const keys = await page.evaluate(async () => (await fetch('/dashboard/api/keys')).json());
    assert.equal(keys.data.filter((k: { name: string }) => k.name === 'pressed twice').length, 1, 'one key made');
    assert.equal(asked, 1);
    assert.equal(await page.locator('#generate-key').isDisabled(), false, 'ready for the next key');

    await page.click('button[data-tab=entries]');
    await page.locator('#entries-table tr.clickable', { hasText: 'Deleted once' }).click();
    await page.locator('#delete-entry').waitFor();
    let releaseDelete: () => void = () => {};
    const deleteHeld = new Promise<void>((resolve) => (releaseDelete = resolve));
    let deletes = 0;
    await page.route('**/dashboard/api/entries/*', async (route) => {
      if (route.request().method() === 'DELETE') {
        deletes++;
        await deleteHeld;
      }
      await route.continue();
    });
    await page.click('#delete-entry');
    await page.click('#delete-entry', { force: true });
    releaseDelete();
    await page.locator('#toast', { hasText: 'Entry deleted' }).waitFor();
    await page.locator('#entries-table td', { hasText: 'Nothing cached yet' }).waitFor();
    await page.unroute('**/dashboard/api/entries/*');
    assert.equal(deletes, 1);
    assert.equal(await page.locator('#toast').innerText(), 'Entry deleted');
    await signOut();
  });

  test('in a phone-sized window no tab is wider than the screen', async () => {
    const key = await accountWithPassword('on-a-phone');
    await api(server.url, 'POST', '/api/v1/store', key, {
      messages: [{ role: 'user', content: 'A question long enough to be cut short in the list of entries' }],
      answer: 'Yes.',
      model: 'gpt-4o-mini',
    });
    await api(server.url, 'POST', '/api/v1/check', key, {
      messages: [{ role: 'user', content: 'A question long enough to be cut short in the list of entries' }],
    });
    const phone = await browser.newPage({ viewport: { width: 375, height: 740 } });
    try {
      await phone.goto(`${server.url}/dashboard`);
      await phone.fill('#login-account', 'on-a-phone');
      await phone.fill('#login-password', 'correct horse battery');
      await phone.click('#login-form button[type=submit]');
      await phone.locator('#top-entries td', { hasText: 'A question long enough' }).waitFor();
      const width = () => phone.evaluate(() => document.documentElement.scrollWidth);
      assert.equal(await width(), 375, 'usage');
      await phone.click('button[data-tab=keys]');
      await phone.locator('#keys-table button.revoke').waitFor();
      assert.equal(await width(), 375, 'keys');
      await phone.click('button[data-tab=entries]');
      await phone.locator('#entries-table tr.clickable').click();
      await phone.locator('#entry .msg.answer').waitFor();
      assert.equal(await width(), 375, 'entries');
      await phone.screenshot({ path: path.join(ARTIFACTS, 'dashboard-phone-entries.png'), fullPage: true });
      await phone.click('button[data-tab=settings]');
      assert.equal(await width(), 375, 'settings');
    } finally {
      await phone.close();
    }
  });

  test('at 320 pixels wide (the narrowest phones, or a page zoomed to 400%) the tab bar fits, and no tab scrolls sideways', async () => {
    await accountWithPassword('narrowest');
    const phone = await browser.newPage({ viewport: { width: 320, height: 640 } });
    try {
      await phone.goto(`${server.url}/dashboard`);
      await phone.fill('#login-account', 'narrowest');
      await phone.fill('#login-password', 'correct horse battery');
      await phone.click('#login-form button[type=submit]');
      await phone.locator('#stats .stat').first().waitFor();
      for (const tab of ['usage', 'keys', 'entries', 'settings']) {
        await phone.click(`button[data-tab=${tab}]`);
        await phone.locator(`#tab-${tab}`).waitFor();
        assert.equal(await phone.evaluate(() => document.documentElement.scrollWidth), 320, tab);
        const last = await phone.locator('button[data-tab=settings]').boundingBox();
        assert.ok(last && last.x + last.width <= 320, `${tab}: the Settings tab ends at ${last && last.x + last.width}`);
      }
      // Each tab's name on one line.
      const keys = await phone.locator('button[data-tab=keys]').boundingBox();
      const usage = await phone.locator('button[data-tab=usage]').boundingBox();
      assert.equal(keys?.height, usage?.height, '"API Keys" is not broken over two lines');
      await phone.screenshot({ path: path.join(ARTIFACTS, 'dashboard-320.png'), fullPage: true });
    } finally {
      await phone.close();
    }
  });

  test('the server stopped while the page is open: actions say it cannot be reached, and nothing is taken as done', async () => {
    const ownDir = tempDir('reprise-dash-stopped-');
    const ownEnv = { REPRISE_DATA_DIR: ownDir, REPRISE_EMBEDDER: 'none' };
    const created = await runCli(['keys', 'create', '--account', 'stopped', '--json'], ownEnv);
    assert.equal(created.code, 0, created.stderr);
    const pw = await runCli(['accounts', 'set-password', 'stopped', '--password-stdin'], ownEnv, 'correct horse battery\n');
    assert.equal(pw.code, 0, pw.stderr);
    const own = await startServerProcess(ownEnv);
    const errors: string[] = [];
    const tab = await browser.newPage({ viewport: { width: 1360, height: 900 } });
    tab.on('pageerror', (e) => errors.push(e.message));
    try {
      const key = (JSON.parse(created.stdout) as { key: string }).key;
      for (let i = 0; i < 25; i++) {
        await api(own.url, 'POST', '/api/v1/store', key, { messages: [{ role: 'user', content: `question ${i}` }], answer: `answer ${i}` });
      }
      await tab.goto(`${own.url}/dashboard`);
      await tab.fill('#login-account', 'stopped');
      await tab.fill('#login-password', 'correct horse battery');
      await tab.click('#login-form button[type=submit]');
      await tab.click('button[data-tab=entries]');
      await tab.locator('#page-info', { hasText: 'Page 1 of 2' }).waitFor();
      await own.stop();

      await tab.click('#next');
      await tab.locator('#toast', { hasText: 'Cannot reach the server' }).waitFor();
      assert.equal(await tab.locator('#page-info').innerText(), 'Page 1 of 2 · 25 entries');
      // Signing out did not reach the server, which keeps the session: the page says so.
      await tab.click('#logout');
      await tab.locator('#toast', { hasText: 'Cannot reach the server' }).waitFor();
      assert.equal(await tab.locator('#login').isVisible(), false);
      assert.deepEqual(errors, []);
    } finally {
      await tab.close();
      await own.stop();
      rmSync(ownDir, { recursive: true, force: true });
    }
  });

  test('a tab whose session was replaced by a sign-in in another tab still makes changes, as the account signed in', async () => {
    await accountWithPassword('two-tabs');
    const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    try {
      const first = await context.newPage();
      const second = await context.newPage();
      first.on('dialog', (d) => void d.accept());
      for (const tab of [first, second]) {
        await tab.goto(`${server.url}/dashboard`);
        if (await tab.locator('#login-form').isVisible()) {
          await tab.fill('#login-account', 'two-tabs');
          await tab.fill('#login-password', 'correct horse battery');
          await tab.click('#login-form button[type=submit]');
        }
        await tab.locator('#tab-usage').waitFor();
      }
      // The second tab signs out and in again: the browser's cookie is now a new session's.
      await second.click('#logout');
      await second.fill('#login-account', 'two-tabs');
      await second.fill('#login-password', 'correct horse battery');
      await second.click('#login-form button[type=submit]');
      await second.locator('#tab-usage').waitFor();

      await first.click('button[data-tab=keys]');
      await first.fill('#key-name', 'made in the first tab');
      await first.click('#generate-key');
      await first.locator('#keys-table td', { hasText: 'made in the first tab' }).waitFor();
      assert.match(await first.locator('#new-key-value').innerText(), /^rp_live_/);
    } finally {
      await context.close();
    }
  });

  test('right-to-left questions and answers are shown right to left, their punctuation where it belongs', async () => {
    const key = await accountWithPassword('right-to-left');
    const messages = [{ role: 'user', content: 'מה השעה עכשיו?' }];
    await api(server.url, 'POST', '/api/v1/store', key, { messages, answer: 'عاصمة فرنسا هي باريس.' });
    await api(server.url, 'POST', '/api/v1/check', key, { messages });
    await signIn('right-to-left');
    const rtl = (selector: string) =>
      page
        .locator(selector)
        .first()
        .evaluate((el) => el.matches(':dir(rtl)'));
    await page.locator('#top-entries td', { hasText: 'מה השעה' }).waitFor();
    assert.equal(await rtl('#top-entries tbody td'), true, 'most reused');
    await page.click('button[data-tab=entries]');
    await page.locator('#entries-table tr.clickable', { hasText: 'מה השעה' }).click();
    await page.locator('#entry .msg.answer').waitFor();
    assert.equal(await rtl('#entries-table .open-entry'), true, 'list');
    assert.equal(await rtl('#entry .msg [dir=auto]'), true, 'question');
    assert.equal(await rtl('#entry .msg.answer [dir=auto]'), true, 'answer');
    // The labels around them stay left to right.
    assert.equal(await rtl('#entry .msg .role'), false);
    await shot('right-to-left');
    await signOut();
  });

  test('an entry of 100,000 characters is shown in boxes that scroll, its Delete button near', async () => {
    const key = await accountWithPassword('long-texts');
    await api(server.url, 'POST', '/api/v1/store', key, {
      messages: [{ role: 'user', content: `Long question ${'a'.repeat(99_980)}` }],
      answer: `Long answer ${'b '.repeat(99_990)}`,
    });
    await signIn('long-texts');
    // The list carries the start of the texts, not the whole of them.
    const listed = page.waitForResponse((r) => r.url().includes('/dashboard/api/entries?page=1&'));
    await page.click('button[data-tab=entries]');
    const listBytes = (await (await listed).body()).length;
    assert.ok(listBytes < 5_000, `the list of one entry is ${listBytes} bytes`);
    const row = page.locator('#entries-table tr.clickable .open-entry', { hasText: 'Long question' });
    assert.equal(await row.innerText(), `Long question ${'a'.repeat(186)}…`);
    await page.locator('#entries-table tr.clickable', { hasText: 'Long question' }).click();
    await page.locator('#entry .msg.answer').waitFor();
    const panel = await page.locator('#entry').boundingBox();
    assert.ok(panel && panel.height < 1800, `the entry is ${panel?.height} pixels tall`);
    // The whole text is there, to scroll through.
    const answer = page.locator('#entry .msg.answer [dir=auto]');
    assert.equal((await answer.innerText()).length >= 199_990, true);
    assert.ok(await answer.evaluate((el) => el.scrollHeight > el.clientHeight));
    await signOut();
  });

  test('what a screen reader is told: the period chosen, which key a Revoke button revokes, what an action did', async () => {
    await signedInAs('screen-reader');
    const pressed = (name: string) => page.getByRole('button', { name, exact: true, pressed: true });
    await pressed('By hour').waitFor();
    await page.getByRole('button', { name: 'By day', exact: true }).click();
    await pressed('By day').waitFor();
    assert.equal(await pressed('By hour').count(), 0);

    await page.getByRole('tab', { name: 'API Keys' }).click();
    await page.getByRole('textbox', { name: 'Name' }).fill('read aloud');
    await page.getByRole('button', { name: 'Generate new key' }).click();
    await page.locator('#new-key').waitFor();
    // Focus goes to the key just made, to copy it.
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'copy-key');
    await page.getByRole('button', { name: 'Revoke read aloud' }).click();
    await page.getByRole('status').getByText('Key revoked').waitFor();
    await signOut();
  });

  test('an account of one entry has "1 entry", not "1 entries"', async () => {
    const key = await accountWithPassword('one-entry');
    await api(server.url, 'POST', '/api/v1/store', key, { messages: [{ role: 'user', content: 'The only one' }], answer: 'Alone.' });
    await signIn('one-entry');
    const storage = page.locator('.stat', { has: page.locator('.label', { hasText: 'Storage' }) });
    await storage.locator('.value', { hasText: '1' }).waitFor();
    assert.match(await storage.locator('.sub').innerText(), /^entry of 10,000,/);
    await page.click('button[data-tab=entries]');
    await page.locator('#entries-table tr.clickable').waitFor();
    assert.equal(await page.locator('#page-info').innerText(), 'Page 1 of 1 · 1 entry');
    await signOut();
  });

  test('a search longer than the server takes cannot be typed: the list never shows an earlier search under it', async () => {
    const key = await accountWithPassword('long-search');
    await api(server.url, 'POST', '/api/v1/store', key, { messages: [{ role: 'user', content: 'findable' }], answer: 'Found.' });
    await signIn('long-search');
    await page.click('button[data-tab=entries]');
    await page.fill('#search', 'findable');
    await page.press('#search', 'Enter');
    await page.locator('#page-info', { hasText: '1 entr' }).waitFor();
    await page.fill('#search', 'y'.repeat(250));
    await page.press('#search', 'Enter');
    await page.locator('#entries-table td', { hasText: 'No entries match this search.' }).waitFor();
    assert.equal((await page.inputValue('#search')).length, 200);
    await signOut();
  });

  test('a session that ended while the page was open: the sign-in form says so, and nothing says "signed out" as an error', async () => {
    await signedInAs('session-ended');
    await page.click('button[data-tab=keys]');
    await page.fill('#key-name', 'after the end');
    const pw = await runCli(['accounts', 'set-password', 'session-ended', '--password-stdin'], env, 'correct horse battery\n');
    assert.equal(pw.code, 0, pw.stderr);
    await page.click('#generate-key');
    await page.locator('#login-error', { hasText: 'Your session has ended: sign in again.' }).waitFor();
    assert.equal(await page.locator('#toast').isVisible(), false);
    // Signed in again, the page is back where it was, without the message.
    await page.fill('#login-password', 'correct horse battery');
    await page.click('#login-form button[type=submit]');
    await page.locator('#tab-keys').waitFor();
    await signOut();
    assert.equal(await page.locator('#login-error').isVisible(), false);
  });

  test('a page opened while the server cannot answer (503) says why, not only a sign-in form', async () => {
    const fresh = await browser.newPage();
    try {
      await fresh.route('**/dashboard/api/me', (route) =>
        route.fulfill({
          status: 503,
          contentType: 'application/json',
          body: JSON.stringify({
            error: { code: 'SERVICE_UNAVAILABLE', message: 'A dependency of Reprise is unavailable; retry shortly' },
          }),
        }),
      );
      await fresh.goto(`${server.url}/dashboard`);
      await fresh.locator('#login-error', { hasText: 'A dependency of Reprise is unavailable' }).waitFor();
      await fresh.unroute('**/dashboard/api/me');
      // A first visit, no one signed in: the form alone, no error.
      await fresh.goto(`${server.url}/dashboard`);
      await fresh.locator('#login-form').waitFor();
      assert.equal(await fresh.locator('#login-error').isVisible(), false);
    } finally {
      await fresh.close();
    }
  });

  test('the page loads with no error in the console but the 401 that says no one is signed in yet', async () => {
    const fresh = await browser.newPage();
    const errors: string[] = [];
    fresh.on('console', (m) => {
      if (m.type() === 'error' && !m.location().url.endsWith('/dashboard/api/me')) errors.push(`${m.text()} ${m.location().url}`);
    });
    fresh.on('pageerror', (e) => errors.push(e.message));
    try {
      await fresh.goto(`${server.url}/dashboard`);
      await fresh.fill('#login-account', 'acme');
      await fresh.fill('#login-password', 'correct horse battery');
      await fresh.click('#login-form button[type=submit]');
      await fresh.locator('#chart-requests canvas, #chart-requests .empty').first().waitFor();
      await fresh.locator('#top-entries tbody tr').first().waitFor();
      assert.deepEqual(errors, []);
    } finally {
      await fresh.close();
    }
  });

  test('deleting the only entry of the last page shows the page before it, not "Nothing cached yet"', async () => {
    const key = await accountWithPassword('last-page');
    for (let i = 0; i < 21; i++) {
      await api(server.url, 'POST', '/api/v1/store', key, { messages: [{ role: 'user', content: `entry ${i}` }], answer: `answer ${i}` });
    }
    await signIn('last-page');
    await page.click('button[data-tab=entries]');
    await page.locator('#page-info', { hasText: 'Page 1 of 2' }).waitFor();
    await page.click('#next');
    await page.locator('#page-info', { hasText: 'Page 2 of 2' }).waitFor();
    await page.locator('#entries-table tr.clickable').click();
    await page.click('#delete-entry');
    await page.locator('#page-info', { hasText: 'Page 1 of 1 · 20 entries' }).waitFor();
    assert.equal(await page.locator('#entries-table tr.clickable').count(), 20);
    await signOut();
  });

  test('the savings chart of large amounts keeps its labels whole, not cut at its left edge', async () => {
    const key = await accountWithPassword('large-savings');
    const messages = [{ role: 'user', content: 'A very long report' }];
    await api(server.url, 'POST', '/api/v1/store', key, { messages, answer: 'Done.', model: 'o1-pro', tokens_used: 90_000_000 });
    await api(server.url, 'POST', '/api/v1/check', key, { messages });
    await signIn('large-savings');
    const canvas = page.locator('#chart-savings canvas');
    await canvas.waitFor();
    // The labels are drawn on the canvas: a label wider than the axis's room is drawn from before
    // its left edge, and what is left of it reaches the edge.
    const inked = await canvas.evaluate((c: HTMLCanvasElement) => {
      const { data, height } = (c.getContext('2d') as CanvasRenderingContext2D).getImageData(0, 0, 3, c.height);
      let n = 0;
      for (let i = 3; i < data.length; i += 4) if ((data[i] as number) > 0) n++;
      return { n, height };
    });
    assert.equal(inked.n, 0, 'no label reaches the left edge of the chart');
    await page.locator('#chart-savings').screenshot({ path: path.join(ARTIFACTS, 'dashboard-large-savings.png') });
    await signOut();
  });

  test("tiny savings are shown with their first figures, in the card and in the chart's table, not as $0.0000", async () => {
    const key = await accountWithPassword('tiny-savings');
    const messages = [{ role: 'user', content: 'A short answer of a cheap model' }];
    // 50 tokens of gpt-4o-mini ($0.60 per million): $0.00003 saved by the hit.
    await api(server.url, 'POST', '/api/v1/store', key, { messages, answer: 'Short.', model: 'gpt-4o-mini', tokens_used: 50 });
    assert.equal((await api(server.url, 'POST', '/api/v1/check', key, { messages })).json.cache_type, 'exact');
    await signIn('tiny-savings');
    const card = page.locator('.stat', { has: page.locator('.label', { hasText: 'Estimated savings' }) });
    await card.locator('.value', { hasText: '$' }).waitFor();
    assert.equal(await card.locator('.value').innerText(), '$0.00003');
    const table = page.getByRole('table', { name: 'Estimated savings by hour' });
    await table.waitFor({ state: 'attached' });
    // The hour of the hit (an hour may have turned since), and every other hour at nothing saved.
    const cells = await table.evaluate((t) => [...t.querySelectorAll('tbody td')].map((c) => c.textContent));
    assert.deepEqual(
      cells.filter((c) => c !== '$0.00'),
      ['$0.00003'],
    );
    await table.getByText('Last 24 hours: $0.00003 saved.').waitFor({ state: 'attached' });
    await signOut();
  });

  test('a large savings figure stays inside its card', async () => {
    const key = await accountWithPassword('large-savings-figure');
    const messages = [{ role: 'user', content: 'Another very long report' }];
    await api(server.url, 'POST', '/api/v1/store', key, { messages, answer: 'Done.', model: 'o1-pro', tokens_used: 90_000_000 });
    for (let i = 0; i < 30; i++) await api(server.url, 'POST', '/api/v1/check', key, { messages });
    await signIn('large-savings-figure');
    const card = page.locator('.stat', { has: page.locator('.label', { hasText: 'Estimated savings' }) });
    await card.locator('.value', { hasText: '$1,620,000.00' }).waitFor();
    const [inner, outer] = [await card.locator('.value').boundingBox(), await card.boundingBox()];
    assert.ok(inner && outer && inner.x + inner.width <= outer.x + outer.width, 'the figure ends inside the card');
    const text = await card.locator('.value').evaluate((el) => el.scrollWidth <= el.clientWidth);
    assert.equal(text, true, 'the figure is not wider than its box');
    await signOut();
  });

  test('pages asked for one after the other are shown in that order, however their answers come', async () => {
    const key = await accountWithPassword('pages-in-order');
    for (let i = 0; i < 41; i++) {
      await api(server.url, 'POST', '/api/v1/store', key, { messages: [{ role: 'user', content: `entry ${i}` }], answer: `answer ${i}` });
    }
    await signIn('pages-in-order');
    await page.click('button[data-tab=entries]');
    await page.locator('#page-info', { hasText: 'Page 1 of 3' }).waitFor();
    // The answer for page 2 is held back until page 3 is shown.
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    let asked: () => void = () => {};
    const page2Asked = new Promise<void>((resolve) => (asked = resolve));
    await page.route('**/dashboard/api/entries?page=2&*', async (route) => {
      asked();
      await held;
      await route.continue();
    });
    await page.click('#next');
    await page2Asked;
    await page.click('#next');
    await page.locator('#page-info', { hasText: 'Page 3 of 3' }).waitFor();
    const answered = page.waitForEvent('requestfinished', (r) => r.url().includes('/dashboard/api/entries?page=2&'));
    release();
    await answered;
    await page.unroute('**/dashboard/api/entries?page=2&*');
    // A request of the page's own after it, answered: the late answer has been read by then.
    await page.evaluate(async () => (await fetch('/dashboard/api/me')).json());
    assert.equal(await page.locator('#page-info').innerText(), 'Page 3 of 3 · 41 entries');
    assert.equal(await page.locator('#next').isDisabled(), true);
    await page.click('#prev');
    await page.locator('#page-info', { hasText: 'Page 2 of 3' }).waitFor();
    await signOut();
  });

  test('by day, a browser west of Greenwich sees the requests of today on its date (UTC days), not on the day before', async () => {
    const key = await accountWithPassword('west-of-greenwich');
    await api(server.url, 'POST', '/api/v1/check', key, { messages: [{ role: 'user', content: 'Asked today' }] });
    const context = await browser.newContext({ viewport: { width: 1360, height: 900 }, timezoneId: 'America/Los_Angeles' });
    try {
      const west = await context.newPage();
      await west.goto(`${server.url}/dashboard`);
      await west.fill('#login-account', 'west-of-greenwich');
      await west.fill('#login-password', 'correct horse battery');
      await west.click('#login-form button[type=submit]');
      await west.locator('#chart-requests canvas').waitFor();
      await west.click('#granularity button[data-g=day]');
      await west.locator('#granularity button[data-g=day][aria-pressed=true]').waitFor();
      await west.locator('#chart-requests canvas').waitFor();
      // The cursor on the last day: the legend names its date.
      const over = west.locator('#chart-requests .u-over');
      const box = await over.boundingBox();
      assert.ok(box);
      await west.mouse.move(box.x + box.width - 1, box.y + box.height / 2);
      const time = await west.locator('#chart-requests .u-legend .u-series').first().locator('.u-value').innerText();
      assert.equal(time, new Date().toISOString().slice(0, 10), 'the UTC day');
      assert.equal(await west.locator('#chart-requests .u-legend .u-series').nth(1).locator('.u-value').innerText(), '1');
    } finally {
      await context.close();
    }
  });

  test('a window made narrower (a phone turned upright) redraws the charts to fit it', async () => {
    const key = await accountWithPassword('turned-upright');
    await api(server.url, 'POST', '/api/v1/check', key, { messages: [{ role: 'user', content: 'Something to chart' }] });
    const tab = await browser.newPage({ viewport: { width: 1360, height: 900 } });
    try {
      await tab.goto(`${server.url}/dashboard`);
      await tab.fill('#login-account', 'turned-upright');
      await tab.fill('#login-password', 'correct horse battery');
      await tab.click('#login-form button[type=submit]');
      await tab.locator('#chart-requests canvas').waitFor();
      await tab.setViewportSize({ width: 400, height: 800 });
      await tab.waitForFunction(() => document.documentElement.scrollWidth === 400);
      for (const chart of ['#chart-requests', '#chart-rate', '#chart-savings']) {
        const [canvas, card] = [await tab.locator(`${chart} canvas`).boundingBox(), await tab.locator(chart).boundingBox()];
        assert.ok(canvas && card && canvas.x + canvas.width <= card.x + card.width + 1, `${chart} fits its card`);
      }
    } finally {
      await tab.close();
    }
  });

  test('a threshold of three decimals (0.875) can be saved, as the API takes it', async () => {
    await signedInAs('fine-threshold');
    await page.click('button[data-tab=settings]');
    await page.fill('#threshold', '0.875');
    await page.click('#settings-form button[type=submit]');
    await page.locator('#settings-saved').waitFor();
    const me = await page.evaluate(async () => (await fetch('/dashboard/api/me')).json());
    assert.equal(me.account.default_threshold, 0.875);
    await signOut();
  });

  test('"Saved" is said to a screen reader, and goes once a setting is changed again', async () => {
    await signedInAs('saved-or-not');
    await page.click('button[data-tab=settings]');
    await page.fill('#ttl', '3600');
    await page.click('#settings-form button[type=submit]');
    await page.getByRole('status').getByText('Saved').waitFor();
    await page.fill('#ttl', '7200');
    assert.equal(await page.locator('#settings-saved').isVisible(), false, 'not saved yet');
    await signOut();
  });

  test('after a sign-out, the next account signed in on the same page sees nothing of the one before', async () => {
    const firstKey = await accountWithPassword('first-at-the-desk');
    await accountWithPassword('next-at-the-desk');
    await api(server.url, 'POST', '/api/v1/store', firstKey, {
      messages: [{ role: 'user', content: 'A question of the first account' }],
      answer: 'An answer of the first account',
    });
    await signIn('first-at-the-desk');
    await page.click('button[data-tab=keys]');
    await page.fill('#key-name', 'first account key');
    await page.click('#generate-key');
    await page.locator('#keys-table td', { hasText: 'first account key' }).waitFor();
    const secret = await page.locator('#new-key-value').innerText();
    assert.match(secret, /^rp_live_/);
    await page.click('button[data-tab=entries]');
    await page.locator('#entries-table tr.clickable', { hasText: 'A question of the first account' }).click();
    await page.locator('#entry .msg.answer').waitFor();
    await signOut();

    // The next person, at the same browser, without a reload.
    await page.fill('#login-account', 'next-at-the-desk');
    await page.fill('#login-password', 'correct horse battery');
    await page.click('#login-form button[type=submit]');
    await page.locator('#entries-table td', { hasText: 'Nothing cached yet' }).waitFor();
    await page.click('button[data-tab=keys]');
    await page.locator('#keys-table button.revoke').waitFor();
    const html = await page.content();
    assert.ok(!html.includes(secret), "the first account's new key is not in the page");
    assert.ok(!html.includes('An answer of the first account'), "the first account's entry is not in the page");
    assert.equal(await page.locator('#new-key').isVisible(), false);
    await signOut();
  });

  test('a tab that finds another account signed in (in another tab) shows that account, and nothing of its own', async () => {
    await accountWithPassword('tab-owner');
    await accountWithPassword('tab-taker');
    const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    try {
      const [mine, theirs] = [await context.newPage(), await context.newPage()];
      await signIn('tab-owner', mine);
      await mine.click('button[data-tab=keys]');
      await mine.fill('#key-name', 'owner key');
      await mine.click('#generate-key');
      await mine.locator('#keys-table td', { hasText: 'owner key' }).waitFor();
      const secret = await mine.locator('#new-key-value').innerText();
      // The other tab: sign-out, and another account in.
      await theirs.goto(`${server.url}/dashboard`);
      await theirs.click('#logout');
      await signIn('tab-taker', theirs);

      await mine.fill('#key-name', 'not for the taker');
      await mine.click('#generate-key');
      await mine.locator('#toast', { hasText: 'Signed in as tab-taker in another tab: nothing was changed.' }).waitFor();
      assert.equal(await mine.locator('#who-name').innerText(), 'tab-taker');
      assert.ok(!(await mine.content()).includes(secret), "the owner's new key is not in the page");
    } finally {
      await context.close();
    }
  });

  test("a tab still showing one account, after another signed in in another tab, never shows the other's data under its name", async () => {
    const ownerKey = await accountWithPassword('shown-owner');
    const takerKey = await accountWithPassword('shown-taker');
    await api(server.url, 'POST', '/api/v1/store', ownerKey, {
      messages: [{ role: 'user', content: 'A question of the owner' }],
      answer: 'Mine.',
    });
    await api(server.url, 'POST', '/api/v1/store', takerKey, {
      messages: [{ role: 'user', content: 'A question of the taker' }],
      answer: 'Theirs.',
    });
    const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    try {
      const [mine, theirs] = [await context.newPage(), await context.newPage()];
      await signIn('shown-owner', mine);
      await mine.click('button[data-tab=entries]');
      await mine.locator('#entries-table tr.clickable', { hasText: 'A question of the owner' }).waitFor();
      // Every change to the page from here on is looked at: the taker's entry under the owner's name is noted.
      await mine.evaluate(() => {
        const seen: string[] = [];
        (window as unknown as { mixed: string[] }).mixed = seen;
        new MutationObserver(() => {
          const who = document.querySelector('#who-name')?.textContent;
          if (who === 'shown-owner' && document.querySelector('#app')?.textContent?.includes('of the taker')) seen.push(who);
        }).observe(document.body, { subtree: true, childList: true, characterData: true });
      });
      await theirs.goto(`${server.url}/dashboard`);
      await theirs.click('#logout');
      await signIn('shown-taker', theirs);

      // Only reads: to the Usage tab and back to the Entries tab.
      await mine.click('button[data-tab=usage]');
      await mine.click('button[data-tab=entries]');
      await mine.locator('#who-name', { hasText: 'shown-taker' }).waitFor();
      await mine.locator('#toast', { hasText: 'Signed in as shown-taker in another tab' }).waitFor();
      await mine.locator('#entries-table tr.clickable', { hasText: 'A question of the taker' }).waitFor();
      assert.deepEqual(await mine.evaluate(() => (window as unknown as { mixed: string[] }).mixed), []);
      assert.equal(await mine.locator('#entries-table tr.clickable', { hasText: 'A question of the owner' }).count(), 0);
    } finally {
      await context.close();
    }
  });

  test('coming back to a tab after another account signed in elsewhere shows that account at once, without a click', async () => {
    await accountWithPassword('back-owner');
    await accountWithPassword('back-taker');
    const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    try {
      const [mine, theirs] = [await context.newPage(), await context.newPage()];
      await mine.goto(`${server.url}/dashboard`);
      await mine.fill('#login-account', 'back-owner');
      await mine.fill('#login-password', 'correct horse battery');
      await mine.click('#login-form button[type=submit]');
      await mine.locator('#stats .stat').first().waitFor();
      await theirs.goto(`${server.url}/dashboard`);
      await theirs.click('#logout');
      await theirs.fill('#login-account', 'back-taker');
      await theirs.fill('#login-password', 'correct horse battery');
      await theirs.click('#login-form button[type=submit]');
      await theirs.locator('#tab-usage').waitFor();
      // The first tab is shown again (headless, both are always visible: the browser's event is sent).
      await mine.evaluate(() => document.dispatchEvent(new Event('visibilitychange')));
      await mine.locator('#who-name', { hasText: 'back-taker' }).waitFor();
      await mine.locator('#toast', { hasText: 'Signed in as back-taker in another tab: this page now shows back-taker.' }).waitFor();
      // Signed out there: the first tab says the session has ended.
      await theirs.click('#logout');
      await theirs.locator('#login-form').waitFor();
      await mine.evaluate(() => document.dispatchEvent(new Event('visibilitychange')));
      await mine.locator('#login-error', { hasText: 'Your session has ended: sign in again.' }).waitFor();
    } finally {
      await context.close();
    }
  });

  test('each chart has a text equivalent for screen readers, with its figures', async () => {
    const key = await accountWithPassword('charted');
    const asked = [{ role: 'user', content: 'Charted question' }];
    await api(server.url, 'POST', '/api/v1/check', key, { messages: asked });
    await api(server.url, 'POST', '/api/v1/store', key, { messages: asked, answer: 'Charted.', model: 'gpt-4o', tokens_used: 1000 });
    await api(server.url, 'POST', '/api/v1/check', key, { messages: asked });
    await api(server.url, 'POST', '/api/v1/check', key, { messages: [{ role: 'user', content: 'Another question' }] });
    await signIn('charted');
    const usage = (await page.evaluate(async () => (await fetch('/dashboard/api/usage?granularity=hour')).json())) as {
      series: { total_requests: number; hit_rate_percentage: number; estimated_cost_savings_usd: number }[];
    };
    const point = usage.series.find((p) => p.total_requests > 0);
    assert.ok(point && point.total_requests === 3);
    const usd = point.estimated_cost_savings_usd.toLocaleString('en-US', {
      style: 'currency',
      currency: 'USD',
      minimumFractionDigits: 2,
      maximumFractionDigits: 4,
    });
    // The rows of a chart's table that had requests (an hour may have turned since the checks).
    const rows = async (name: string) => {
      const table = page.getByRole('table', { name });
      await table.waitFor({ state: 'attached' });
      assert.equal(await table.getByRole('row').count(), 25, `${name}: a header and 24 hours`);
      const cells = await table.evaluate((t) =>
        [...t.querySelectorAll('tbody tr')].map((tr) => [...tr.children].map((c) => c.textContent)),
      );
      return cells.filter((r) => r.slice(1).some((c) => c !== '0' && c !== '0%' && c !== '$0.00')).map((r) => r.slice(1));
    };
    assert.deepEqual(await rows('Requests and hits by hour'), [['3', '1', '0']]);
    assert.deepEqual(await rows('Hit rate by hour'), [[`${point.hit_rate_percentage}%`]]);
    assert.deepEqual(await rows('Estimated savings by hour'), [[usd]]);
    // A summary said first.
    await page
      .getByRole('table', { name: 'Requests and hits by hour' })
      .getByText('Last 24 hours: 3 requests, 1 exact hit, 0 semantic hits')
      .waitFor({ state: 'attached' });
    // By day, the days.
    await page.click('#granularity button[data-g=day]');
    const byDay = page.getByRole('table', { name: 'Requests and hits by UTC day' });
    await byDay.waitFor({ state: 'attached' });
    assert.equal(await byDay.getByRole('row').count(), 15);
    assert.equal(await byDay.locator('tbody tr').last().locator('th').innerText(), new Date().toISOString().slice(0, 10));
    // The canvas itself is hidden from screen readers: the table says what it shows.
    assert.equal(await page.locator('#chart-requests .uplot').getAttribute('aria-hidden'), 'true');
    await signOut();
  });

  test('the tabs are a tab list as screen readers and the keyboard know it: arrow keys move between them, each panel is named by its tab', async () => {
    await signedInAs('arrow-keys');
    await page.getByRole('tab', { name: 'Usage' }).focus();
    await page.keyboard.press('ArrowRight');
    await page.getByRole('tabpanel', { name: 'API Keys' }).waitFor();
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'API Keys');
    assert.equal(await page.getByRole('tab', { name: 'API Keys', selected: true }).count(), 1);
    await page.keyboard.press('ArrowLeft');
    await page.getByRole('tabpanel', { name: 'Usage' }).waitFor();
    await page.keyboard.press('ArrowLeft');
    await page.getByRole('tabpanel', { name: 'Settings' }).waitFor();
    // One stop for the tab list in the Tab order: the tab selected.
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'logout');
    await signOut();
  });
});
