// Reprise dashboard: plain browser JavaScript, no build step. Talks to /dashboard/api.
(() => {
  'use strict';
  const $ = (sel) => document.querySelector(sel);
  const state = { csrf: null, account: null, tab: 'usage', granularity: 'hour', page: 1, perPage: 20, q: '', selected: null, charts: [] };

  const fmtInt = (n) => Number(n).toLocaleString('en-US');
  const plural = (n, one, many) => `${fmtInt(n)} ${n === 1 ? one : many}`;
  // Bytes in binary units, as the plans' limits are given (100 MiB).
  const fmtBytes = (n) => {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) ((n /= 1024), i++);
    return `${i === 0 ? n : Number(n.toFixed(n < 10 ? 1 : 0))}\u00a0${units[i]}`;
  };
  const fmtUsdShort = new Intl.NumberFormat('en-US', {
    style: 'currency',
    currency: 'USD',
    notation: 'compact',
    minimumFractionDigits: 0,
    maximumFractionDigits: 2,
  });
  const fmtDate = (iso) => (iso ? new Date(iso).toLocaleString('en-US', { dateStyle: 'medium', timeStyle: 'short' }) : '—');
  // The list of entries carries the start of a question (its `_preview`) and its whole length.
  const preview = (e, field) => `${e[`${field}_preview`]}${e[`${field}_length`] > e[`${field}_preview`].length ? '…' : ''}`;
  // As the server writes its figures (formatUsd in src/cache/pricing.ts): under a cent, the first
  // two figures however far they are ($0.00003, not $0.00).
  const fmtUsd = (n) =>
    n.toLocaleString('en-US', {
      style: 'currency',
      currency: 'USD',
      minimumFractionDigits: 2,
      maximumFractionDigits: n > 0 && n < 0.01 ? Math.max(4, 1 - Math.floor(Math.log10(n))) : 4,
    });
  const esc = (s) =>
    String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);

  function toast(text) {
    const t = $('#toast');
    t.textContent = text;
    t.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => (t.hidden = true), 2600);
  }

  // What api() throws when the session has ended: the sign-in form says so, and nothing else need.
  const SIGNED_OUT = 'signed out';
  // What it throws for an answer meant for another account than the one shown: the page has
  // switched to that account, and said so.
  const SWITCHED = 'switched';
  const report = (e) => e.message !== SIGNED_OUT && e.message !== SWITCHED && toast(e.message);

  // Another account signed in at this browser (in another tab): the page shows that account, with
  // nothing of the one it showed, and says so. One switch for the answers that all find it.
  let switching = null;
  function switchAccount(change) {
    switching ??= (async () => {
      try {
        const me = await api('/me', { anyAccount: true });
        forgetAccount();
        signedIn(me);
        toast(
          `Signed in as ${me.account.name} in another tab: ${change ? 'nothing was changed' : `this page now shows ${me.account.name}`}.`,
        );
      } finally {
        switching = null;
      }
    })();
    return switching;
  }

  async function api(path, options = {}, again = false) {
    const headers = { ...(options.body ? { 'Content-Type': 'application/json' } : {}) };
    if (options.method && options.method !== 'GET' && state.csrf) headers['X-CSRF-Token'] = state.csrf;
    let res;
    const { anyAccount, ...init } = options;
    const shown = state.account?.id;
    try {
      res = await fetch(`/dashboard/api${path}`, {
        credentials: 'same-origin',
        ...init,
        headers,
        body: options.body ? JSON.stringify(options.body) : undefined,
      });
    } catch {
      // No answer at all (the server stopped, the network down): the browser's own message is "Failed to fetch".
      throw new Error('Cannot reach the server: check that Reprise is running, then try again.');
    }
    const body = await res.json().catch(() => ({}));
    // An answer for the session of another account than the one shown (signed in since in another
    // tab) is not shown under this one's name: no list, figure or error of it.
    const owner = res.headers.get('X-Reprise-Account');
    if (owner && state.account && owner !== state.account.id && !anyAccount && path !== '/login') {
      // Asked for an account the page no longer shows (signed out and in here meanwhile): dropped.
      if (shown === state.account.id) await switchAccount(options.method && options.method !== 'GET');
      throw new Error(SWITCHED);
    }
    if (res.status === 401 && path !== '/login') {
      // Signed in until now (not a first visit): the session ended, expired or was signed out.
      showLogin(state.csrf ? 'Your session has ended: sign in again.' : '');
      throw new Error(SIGNED_OUT);
    }
    if (res.status === 403 && body?.error?.code === 'FORBIDDEN' && !again) {
      // Signed in again in another tab: the browser's cookie is that session's, whose CSRF token
      // this page does not have. Take it, for the account this page shows only.
      const me = await api('/me', { anyAccount: true });
      if (me.account.id !== state.account?.id) {
        await switchAccount(true);
        throw new Error(SWITCHED);
      }
      state.csrf = me.csrf_token;
      return api(path, options, true);
    }
    if (!res.ok) throw new Error(body?.error?.message || `Request failed (${res.status})`);
    return body;
  }

  function showLogin(message = '') {
    state.csrf = null;
    forgetAccount();
    if (message) {
      $('#login-error').textContent = message;
      $('#login-error').hidden = false;
    }
    $('#app').hidden = true;
    $('#login').hidden = false;
    $('#login-account').focus();
  }

  // Signed out, the page keeps nothing of the account: the next one to sign in at this browser,
  // without a reload, would see its new key's secret, the entry it had open, its figures.
  function forgetAccount() {
    state.account = null;
    Object.assign(state, { page: 1, q: '', selected: null });
    // Answers on their way for it are not shown either.
    for (const k of Object.keys(latest)) latest[k]++;
    $('#search').value = '';
    $('#new-key').hidden = true;
    $('#new-key-value').textContent = '';
    $('#entry').hidden = true;
    $('#entry').textContent = '';
    $('#stats').textContent = '';
    for (const c of state.charts) c.destroy();
    state.charts = [];
    for (const t of ['#keys-table', '#entries-table', '#top-entries', '#slow-entries']) $(`${t} tbody`).textContent = '';
    $('#page-info').textContent = '';
    $('#threshold').value = '';
    $('#ttl').value = '';
  }

  function signedIn(me) {
    $('#login-error').hidden = true;
    state.csrf = me.csrf_token;
    state.account = me.account;
    $('#who-name').textContent = me.account.name;
    $('#who-plan').textContent = me.account.plan;
    $('#login').hidden = true;
    $('#app').hidden = false;
    const wanted = location.hash.replace('#', '');
    switchTab(['usage', 'keys', 'entries', 'settings'].includes(wanted) ? wanted : 'usage');
  }

  function switchTab(tab) {
    state.tab = tab;
    if (location.hash !== `#${tab}`) history.replaceState(null, '', `#${tab}`);
    for (const b of document.querySelectorAll('.tab')) {
      b.setAttribute('aria-selected', String(b.dataset.tab === tab));
      // The tab list is one stop in the Tab order, its selected tab; the arrow keys move in it.
      b.tabIndex = b.dataset.tab === tab ? 0 : -1;
    }
    for (const p of document.querySelectorAll('.panel')) p.hidden = p.id !== `tab-${tab}`;
    ({ usage: loadUsage, keys: loadKeys, entries: loadEntries, settings: loadSettings })[tab]().catch(report);
  }

  // ---- Usage ----
  function stat(label, value, sub, highlight) {
    return `<div class="stat${highlight ? ' highlight' : ''}"><div class="label">${esc(label)}</div><div class="value${String(value).length > 9 ? ' long' : ''}">${esc(value)}</div>${sub ? `<div class="sub">${esc(sub)}</div>` : ''}</div>`;
  }

  // What the account keeps, against its plan's limits (null: none). At a limit, stores are refused
  // until entries are deleted.
  function storageStat(s) {
    const of = (limit, fmt) => (limit === null ? '' : ` of ${fmt(limit)}`);
    const full =
      (s.max_entries !== null && s.entries >= s.max_entries) || (s.max_stored_bytes !== null && s.stored_bytes >= s.max_stored_bytes);
    const sub = `${s.entries === 1 ? 'entry' : 'entries'}${of(s.max_entries, fmtInt)}, ${fmtBytes(s.stored_bytes)}${of(s.max_stored_bytes, fmtBytes)}`;
    return stat(full ? 'Storage (full)' : 'Storage', fmtInt(s.entries), sub);
  }

  // `opts.quiet`: no requests in the window. A hit rate of 0% or no savings is still charted
  // when there were requests.
  function chart(el, series, data, opts = {}) {
    el.innerHTML = '';
    if (opts.quiet) {
      el.innerHTML = '<div class="empty">No requests yet in this period.<br>Checks and stores through the API appear here.</div>';
      return;
    }
    // As wide as its card, on a phone too.
    const width = Math.max(200, el.clientWidth || 520);
    const plot = new uPlot(
      {
        width,
        height: 220,
        // Days are UTC days (as the API counts them), and shown so wherever the browser is: in
        // its own time, one in Los Angeles saw today's requests on yesterday's afternoon.
        series: [state.granularity === 'day' ? { value: '{YYYY}-{MM}-{DD}' } : {}, ...series],
        ...(state.granularity === 'day' ? { tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC') } : {}),
        axes: [
          { stroke: '#6b7385', grid: { stroke: '#eef0f6' } },
          { stroke: '#6b7385', grid: { stroke: '#eef0f6' }, values: opts.values, size: 72 },
        ],
        scales: { x: { time: true }, y: opts.range ? { range: opts.range } : {} },
        legend: { show: true },
        cursor: { drag: { x: false, y: false } },
      },
      data,
      el,
    );
    state.charts.push(plot);
    // The canvas says nothing to a screen reader: a table, not shown, says what it draws.
    plot.root.setAttribute('aria-hidden', 'true');
    if (opts.text) el.append(textTable(opts.text));
  }

  // A chart's text equivalent: its title and a summary as the caption, a row per period.
  function textTable({ caption, summary, columns, rows }) {
    // In a box of one pixel: a table is never narrower than its text, whatever its width.
    const box = document.createElement('div');
    box.className = 'visually-hidden';
    box.innerHTML = `<table><caption>${esc(caption)}. ${esc(summary)}</caption>
      <thead><tr>${columns.map((c) => `<th scope="col">${esc(c)}</th>`).join('')}</tr></thead>
      <tbody>${rows.map(([period, ...cells]) => `<tr><th scope="row">${esc(period)}</th>${cells.map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`).join('')}</tbody></table>`;
    return box;
  }

  // A chart takes its card's width as it is drawn; the window made narrower or wider (a phone
  // turned), it is given the new width.
  const fit = new ResizeObserver((changes) => {
    for (const { target } of changes) {
      const plot = state.charts.find((p) => p.root.parentElement === target);
      if (plot && target.clientWidth > 0) plot.setSize({ width: Math.max(200, target.clientWidth), height: 220 });
    }
  });
  for (const el of document.querySelectorAll('.chart')) fit.observe(el);

  // Answers may come in another order than their requests: only the last one asked of each kind
  // is shown, not one that came late over it (page 2 over page 3, the hours over the days).
  const latest = { usage: 0, entries: 0, entry: 0 };

  async function loadUsage() {
    const asked = ++latest.usage;
    const u = await api(`/usage?granularity=${state.granularity}`);
    if (asked !== latest.usage) return;
    const saved = u.performance.estimated_cost_savings;
    $('#stats').innerHTML = [
      stat('Requests', fmtInt(u.total_requests), plural(u.cache_misses, 'miss', 'misses')),
      stat('Hit rate', `${u.hit_rate_percentage}%`, plural(u.cache_hits, 'hit', 'hits'), u.hit_rate_percentage > 0),
      stat('Exact hits', fmtInt(u.exact_hits), 'fast responses'),
      stat('Semantic hits', fmtInt(u.semantic_hits), 'smart responses'),
      stat('Avg lookup', `${u.average_lookup_time_ms} ms`, 'server side'),
      stat('Estimated savings', saved, `${fmtInt(u.tokens_saved)} tokens not generated`, true),
      storageStat(u.storage),
    ].join('');
    for (const c of state.charts) c.destroy();
    state.charts = [];
    // A fixed window (the last 24 hours, or 14 days), periods without requests shown as zero.
    const step = state.granularity === 'hour' ? 3600 : 86400;
    const count = state.granularity === 'hour' ? 24 : 14;
    const nowStart = Math.floor(Date.now() / 1000 / step) * step;
    const byStart = new Map(u.series.map((p) => [Date.parse(p.start) / 1000, p]));
    const xs = Array.from({ length: count }, (_, i) => nowStart - (count - 1 - i) * step);
    const zero = { total_requests: 0, exact_hits: 0, semantic_hits: 0, hit_rate_percentage: 0, estimated_cost_savings_usd: 0 };
    const series = xs.map((x) => byStart.get(x) ?? zero);
    u.series = series;
    const quiet = series.every((p) => p.total_requests === 0);
    // The periods as the charts' axes name them: hours in the browser's time, days as UTC dates.
    const byHour = state.granularity === 'hour';
    const periodName = (x) =>
      byHour
        ? new Date(x * 1000).toLocaleString('en-US', {
            month: 'short',
            day: 'numeric',
            hour: '2-digit',
            minute: '2-digit',
            hourCycle: 'h23',
          })
        : new Date(x * 1000).toISOString().slice(0, 10);
    const by = byHour ? 'by hour' : 'by UTC day';
    const span = byHour ? 'Last 24 hours' : 'Last 14 days';
    const column = byHour ? 'Hour' : 'Day (UTC)';
    const sum = (f) => series.reduce((n, p) => n + f(p), 0);
    const [requests, exact, semantic] = [sum((p) => p.total_requests), sum((p) => p.exact_hits), sum((p) => p.semantic_hits)];
    const rate = requests ? Math.round(((exact + semantic) / requests) * 10000) / 100 : 0;
    chart(
      $('#chart-requests'),
      [
        { label: 'Requests', stroke: '#4f46e5', width: 2, fill: 'rgba(79,70,229,.08)' },
        { label: 'Exact hits', stroke: '#0f9f6e', width: 2 },
        { label: 'Semantic hits', stroke: '#f59e0b', width: 2 },
      ],
      [xs, u.series.map((p) => p.total_requests), u.series.map((p) => p.exact_hits), u.series.map((p) => p.semantic_hits)],
      {
        quiet,
        text: {
          caption: `Requests and hits ${by}`,
          summary: `${span}: ${plural(requests, 'request', 'requests')}, ${plural(exact, 'exact hit', 'exact hits')}, ${plural(semantic, 'semantic hit', 'semantic hits')}.`,
          columns: [column, 'Requests', 'Exact hits', 'Semantic hits'],
          rows: series.map((p, i) => [periodName(xs[i]), fmtInt(p.total_requests), fmtInt(p.exact_hits), fmtInt(p.semantic_hits)]),
        },
      },
    );
    chart(
      $('#chart-rate'),
      [{ label: 'Hit rate %', stroke: '#0f9f6e', width: 2, fill: 'rgba(15,159,110,.08)' }],
      [xs, u.series.map((p) => p.hit_rate_percentage)],
      {
        quiet,
        text: {
          caption: `Hit rate ${by}`,
          summary: `${span}: ${rate}% of requests were hits.`,
          columns: [column, 'Hit rate'],
          rows: series.map((p, i) => [periodName(xs[i]), `${p.hit_rate_percentage}%`]),
        },
        range: [0, 100],
        values: (_, ticks) => ticks.map((t) => `${t}%`),
      },
    );
    chart(
      $('#chart-savings'),
      [{ label: 'Savings (USD)', stroke: '#8b5cf6', width: 2, fill: 'rgba(139,92,246,.08)' }],
      [xs, u.series.map((p) => p.estimated_cost_savings_usd)],
      {
        quiet,
        text: {
          caption: `Estimated savings ${by}`,
          summary: `${span}: ${fmtUsd(sum((p) => p.estimated_cost_savings_usd))} saved.`,
          columns: [column, 'Savings (USD)'],
          rows: series.map((p, i) => [periodName(xs[i]), fmtUsd(p.estimated_cost_savings_usd)]),
        },
        // From $0, and to a cent at least: nothing saved is a flat line at $0, not a scale to $100.
        range: (_, _min, max) => [0, Math.max(max, 0.01)],
        // One number of decimals for the whole axis, by its top; from $1,000 in short ($7.5K, $1.5M),
        // which the axis has room for.
        values: (u, ticks) => {
          const top = Math.max(...ticks);
          if (top >= 1000) return ticks.map((t) => fmtUsdShort.format(t));
          const digits = top < 1 ? 4 : 2;
          return ticks.map((t) => `$${t.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })}`);
        },
      },
    );
    // Entries served at least once: one never hit is not reused, however high it sorts.
    const top = (await api('/entries?order=hits&per_page=5')).data.filter((e) => e.usage_count > 0);
    if (asked !== latest.usage) return;
    $('#top-entries tbody').innerHTML = top.length
      ? top
          .map(
            (e) =>
              `<tr><td class="truncate" dir="auto" title="${esc(preview(e, 'question'))}">${esc(preview(e, 'question'))}</td><td>${esc(e.model)}</td><td class="num">${fmtInt(e.usage_count)}</td></tr>`,
          )
          .join('')
      : '<tr><td colspan="3" class="muted">No entry reused yet.</td></tr>';
    const slow = (await api('/entries?order=slowest&per_page=5')).data.filter((e) => e.average_lookup_ms !== null);
    if (asked !== latest.usage) return;
    $('#slow-entries tbody').innerHTML = slow.length
      ? slow
          .map(
            (e) =>
              `<tr><td class="truncate" dir="auto" title="${esc(preview(e, 'question'))}">${esc(preview(e, 'question'))}</td><td class="num">${fmtInt(e.usage_count)}</td><td class="num">${e.average_lookup_ms} ms</td></tr>`,
          )
          .join('')
      : '<tr><td colspan="3" class="muted">No hits served yet.</td></tr>';
  }

  // ---- Keys ----
  async function loadKeys() {
    const { data } = await api('/keys');
    $('#keys-table tbody').innerHTML = data.length
      ? data
          .map(
            (
              k,
            ) => `<tr data-id="${esc(k.id)}"><td dir="auto">${esc(k.name || 'Unnamed key')}</td><td><code>${esc(k.prefix)}…</code></td><td>${fmtDate(k.created_at)}</td><td>${k.last_used_at ? fmtDate(k.last_used_at) : '<span class="muted">never</span>'}</td>
        <td><span class="status ${k.status}">${k.status === 'active' ? 'Active' : 'Revoked'}</span></td>
        <td class="num">${k.status === 'active' ? `<button class="danger revoke" data-id="${esc(k.id)}" aria-label="Revoke ${esc(k.name || 'Unnamed key')}">Revoke</button>` : ''}</td></tr>`,
          )
          .join('')
      : '<tr><td colspan="6" class="muted">No keys yet.</td></tr>';
  }

  // ---- Entries ----
  async function loadEntries() {
    const asked = ++latest.entries;
    const r = await api(`/entries?page=${state.page}&per_page=${state.perPage}&q=${encodeURIComponent(state.q)}`);
    if (asked !== latest.entries) return;
    const p = r.pagination;
    // Past the last page (its last entry deleted, here or elsewhere): the last page there is.
    if (r.data.length === 0 && p.total > 0 && state.page > p.total_pages) {
      state.page = p.total_pages;
      return loadEntries();
    }
    $('#entries-table tbody').innerHTML = r.data.length
      ? r.data
          .map(
            (e) =>
              `<tr class="clickable${state.selected === e.id ? ' selected' : ''}" data-id="${e.id}"><td class="truncate" title="${esc(preview(e, 'question'))}"><button type="button" class="open-entry" dir="auto">${esc(preview(e, 'question'))}</button></td><td>${esc(e.model)}</td><td class="num">${fmtInt(e.usage_count)}</td><td>${fmtDate(e.created_at)}</td></tr>`,
          )
          .join('')
      : `<tr><td colspan="4" class="muted">${state.q ? 'No entries match this search.' : 'Nothing cached yet: store answers through the API.'}</td></tr>`;
    $('#page-info').textContent = p.total ? `Page ${p.page} of ${p.total_pages} · ${plural(p.total, 'entry', 'entries')}` : '0 entries';
    $('#prev').disabled = p.page <= 1;
    $('#next').disabled = p.page >= p.total_pages;
  }

  // Texts of the account's own (questions, answers, key names) are dir="auto": each is shown in
  // the direction of its first letter, so that a Hebrew or Arabic one reads right to left with its
  // punctuation at its end, not at the wrong side.
  async function showEntry(id) {
    state.selected = id;
    const asked = ++latest.entry;
    const e = await api(`/entries/${id}`);
    if (asked !== latest.entry) return;
    const msgs = e.messages
      .map((m) => `<div class="msg"><span class="role">${esc(m.role)}</span><div dir="auto">${esc(m.content)}</div></div>`)
      .join('');
    const panel = $('#entry');
    panel.innerHTML = `<h3 tabindex="-1">Entry ${e.id}</h3>
      <div class="meta"><span>Model</span><b>${esc(e.model)}</b><span>Tokens</span><b>${fmtInt(e.tokens)}</b><span>Hits</span><b>${fmtInt(e.usage_count)}</b>
      <span>Cached</span><b>${fmtDate(e.created_at)}</b><span>Last hit</span><b>${fmtDate(e.last_hit_at)}</b><span>Expires</span><b>${e.expires_at ? fmtDate(e.expires_at) : 'never'}</b>${e.namespace ? `<span>Namespace</span><b>${esc(e.namespace)}</b>` : ''}</div>
      ${msgs}<div class="msg answer"><span class="role">cached answer</span><div dir="auto">${esc(e.answer)}</div></div>
      <div><button class="danger" id="delete-entry" data-id="${e.id}">Delete entry</button></div>`;
    panel.hidden = false;
    for (const tr of document.querySelectorAll('#entries-table tbody tr')) tr.classList.toggle('selected', Number(tr.dataset.id) === id);
    // To the entry opened: read next with the keyboard or a screen reader, and in view where it
    // is below the list (a narrow window).
    panel.querySelector('h3').focus();
  }

  // ---- Settings ----
  // The form is disabled until the current settings are in it: what is typed before they arrive
  // would be overwritten, and a save made meanwhile would be shown as not saved.
  async function loadSettings() {
    const fields = document.querySelectorAll('#settings-form input, #settings-form button');
    for (const f of fields) f.disabled = true;
    $('#settings-saved').hidden = true;
    try {
      const me = await api('/me');
      $('#threshold').value = me.account.default_threshold;
      $('#ttl').value = me.account.entry_ttl_seconds;
    } finally {
      for (const f of fields) f.disabled = false;
    }
  }

  // ---- Events ----
  $('#login-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    $('#login-error').hidden = true;
    try {
      signedIn(await api('/login', { method: 'POST', body: { account: $('#login-account').value, password: $('#login-password').value } }));
      $('#login-password').value = '';
      // The form is gone, and the focus with it (to the top of the page): it goes to the heading
      // of the tab shown, where a screen reader says where it is and the next Tab goes on.
      $(`#tab-${state.tab} h1`).focus();
    } catch (e) {
      $('#login-error').textContent = e.message;
      $('#login-error').hidden = false;
    }
  });
  $('#logout').addEventListener('click', async () => {
    try {
      await api('/logout', { method: 'POST' });
    } catch (e) {
      // Not signed out unless the server said so: the session would still let anyone at this
      // browser in.
      if (e.message !== SIGNED_OUT) return toast(e.message);
    }
    showLogin();
  });
  for (const b of document.querySelectorAll('.tab')) b.addEventListener('click', () => switchTab(b.dataset.tab));
  $('.tabs').addEventListener('keydown', (ev) => {
    const tabs = [...document.querySelectorAll('.tab')];
    const at = tabs.indexOf(document.activeElement);
    const to = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: tabs.length - 1 }[ev.key];
    if (at < 0 || to === undefined) return;
    ev.preventDefault();
    const next = tabs[(to + tabs.length) % tabs.length];
    next.focus();
    switchTab(next.dataset.tab);
  });
  for (const b of document.querySelectorAll('#granularity button')) {
    b.addEventListener('click', () => {
      state.granularity = b.dataset.g;
      for (const x of document.querySelectorAll('#granularity button')) {
        x.classList.toggle('on', x === b);
        x.setAttribute('aria-pressed', String(x === b));
      }
      loadUsage().catch(report);
    });
  }
  // A button whose action is on its way is disabled until it is done: pressed again meanwhile (a
  // slow server), it would make a second key whose secret is never shown, or delete again.
  async function once(button, action) {
    if (button.disabled) return;
    button.disabled = true;
    try {
      await action();
    } finally {
      button.disabled = false;
    }
  }
  $('#key-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    once($('#generate-key'), generateKey);
  });
  async function generateKey() {
    try {
      const k = await api('/keys', { method: 'POST', body: { name: $('#key-name').value } });
      $('#new-key-value').textContent = k.key;
      $('#new-key').hidden = false;
      $('#key-name').value = '';
      $('#copy-key').focus();
      await loadKeys();
    } catch (e) {
      report(e);
    }
  }
  $('#copy-key').addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText($('#new-key-value').textContent);
      toast('Key copied to the clipboard');
    } catch {
      const range = document.createRange();
      range.selectNodeContents($('#new-key-value'));
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      toast('Key selected: press Ctrl+C to copy');
    }
  });
  $('#keys-table').addEventListener('click', async (ev) => {
    const b = ev.target.closest('button.revoke');
    if (!b || !confirm('Revoke this key? Requests using it will be refused at once.')) return;
    const at = [...document.querySelectorAll('#keys-table button.revoke')].indexOf(b);
    try {
      await api(`/keys/${encodeURIComponent(b.dataset.id)}/revoke`, { method: 'POST' });
    } catch (e) {
      // Not revoked: the key still works, and the toast must not say otherwise.
      report(e);
      return;
    }
    toast('Key revoked');
    await loadKeys();
    // The button pressed is gone: on to the next key's (or the one before), not to the page's top.
    const left = document.querySelectorAll('#keys-table button.revoke');
    (left[Math.min(at, left.length - 1)] ?? $('#key-name')).focus();
  });
  $('#search-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    state.q = $('#search').value.trim();
    state.page = 1;
    loadEntries().catch(report);
  });
  // The page shown stays the current one until the next has come.
  async function goToPage(page, pressed) {
    const shown = state.page;
    state.page = page;
    try {
      await loadEntries();
    } catch (e) {
      state.page = shown;
      report(e);
      return;
    }
    // At the first or last page the button pressed is disabled, and would drop the focus to the
    // page's top: it goes to the other one (unless it was taken elsewhere meanwhile).
    if (pressed.disabled && [pressed, document.body].includes(document.activeElement)) {
      const other = pressed.id === 'next' ? $('#prev') : $('#next');
      (other.disabled ? $('#search') : other).focus();
    }
  }
  $('#prev').addEventListener('click', (ev) => goToPage(Math.max(1, state.page - 1), ev.currentTarget));
  $('#next').addEventListener('click', (ev) => goToPage(state.page + 1, ev.currentTarget));
  $('#entries-table').addEventListener('click', (ev) => {
    const tr = ev.target.closest('tr.clickable');
    if (tr) showEntry(Number(tr.dataset.id)).catch(report);
  });
  $('#entry').addEventListener('click', async (ev) => {
    const b = ev.target.closest('#delete-entry');
    if (!b || b.disabled || !confirm('Delete this entry? It stops matching at once.')) return;
    let deleted = false;
    await once(b, async () => {
      try {
        await api(`/entries/${b.dataset.id}`, { method: 'DELETE' });
        deleted = true;
      } catch (e) {
        // Not deleted: the entry still matches, and the toast must not say otherwise.
        report(e);
      }
    });
    if (!deleted) return;
    $('#entry').hidden = true;
    state.selected = null;
    toast('Entry deleted');
    await loadEntries();
    // The button pressed is gone: back to the list.
    ($('#entries-table .open-entry') ?? $('#search')).focus();
  });
  // Changed again, the form is no longer what was saved.
  $('#settings-form').addEventListener('input', () => ($('#settings-saved').hidden = true));
  $('#settings-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      const me = await api('/settings', {
        method: 'PUT',
        body: { default_threshold: Number($('#threshold').value), entry_ttl_seconds: Number($('#ttl').value) },
      });
      state.account = me.account;
      $('#settings-saved').hidden = false;
    } catch (e) {
      report(e);
    }
  });

  // Back to this tab from another, where another account may have signed in or the session
  // ended: the session is looked at then, not at the next click.
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible' && state.account) api('/me').catch(report);
  });

  // No one signed in: the sign-in form. The server unable to say (a 503, unreachable): the form
  // with why, as signing in would not work either.
  api('/me').then(signedIn, (e) => showLogin(e.message === SIGNED_OUT ? '' : e.message));
})();
