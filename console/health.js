// Health: the audit verification, projection lag and stalled work (from /metrics), the
// failed outbox rows (admins) and bookings per minute.

import { errorText } from './api.js';
import { h, s, fmtInt, fmtSeconds, fmtDateTime, fmtHourMinute, fmtTime, plural, setText, referenceOf } from './util.js';

const METRICS_MS = 5000;
const BOOKINGS_MS = 30000;
const RELAY = 'jetstream_relay';

/** Prometheus text format → [{name, labels, value}] (comments and bad lines skipped). */
export function parseMetrics(text) {
  const out = [];
  for (const line of String(text).split('\n')) {
    const t = line.trim();
    if (!t || t.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$/.exec(t);
    if (!m) continue;
    const labels = {};
    if (m[2]) {
      for (const l of m[2].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"/g)) {
        labels[l[1]] = l[2].replace(/\\n/g, '\n').replace(/\\(["\\])/g, '$1');
      }
    }
    const raw = m[3];
    const value = raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : Number(raw);
    out.push({ name: m[1], labels, value });
  }
  return out;
}

export function mountHealth(root, ctx) {
  const admin = ctx.isAdmin;
  let alive = true;
  const timers = new Set();
  ctx.setTitle('Health');

  const card = (key, title, ...children) => h('section', { class: ['card', `sec-${key}`], 'aria-labelledby': `sec-${key}-h`, dataset: { section: key } },
    h('h2', { id: `sec-${key}-h` }, title), ...children);

  // -- Audit --------------------------------------------------------------------------
  const verifyButton = h('button', { type: 'button', class: 'primary' }, 'Run audit verify');
  const verifyStatus = h('div', { role: 'status', class: 'verify-status' });
  const verifyResult = h('div', { class: 'verify-result' });
  verifyButton.addEventListener('click', runVerify);
  const audit = card('audit', 'Audit',
    h('p', { class: 'hint' }, 'Checks the event history\u2019s hash chain, replays it through the booking rules and compares the result with the stored nights. Can take a few seconds.'),
    verifyButton, verifyStatus, verifyResult);

  async function runVerify() {
    verifyButton.disabled = true;
    verifyStatus.textContent = 'Verifying…';
    verifyResult.replaceChildren();
    try {
      const r = await ctx.api('/v1/audit/verify');
      if (!alive) return;
      const ok = r?.ok === true;
      const pending = Number(r?.pending_events ?? 0);
      const text = ok
        ? `ok — ${fmtInt(r.events_checked ?? 0)} events checked`
        : `FAILED${r?.first_bad_position != null ? ` — first bad position ${r.first_bad_position}` : ''}`;
      const details = [];
      if (!ok) details.push(`${fmtInt(r?.events_checked ?? 0)} events checked`);
      if (pending > 0) details.push(`${plural(pending, 'newer event', 'newer events')} not covered by this run`);
      const problems = Array.isArray(r?.problems) ? r.problems : [];
      verifyStatus.textContent = ok ? 'Verified.' : 'Verification found problems.';
      verifyResult.replaceChildren(h('p', { class: ['verdict', ok ? 'ok' : 'bad'], dataset: { ok: String(ok) } }, text));
      if (details.length) verifyResult.append(h('p', { class: 'verify-details muted' }, `${details.join('; ')}.`));
      if (problems.length) {
        verifyResult.append(h('ul', { class: 'problems' }, problems.map((p) => h('li', null, typeof p === 'string' ? p : JSON.stringify(p)))));
      }
    } catch (e) {
      if (!alive) return;
      verifyStatus.textContent = 'The verification did not run.';
      verifyResult.replaceChildren(h('p', { role: 'alert', class: 'error' }, errorText(e)));
    } finally {
      verifyButton.disabled = false;
    }
  }

  // -- Bookings per minute ---------------------------------------------------------------
  const chartBox = h('div', { class: 'chart-box' }, h('p', { class: 'loading' }, 'Loading…'));
  const chartInfo = h('p', { class: 'chart-info muted' });
  const bookings = card('bookings', 'Bookings per minute', chartBox, chartInfo);

  // -- Lag and stalled work ------------------------------------------------------------
  const metricsInfo = h('p', { class: 'muted metrics-info' }, 'Loading…');
  const metricsAlert = h('div');
  // Runners failing now, with their reason (from /readyz: every server's view).
  const failingBox = h('div', { class: 'failing' });
  const lagBox = h('div', { class: 'table-wrap' });
  const workBox = h('div', { class: 'table-wrap' });
  const outboxBox = h('div', { class: 'table-wrap' });
  const lag = card('lag', 'Lag and stalled work', metricsInfo, metricsAlert, failingBox,
    h('div', { class: 'metric-tables' },
      h('div', null, h('h3', null, 'Projections'), lagBox),
      h('div', null, h('h3', null, 'Stalled work'), workBox),
      h('div', null, h('h3', null, 'Outbox'), outboxBox)));

  // -- Failed outbox rows -------------------------------------------------------------
  const failedBox = h('div', { class: 'table-wrap' });
  const failedStatus = h('div', { role: 'status', class: 'outbox-status' });
  let failed;
  if (admin) {
    const refreshButton = h('button', { type: 'button', class: 'refresh-outbox' }, 'Refresh');
    refreshButton.addEventListener('click', loadFailed);
    failed = card('outbox', 'Failed outbox rows', h('div', { class: 'card-tools' }, refreshButton), failedStatus, failedBox);
  } else {
    failed = card('outbox', 'Failed outbox rows', h('p', { class: 'muted admin-only' }, 'Admin only'));
  }

  root.append(h('h1', { tabindex: '-1' }, 'Health'),
    h('div', { class: 'health-grid' }, audit, bookings, lag, failed));

  // -- Metrics ----------------------------------------------------------------------
  let metricsBusy = false;
  let metricsError = '';
  async function loadMetrics() {
    if (metricsBusy || document.hidden) return;
    metricsBusy = true;
    try {
      const text = await ctx.api('/metrics', { text: true, signOutOn401: false });
      if (!alive) return;
      showMetrics(parseMetrics(text));
      showFailing(await ctx.api('/readyz', { signOutOn401: false }));
      setText(metricsInfo, `As of ${fmtTime(new Date())} · refreshed every 5 s`);
      if (metricsError) metricsAlert.replaceChildren();
      metricsError = '';
    } catch (e) {
      if (!alive) return;
      const text = `Could not read /metrics: ${errorText(e)}`;
      if (text !== metricsError) metricsAlert.replaceChildren(h('p', { role: 'alert', class: 'error' }, text));
      metricsError = text;
    } finally {
      metricsBusy = false;
    }
  }

  function showFailing(ready) {
    const failing = Array.isArray(ready?.failing) ? ready.failing : [];
    failingBox.replaceChildren(...(failing.length === 0 ? [] : [
      h('h3', null, 'Failing now'),
      h('ul', { class: 'failing-list' }, failing.map((f) => h('li', { dataset: { runner: String(f.name) } },
        h('strong', null, String(f.name)), ` since ${fmtTime(new Date(f.since))}: `,
        h('code', null, String(f.error))))),
    ]));
  }

  function showMetrics(samples) {
    const find = (name, labels = {}) => samples.find((x) => x.name === name
      && Object.entries(labels).every(([k, v]) => x.labels[k] === v))?.value;
    const labelValues = (names, label) => [...new Set(samples
      .filter((x) => names.includes(x.name) && x.labels[label] != null).map((x) => x.labels[label]))].sort();

    const cell = (value, metric, { seconds = false, warn = false, labels = {} } = {}) => {
      const present = value !== undefined;
      return h('td', {
        class: ['num', warn && present && value !== 0 && 'warn'],
        dataset: { metric, value: present ? String(value) : null, ...labels },
      }, !present ? '—' : seconds ? fmtSeconds(value) : fmtInt(value));
    };

    // Projections (the relay first).
    const projections = labelValues(['projection_lag_seconds', 'projection_lag_events'], 'projection');
    projections.sort((a, b) => (a === RELAY ? -1 : b === RELAY ? 1 : a.localeCompare(b)));
    const relayRows = projections.includes(RELAY) ? [] : [h('tr', { dataset: { projection: RELAY } },
      h('th', { scope: 'row' }, 'relay'), h('td', { class: 'num' }, '—'), h('td', { class: 'num' }, '—'))];
    lagBox.replaceChildren(h('table', { class: 'data metrics', 'aria-label': 'Projection lag' },
      h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Projection'), h('th', { scope: 'col', class: 'num' }, 'Lag'), h('th', { scope: 'col', class: 'num' }, 'Events behind'))),
      h('tbody', null, relayRows, projections.map((p) => h('tr', { dataset: { projection: p } },
        h('th', { scope: 'row' }, p === RELAY ? `relay (${RELAY})` : p),
        cell(find('projection_lag_seconds', { projection: p }), 'projection_lag_seconds', { seconds: true, labels: { projection: p } }),
        cell(find('projection_lag_events', { projection: p }), 'projection_lag_events', { labels: { projection: p } }))))));

    // Stalled work.
    const work = [
      ['Holds overdue', 'holds_overdue', { warn: true }],
      ['Payment sagas open', 'payment_sagas_open', {}],
      ['Oldest payment saga', 'payment_saga_oldest_seconds', { seconds: true }],
      ['Webhook subscriptions paused', 'webhook_subscriptions_paused', {}],
    ];
    workBox.replaceChildren(h('table', { class: 'data metrics', 'aria-label': 'Stalled work' },
      h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'What'), h('th', { scope: 'col', class: 'num' }, 'Now'))),
      h('tbody', null, work.map(([label, name, opts]) => h('tr', null,
        h('th', { scope: 'row' }, label), cell(find(name), name, opts))))));

    // Outbox per kind.
    const kinds = labelValues(['outbox_pending', 'outbox_oldest_seconds', 'outbox_failed'], 'kind');
    const rows = kinds.length
      ? kinds.map((k) => h('tr', { dataset: { kind: k } },
        h('th', { scope: 'row' }, k),
        cell(find('outbox_pending', { kind: k }), 'outbox_pending', { labels: { kind: k } }),
        cell(find('outbox_oldest_seconds', { kind: k }), 'outbox_oldest_seconds', { seconds: true, labels: { kind: k } }),
        cell(find('outbox_failed', { kind: k }), 'outbox_failed', { warn: true, labels: { kind: k } })))
      : [h('tr', null, h('th', { scope: 'row' }, '—'), h('td', { class: 'num' }, '—'), h('td', { class: 'num' }, '—'), h('td', { class: 'num' }, '—'))];
    outboxBox.replaceChildren(h('table', { class: 'data metrics', 'aria-label': 'Outbox' },
      h('thead', null, h('tr', null, ['Kind', 'Pending', 'Oldest', 'Failed'].map((t, i) => h('th', { scope: 'col', class: i ? 'num' : null }, t)))),
      h('tbody', null, rows)));
  }

  // -- Failed rows --------------------------------------------------------------------
  async function loadFailed() {
    if (!admin) return;
    try {
      const body = await ctx.api('/v1/ops/outbox?state=failed');
      if (!alive) return;
      const list = Array.isArray(body?.rows) ? body.rows : [];
      if (list.length === 0) {
        failedBox.replaceChildren(h('p', { class: 'muted empty' }, 'No failed rows.'));
        return;
      }
      failedBox.replaceChildren(h('table', { class: 'data outbox-rows', 'aria-label': 'Failed outbox rows' },
        h('thead', null, h('tr', null, ['ID', 'Kind', 'What', 'Reservation', 'Attempts', 'Last error', 'Created', 'Action']
          .map((t) => h('th', { scope: 'col', class: t === 'Attempts' ? 'num' : null }, t)))),
        h('tbody', null, list.map((row) => {
          const retry = h('button', { type: 'button', class: 'retry', dataset: { outboxId: row.id } }, 'Retry');
          retry.addEventListener('click', () => retryRow(row.id, retry));
          return h('tr', { dataset: { outboxId: row.id } },
            h('td', { class: 'mono' }, String(row.id)),
            h('td', null, String(row.kind ?? '')),
            h('td', null, String(row.what ?? '')),
            h('td', { class: 'mono' }, row.reservation_id
              ? h('a', { href: `#/reservations/${encodeURIComponent(row.reservation_id)}`, title: row.reservation_id }, referenceOf(row.reservation_id) ?? String(row.reservation_id))
              : '—'),
            h('td', { class: 'num' }, fmtInt(row.attempts)),
            h('td', { class: 'wrap' }, String(row.last_error ?? '')),
            h('td', { class: 'nowrap' }, fmtDateTime(row.created_at)),
            h('td', null, retry));
        }))));
    } catch (e) {
      if (alive) failedBox.replaceChildren(h('p', { role: 'alert', class: 'error' }, `Could not list the failed rows: ${errorText(e)}`));
    }
  }

  async function retryRow(id, button) {
    button.disabled = true;
    failedStatus.replaceChildren(h('span', { class: 'pending' }, `Retrying ${id}…`));
    try {
      await ctx.api(`/v1/ops/outbox/${encodeURIComponent(id)}/retry`, { method: 'POST' });
      if (!alive) return;
      failedStatus.replaceChildren(h('span', { class: 'ok' }, `${id} queued for retry.`));
      await loadFailed();
    } catch (e) {
      if (!alive) return;
      button.disabled = false;
      failedStatus.replaceChildren(h('span', { role: 'alert', class: 'error' }, errorText(e)));
    }
  }

  // -- Bookings chart ------------------------------------------------------------------
  let bookingsBusy = false;
  async function loadBookings() {
    if (bookingsBusy || document.hidden) return;
    bookingsBusy = true;
    try {
      const body = await ctx.api('/v1/ops/bookings?minutes=60');
      if (!alive) return;
      drawChart(Array.isArray(body?.minutes) ? body.minutes : [], body?.as_of);
    } catch (e) {
      if (alive) chartBox.replaceChildren(h('p', { role: 'alert', class: 'error' }, `Could not load bookings: ${errorText(e)}`));
    } finally {
      bookingsBusy = false;
    }
  }

  function drawChart(minutes, asOf) {
    const W = 640;
    const H = 200;
    const left = 34;
    const right = 8;
    const top = 12;
    const bottom = 24;
    const plotW = W - left - right;
    const plotH = H - top - bottom;
    const n = Math.max(minutes.length, 1);
    const made = minutes.map((m) => Number(m.held ?? 0));
    const confirmed = minutes.map((m) => Number(m.confirmed ?? 0));
    const cancelled = minutes.map((m) => Number(m.cancelled ?? 0));
    const total = made.reduce((a, b) => a + b, 0);
    const totalConfirmed = confirmed.reduce((a, b) => a + b, 0);
    const totalCancelled = cancelled.reduce((a, b) => a + b, 0);
    const max = Math.max(0, ...made, ...confirmed);
    const scale = max > 0 ? plotH / max : 0;
    const bw = plotW / n;
    const gap = bw > 4 ? 1 : 0;
    const summary = `${fmtInt(total)} reservations in the last ${minutes.length} minutes, ${fmtInt(totalConfirmed)} confirmed`;

    const svg = s('svg', {
      viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': summary, class: 'chart',
      preserveAspectRatio: 'xMidYMid meet', dataset: { total, confirmed: totalConfirmed },
    });
    // Grid and axes.
    svg.append(
      s('line', { x1: left, y1: top, x2: left + plotW, y2: top, class: 'gridline' }),
      s('line', { x1: left, y1: top + plotH / 2, x2: left + plotW, y2: top + plotH / 2, class: 'gridline' }),
      s('line', { x1: left, y1: top + plotH, x2: left + plotW, y2: top + plotH, class: 'axis' }),
      s('text', { x: left - 6, y: top + 4, class: 'tick', 'text-anchor': 'end' }, fmtInt(max)),
      s('text', { x: left - 6, y: top + plotH + 4, class: 'tick', 'text-anchor': 'end' }, '0'),
    );
    minutes.forEach((m, i) => {
      const x = left + i * bw;
      const hMade = made[i] * scale;
      const hConf = confirmed[i] * scale;
      const when = fmtHourMinute(m.minute);
      const g = s('g', { class: 'bar' },
        s('title', null, `${when}: ${made[i]} made, ${confirmed[i]} confirmed, ${cancelled[i]} cancelled`));
      // An invisible full-height rect gives each minute a hover target.
      g.append(s('rect', { x, y: top, width: bw, height: plotH, class: 'hit' }));
      if (hMade > 0) g.append(s('rect', { x: x + gap / 2, y: top + plotH - hMade, width: Math.max(bw - gap, 0.5), height: hMade, class: 'bar-made' }));
      if (hConf > 0) g.append(s('rect', { x: x + gap / 2, y: top + plotH - hConf, width: Math.max(bw - gap, 0.5), height: hConf, class: 'bar-confirmed' }));
      svg.append(g);
      const dt = new Date(m.minute);
      if (!Number.isNaN(dt.getTime()) && dt.getUTCMinutes() % 10 === 0) {
        svg.append(
          s('line', { x1: x, y1: top + plotH, x2: x, y2: top + plotH + 4, class: 'axis' }),
          s('text', { x, y: H - 6, class: 'tick', 'text-anchor': 'middle' }, when));
      }
    });
    chartBox.replaceChildren(svg,
      h('ul', { class: 'chart-legend', 'aria-hidden': 'true' },
        h('li', null, h('span', { class: 'swatch made' }), 'made (held)'),
        h('li', null, h('span', { class: 'swatch confirmed' }), 'confirmed')));
    setText(chartInfo, `${summary}, ${fmtInt(totalCancelled)} cancelled${asOf ? ` · as of ${fmtTime(asOf)}` : ''} · refreshed every 30 s`);
  }

  // -- Timers --------------------------------------------------------------------------
  function every(ms, fn) {
    fn();
    const id = setInterval(fn, ms);
    timers.add(id);
  }
  every(METRICS_MS, loadMetrics);
  every(BOOKINGS_MS, loadBookings);
  loadFailed();

  const onVisibility = () => {
    if (!document.hidden) {
      loadMetrics();
    }
  };
  document.addEventListener('visibilitychange', onVisibility);

  return {
    destroy() {
      alive = false;
      for (const id of timers) clearInterval(id);
      document.removeEventListener('visibilitychange', onVisibility);
    },
  };
}
