// Pickup & year: how the book of a hotel is moving, for revenue staff deciding prices.
//
// The calendar answers "what is left to sell on these nights"; this page answers "how
// fast is it selling, and where is the year full or empty". It reads three reports and
// draws them:
//
// - `GET /v1/hotels/{h}/pickup` for the next 90 nights from the hotel's today: rooms on
//   the books now against a week ago, and rooms booked and cancelled in the last day
//   and week per night of stay (charts, a 14-night table, a CSV of all 90 nights);
// - `GET /v1/hotels/{h}/occupancy` for the next 365 nights: one week grid of occupancy
//   per room type (a heat map);
// - `GET /v1/hotels/{h}/turnaways` for the same 90 nights: holds refused, per night.
//
// Admins and auditors also get a what-if form: `POST /v1/analytics/what-if` replays a
// room type's recorded demand over a range under another overbooking allowance (or the
// one the no-show report suggests for a walk risk), beside the allowance in force.
//
// Every chart has a text alternative (an `aria-label` summary, and the same numbers in a
// table). Charts are SVG drawn to the width of their box (redrawn when it changes), so
// their text stays at its real size on a phone; the year scrolls sideways in its own box.
// The page changes nothing (the what-if only asks) and refreshes itself every 60 seconds.

import { errorText, hotelsError, ApiError } from './api.js';
import { h, s, field, fmtInt, fmtDayShort, addDays, nightsBetween, hotelToday, downloadCsv, fmtTime, setText, plural, hotelOption,
  fmtMoney, minorDigits, parseMoney } from './util.js';

const REFRESH_MS = 60_000;
const PICKUP_NIGHTS = 90;
const YEAR_NIGHTS = 365;
const TABLE_NIGHTS = 14;

/** The pickup report's numbers per night, in the API's names (the CSV's header). */
export const PICKUP_FIELDS = ['booked_last_day', 'booked_last_week', 'cancelled_last_day', 'cancelled_last_week',
  'on_the_books', 'on_the_books_week_ago'];
const FIELD_HEADINGS = {
  booked_last_day: 'Booked 24 h',
  booked_last_week: 'Booked 7 d',
  cancelled_last_day: 'Cancelled 24 h',
  cancelled_last_week: 'Cancelled 7 d',
  on_the_books: 'On the books',
  on_the_books_week_ago: 'A week ago',
};

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** Occupancy bands of the heat map, in legend order: [class, legend text]. */
const BANDS = [
  ['band-zero', '0 %'],
  ['band-low', 'under 50 %'],
  ['band-mid', '50–79 %'],
  ['band-high', '80–99 %'],
  ['band-full', 'Full'],
  ['band-over', 'Oversold'],
  ['band-none', 'No inventory'],
];

// ---------------------------------------------------------------------------
// Pure helpers (numbers and words).

/** `+32`, `-4`, `0` (ASCII minus: a spreadsheet and `Number()` read it). */
export function signed(n) {
  return n > 0 ? `+${fmtInt(n)}` : n < 0 ? `-${fmtInt(-n)}` : '0';
}

/** A ratio as a whole percentage that never says 100 % before a night is full. */
export function pct(ratio) {
  if (ratio == null) return '—';
  const p = ratio < 1 ? Math.floor(ratio * 100) : Math.round(ratio * 100);
  return `${p} %`;
}

/** The heat map's band of one room type's night (see BANDS). */
export function occupancyBand(night) {
  const occ = night?.occupancy;
  if (occ == null) return 'band-none';
  if (night.oversold || occ > 1) return 'band-over';
  if (occ >= 1) return 'band-full';
  if (occ >= 0.8) return 'band-high';
  if (occ >= 0.5) return 'band-mid';
  if (occ > 0) return 'band-low';
  return 'band-zero';
}

/** An axis from 0 to at least `max`, in about `count` round steps: {top, step}. */
export function niceScale(max, count = 4) {
  const m = Math.max(1, max);
  const raw = m / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = Math.max(1, [1, 2, 5, 10].map((f) => f * mag).find((v) => v >= raw));
  return { top: Math.ceil(m / step) * step, step };
}

const utcDate = (date) => new Date(`${date}T00:00:00Z`);

/** `Sun 6 Dec 2026` */
function dayWithYear(date) {
  return `${fmtDayShort(date)} ${utcDate(date).getUTCFullYear()}`;
}

/** `6 Dec` (axis ticks). */
function dayMonth(date) {
  const d = utcDate(date);
  return `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]}`;
}

/** Each of the `count` nights from `start`, with the report's numbers (0 for a night the
 * report leaves out: nothing booked). */
export function pickupRows(body, start, count = PICKUP_NIGHTS) {
  const byDate = new Map((Array.isArray(body?.nights) ? body.nights : []).map((n) => [n.date, n]));
  return nightsBetween(start, addDays(start, count)).map((date) => {
    const n = byDate.get(date) ?? {};
    const row = { date };
    for (const f of PICKUP_FIELDS) row[f] = Number(n[f] ?? 0);
    return row;
  });
}

function sum(rows, f) {
  return rows.reduce((a, r) => a + r[f], 0);
}

/** The totals the captions state. */
export function pickupTotals(rows) {
  const t = {};
  for (const f of PICKUP_FIELDS) t[f] = sum(rows, f);
  t.pickup = t.on_the_books - t.on_the_books_week_ago;
  return t;
}

/** "Read model as of 10:22:07", from the answers that came (null: one did not). Never
 * a time the answers did not state: a read model that has not run says so. */
export function asOfText(pickup, occupancy) {
  const parts = [['pickup', pickup], ['occupancy', occupancy]].filter(([, b]) => b);
  if (parts.length === 0) return '';
  const times = parts.map(([, b]) => (b.as_of ? fmtTime(b.as_of) : null));
  if (times.every((t) => t === null)) return 'The read model has not run yet: no time to show.';
  if (times.every((t) => t === times[0])) return `Read model as of ${times[0]}`;
  const known = parts.flatMap(([name], i) => (times[i] ? [`${times[i]} (${name})`] : []));
  const never = parts.flatMap(([name], i) => (times[i] ? [] : [`${name}: the read model has not run yet`]));
  return [`Read model as of ${known.join(', ')}`, ...never].join('; ');
}

// ---------------------------------------------------------------------------
// Small DOM pieces.

function card(key, title, ...children) {
  return h('section', { class: ['card', 'ins-card', `ins-${key}`], 'aria-labelledby': `ins-${key}-h`, dataset: { section: key } },
    h('h2', { id: `ins-${key}-h` }, title), ...children);
}

function loadingNote(text = 'Loading…') {
  return h('p', { class: 'loading', role: 'status' }, text);
}

function errorNote(text) {
  return h('p', { role: 'alert', class: 'error' }, text);
}

/** A legend (hidden from screen readers: the summary and the table say the same). */
function legend(items) {
  return h('ul', { class: 'ins-legend', 'aria-hidden': 'true' },
    items.map(([cls, text]) => h('li', null, h('span', { class: ['ins-key', cls] }), text)));
}

/** Puts a new `<details>` in `box`, open if the one it replaces was (a refresh must not
 * close what someone is reading). */
function keepOpen(box, details) {
  details.open = Boolean(box.querySelector('details')?.open);
  box.replaceChildren(details);
}

/** A collapsed table of a chart's numbers: headings, and rows of [night, ...numbers]. */
function numbersTable(label, headings, rows) {
  return h('details', { class: 'ins-numbers' },
    h('summary', null, `${label}: the numbers night by night`),
    h('div', { class: 'table-wrap ins-numbers-wrap', tabindex: '0', role: 'region', 'aria-label': `${label} (table)` },
      h('table', { class: 'data' },
        h('caption', { class: 'sr-only' }, label),
        h('thead', null, h('tr', null, headings.map((t, i) => h('th', { scope: 'col', class: i ? 'num' : null }, t)))),
        h('tbody', null, rows.map(([date, ...cells]) => h('tr', null,
          h('th', { scope: 'row', class: 'nowrap' }, fmtDayShort(date)),
          cells.map((c) => h('td', { class: 'num' }, c))))))));
}

// ---------------------------------------------------------------------------
// Charts of the next 90 nights: shared frame.

const CHART_H = 230;
const M = { left: 40, right: 10, top: 22, bottom: 26 };

/** An SVG chart frame `width` wide, with its x scale over `n` nights. */
function frame(width, n, label) {
  const plotW = width - M.left - M.right;
  const plotH = CHART_H - M.top - M.bottom;
  const bw = plotW / Math.max(n, 1);
  const svg = s('svg', {
    class: 'ins-chart', viewBox: `0 0 ${width} ${CHART_H}`, width: '100%', role: 'img', 'aria-label': label,
    preserveAspectRatio: 'xMinYMin meet',
  });
  return { svg, plotW, plotH, bw, x: (i) => M.left + i * bw };
}

/** Date ticks every 7 nights (14 or 28 when that is too tight). */
function dateTicks(f, rows) {
  const every = [7, 14, 28].find((k) => k * f.bw >= 46) ?? 28;
  const base = M.top + f.plotH;
  rows.forEach((r, i) => {
    if (i % every !== 0) return;
    const x = f.x(i) + f.bw / 2;
    f.svg.append(
      s('line', { x1: x, y1: base, x2: x, y2: base + 4, class: 'axis' }),
      s('text', { x, y: CHART_H - 7, class: 'tick', 'text-anchor': 'middle' }, dayMonth(r.date)));
  });
}

/** Horizontal grid lines and labels for values `from`..`to` by `step`, at `y(v)`. */
function valueTicks(f, from, to, step, y) {
  for (let v = from; v <= to; v += step) {
    f.svg.append(
      s('line', { x1: M.left, y1: y(v), x2: M.left + f.plotW, y2: y(v), class: v === 0 ? 'axis' : 'gridline' }),
      s('text', { x: M.left - 6, y: y(v) + 4, class: 'tick', 'text-anchor': 'end' }, fmtInt(v)));
  }
  f.svg.append(s('text', { x: 2, y: 11, class: 'tick unit' }, 'rooms'));
}

/** One night's hover target, with its `<title>`. */
function nightGroup(f, i, title) {
  return s('g', { class: 'night' }, s('title', null, title),
    s('rect', { x: f.x(i), y: M.top, width: f.bw, height: f.plotH, class: 'hit' }));
}

function bar(f, i, y, height, cls) {
  const gap = f.bw > 4 ? 1 : 0;
  return s('rect', { x: f.x(i) + gap / 2, y, width: Math.max(f.bw - gap, 0.5), height: Math.max(height, 0), class: cls });
}

/** On the books now (bars) against a week ago (a step line), per night. */
export function otbChart(rows, width) {
  const t = pickupTotals(rows);
  const label = `On the books for the next ${rows.length} nights: ${fmtInt(t.on_the_books)} room-nights; a week ago: ${fmtInt(t.on_the_books_week_ago)}; pickup ${signed(t.pickup)}.`;
  const f = frame(width, rows.length, label);
  const max = Math.max(0, ...rows.map((r) => Math.max(r.on_the_books, r.on_the_books_week_ago)));
  const { top, step } = niceScale(max);
  const y = (v) => M.top + f.plotH - (v / top) * f.plotH;
  valueTicks(f, 0, top, step, y);
  rows.forEach((r, i) => {
    const change = r.on_the_books - r.on_the_books_week_ago;
    const g = nightGroup(f, i, `${fmtDayShort(r.date)}: ${fmtInt(r.on_the_books)} on the books, ${fmtInt(r.on_the_books_week_ago)} a week ago (${signed(change)})`);
    if (r.on_the_books > 0) g.append(bar(f, i, y(r.on_the_books), y(0) - y(r.on_the_books), 'bar-otb'));
    f.svg.append(g);
  });
  let d = '';
  rows.forEach((r, i) => {
    const yy = y(r.on_the_books_week_ago).toFixed(1);
    d += `${i === 0 ? 'M' : 'L'}${f.x(i).toFixed(1)},${yy}L${f.x(i + 1).toFixed(1)},${yy}`;
  });
  if (d) f.svg.append(s('path', { d, class: 'line-week-ago' }));
  dateTicks(f, rows);
  return f.svg;
}

/** Rooms booked (up) and cancelled (down) in the last 7 days, the last 24 h darker. */
export function bookingsChart(rows, width) {
  const t = pickupTotals(rows);
  const label = `Rooms booked in the last 7 days for the next ${rows.length} nights: ${fmtInt(t.booked_last_week)} (${fmtInt(t.booked_last_day)} in the last 24 hours); cancelled in the last 7 days: ${fmtInt(t.cancelled_last_week)} (${fmtInt(t.cancelled_last_day)} in the last 24 hours).`;
  const f = frame(width, rows.length, label);
  const up = Math.max(0, ...rows.map((r) => r.booked_last_week));
  const down = Math.max(0, ...rows.map((r) => r.cancelled_last_week));
  const { step } = niceScale(up + down);
  const upTop = Math.ceil(up / step) * step || (down ? 0 : step * 4);
  const downTop = Math.ceil(down / step) * step;
  const y = (v) => M.top + ((upTop - v) / (upTop + downTop)) * f.plotH;
  valueTicks(f, -downTop, upTop, step, y);
  rows.forEach((r, i) => {
    const g = nightGroup(f, i, `${fmtDayShort(r.date)}: ${fmtInt(r.booked_last_week)} booked in the last 7 days (${fmtInt(r.booked_last_day)} in the last 24 h), ${fmtInt(r.cancelled_last_week)} cancelled in the last 7 days (${fmtInt(r.cancelled_last_day)} in the last 24 h)`);
    const add = (v, cls, below) => {
      if (v > 0) g.append(below ? bar(f, i, y(0), y(-v) - y(0), cls) : bar(f, i, y(v), y(0) - y(v), cls));
    };
    add(r.booked_last_week, 'bar-booked-week', false);
    add(r.booked_last_day, 'bar-booked-day', false);
    add(r.cancelled_last_week, 'bar-cancelled-week', true);
    add(r.cancelled_last_day, 'bar-cancelled-day', true);
    f.svg.append(g);
  });
  if (up === 0 && down === 0) {
    f.svg.append(s('text', { x: M.left + f.plotW / 2, y: M.top + f.plotH / 2, class: 'empty-note', 'text-anchor': 'middle' },
      'Nothing booked or cancelled in the last 7 days for these nights'));
  }
  dateTicks(f, rows);
  return f.svg;
}

// ---------------------------------------------------------------------------
// The year: one week grid (Monday to Sunday down, weeks across) per room type.

const CELL = 12;
const PITCH = 15;
const HM_LEFT = 34;
const HM_TOP = 20;
const HM_NAME = 22;
const HM_GAP = 14;
const WEEKDAY_LABELS = [[0, 'Mon'], [2, 'Wed'], [4, 'Fri'], [6, 'Sun']];

/** Monday = 0 … Sunday = 6. */
function mondayIndex(date) {
  return (utcDate(date).getUTCDay() + 6) % 7;
}

/** The heat map's month names: [{col, text}], the year with the first and with January;
 * a name that would run into the next is left out (the first one first). */
function monthLabels(dates, pos, cols) {
  const out = [];
  dates.forEach((date, i) => {
    const d = utcDate(date);
    const day = d.getUTCDate();
    if (i === 0 ? day > 24 : day !== 1) return; // a month ending within days: label the next
    const { col } = pos(i);
    if (col > cols - 2) return;
    const month = d.getUTCMonth();
    const text = out.length === 0 || month === 0 ? `${MONTHS[month]} ${d.getUTCFullYear()}` : MONTHS[month];
    const last = out[out.length - 1];
    if (last && (col - last.col) * PITCH < last.text.length * 6.5 + 6) {
      if (out.length === 1) out.pop(); // drop the first rather than January
      else return;
    }
    out.push({ col, text });
  });
  return out;
}

/** One room type's night in words, as the cell's `<title>` says it. */
export function nightText(name, n) {
  const day = dayWithYear(n.date);
  if (n.occupancy == null) return `${name} · ${day}: no inventory`;
  let text = `${name} · ${day}: ${fmtInt(n.confirmed)} of ${fmtInt(n.total_rooms)} sold (${pct(n.occupancy)})`;
  if (n.held > 0) text += `, ${fmtInt(n.held)} on hold`;
  if (occupancyBand(n) === 'band-over') text += ' — oversold';
  return text;
}

function roomTypeSummary(rt) {
  const nights = rt.nights;
  const none = nights.filter((n) => n.occupancy == null).length;
  const full = nights.filter((n) => occupancyBand(n) === 'band-full').length;
  const over = nights.filter((n) => occupancyBand(n) === 'band-over').length;
  const t = rt.totals ?? {};
  const sold = `${fmtInt(t.confirmed ?? 0)} of ${fmtInt(t.total_rooms ?? 0)} room-nights sold${t.occupancy != null ? ` (${pct(t.occupancy)})` : ''}`;
  const extra = [`${plural(full, 'night', 'nights')} full`, `${plural(over, 'night', 'nights')} oversold`, `${plural(none, 'night', 'nights')} without inventory`];
  return `${rt.name}: ${sold}; ${extra.join(', ')}`;
}

/** The heat map of every room type over the nights from `start`. */
export function yearMap(roomTypes, start, count = YEAR_NIGHTS) {
  const dates = nightsBetween(start, addDays(start, count));
  const offset = mondayIndex(start);
  const cols = Math.ceil((offset + dates.length) / 7);
  const blockH = HM_NAME + 7 * PITCH + HM_GAP;
  const width = HM_LEFT + cols * PITCH + 4;
  const height = HM_TOP + roomTypes.length * blockH;
  const pos = (i) => ({ col: Math.floor((offset + i) / 7), row: (offset + i) % 7 });
  const label = `Occupancy per night from ${dayWithYear(start)} for ${dates.length} nights. ${roomTypes.map(roomTypeSummary).join('. ')}.`;
  const svg = s('svg', {
    class: 'ins-year-map', viewBox: `0 0 ${width} ${height}`, width: '100%', role: 'img', 'aria-label': label,
    preserveAspectRatio: 'xMinYMin meet',
  });
  // Hatching for nights without inventory.
  const pattern = 'ins-hatch';
  svg.append(s('defs', null, s('pattern', { id: pattern, width: 4, height: 4, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' },
    s('rect', { width: 4, height: 4, class: 'hatch-bg' }), s('line', { x1: 0, y1: 0, x2: 0, y2: 4, class: 'hatch-line' }))));
  // Month names along the top, over the week holding each month's first night.
  for (const { col, text } of monthLabels(dates, pos, cols)) {
    svg.append(s('text', { x: HM_LEFT + col * PITCH, y: 12, class: 'month' }, text));
  }
  roomTypes.forEach((rt, r) => {
    const top = HM_TOP + r * blockH;
    const g = s('g', { class: 'room-type', dataset: { roomType: rt.room_type_id } },
      s('text', { x: 0, y: top + 14, class: 'rt-name' }, rt.name));
    for (const [row, text] of WEEKDAY_LABELS) {
      g.append(s('text', { x: HM_LEFT - 6, y: top + HM_NAME + row * PITCH + CELL - 2, class: 'weekday', 'text-anchor': 'end' }, text));
    }
    const byDate = new Map(rt.nights.map((n) => [n.date, n]));
    dates.forEach((date, i) => {
      const n = byDate.get(date) ?? { date, occupancy: null };
      const { col, row } = pos(i);
      const x = HM_LEFT + col * PITCH;
      const y = top + HM_NAME + row * PITCH;
      const band = occupancyBand(n);
      g.append(s('rect', {
        x, y, width: CELL, height: CELL, rx: 2,
        class: ['cell', band, i === 0 && 'today'],
        fill: band === 'band-none' ? `url(#${pattern})` : null,
        dataset: { night: date, roomType: rt.room_type_id, occupancy: n.occupancy == null ? 'none' : String(n.occupancy) },
      }, s('title', null, nightText(rt.name, n))));
      if (band === 'band-over') g.append(s('circle', { cx: x + CELL / 2, cy: y + CELL / 2, r: 2.2, class: 'over-mark' }));
    });
    svg.append(g);
  });
  return { svg, summaries: roomTypes.map(roomTypeSummary) };
}

/** The year's numbers as a table: a row per night, a column per room type. */
function yearTable(roomTypes, start, count = YEAR_NIGHTS) {
  const maps = roomTypes.map((rt) => new Map(rt.nights.map((n) => [n.date, n])));
  const cell = (n) => (n == null || n.occupancy == null ? 'no inventory'
    : `${fmtInt(n.confirmed)} of ${fmtInt(n.total_rooms)} (${pct(n.occupancy)})${occupancyBand(n) === 'band-over' ? ' oversold' : ''}`);
  const rows = nightsBetween(start, addDays(start, count)).map((date) => [date, ...maps.map((m) => cell(m.get(date)))]);
  return numbersTable('Occupancy per room type', ['Night', ...roomTypes.map((rt) => rt.name)], rows);
}

// ---------------------------------------------------------------------------
// What if: a room type's recorded demand replayed under another overbooking policy
// (`POST /v1/analytics/what-if`, admins and auditors).

/** Roles the what-if answers (the API refuses the others). */
const WHAT_IF_ROLES = new Set(['admin', 'auditor']);
const WHAT_IF_NIGHTS = 31;

/** The totals table's rows: [API name, heading, kind, 1 when more is better or -1 when
 * less is], the last two with a walk cost only. */
const WHAT_IF_FIGURES = [
  ['room_nights_sold', 'Room-nights sold', 'int', 1],
  ['revenue_cents', 'Revenue', 'money', 1],
  ['walks_expected', 'Walks expected', 'walks', -1],
  ['walks_worst', 'Walks at worst', 'int', -1],
  ['walk_cost_cents', 'Walk cost', 'money', -1],
  ['net_revenue_cents', 'Net revenue', 'money', 1],
];

/** Expected walks (the API gives four places): `0.35`, `< 0.01` for a sliver, never a bare 0 for one. */
export function fmtWalks(v) {
  if (v == null || Number.isNaN(Number(v))) return '—';
  const n = Number(v);
  if (n > 0 && n < 0.005) return '< 0.01';
  return n.toLocaleString('en-US', { minimumFractionDigits: 0, maximumFractionDigits: 2 });
}

/** A what-if figure in words; '—' for an unknown one. */
export function whatIfValue(kind, v, currency) {
  if (v == null) return '—';
  if (kind === 'money') return fmtMoney(v, currency);
  if (kind === 'walks') return fmtWalks(v);
  return fmtInt(v);
}

/** What if less in force, signed (`+6`, `-€180.00`, `0`); '—' when either is unknown. */
export function whatIfDifference(kind, now, then, currency) {
  if (now == null || then == null) return { text: '—', value: null };
  const d = kind === 'walks' ? Math.round((then - now) * 10_000) / 10_000 : then - now;
  if (d === 0) return { text: '0', value: 0 };
  const sign = d > 0 ? '+' : '-';
  return { text: `${sign}${whatIfValue(kind, Math.abs(d), currency)}`, value: d };
}

/** A rate (0.125) as `12.5 %`. */
function ratePct(r) {
  return `${(Math.round(r * 1000) / 10).toLocaleString('en-US')} %`;
}

/** The line under the totals: the policy replayed, the no-show rate, what was read. */
export function whatIfAssumptions(body) {
  const policy = body?.policy ?? {};
  const a = body?.assumptions ?? {};
  const replayed = body?.replayed ?? {};
  const allowance = fmtInt(policy.overbooking_allowance);
  const parts = [policy.suggested_risk != null
    ? `Walk risk ${ratePct(policy.suggested_risk)}: suggested allowance ${allowance}`
    : `Allowance replayed: ${allowance}`];
  parts.push(a.no_show_rate == null
    ? 'no-show rate unknown — every guest expected to come'
    : `no-show rate ${ratePct(a.no_show_rate)} (${fmtInt(a.no_shows)} of ${plural(a.rooms_due, 'room', 'rooms')} due did not come)`);
  parts.push(`${plural(replayed.events ?? 0, 'event', 'events')} and ${plural(replayed.turnaways ?? 0, 'turnaway', 'turnaways')} replayed`);
  return `${parts.join(' · ')}.`;
}

/** What the page announces when an answer comes. */
export function whatIfHeadline(body, name) {
  const now = body?.in_force?.room_nights_sold;
  const then = body?.what_if?.room_nights_sold;
  return `What if for ${name} under allowance ${fmtInt(body?.policy?.overbooking_allowance)}: ${fmtInt(then)} room-nights sold against ${fmtInt(now)} in force (${whatIfDifference('int', now, then).text}); walks at worst ${fmtInt(body?.what_if?.walks_worst)}. The figures are in the tables below the form.`;
}

/** The what-if card: its section, `setHotel(hotel|null)` when the page's hotel changes,
 * and `destroy()`. Null for a role the API would refuse (the card is not shown). */
function whatIfCard(ctx) {
  if (!WHAT_IF_ROLES.has(ctx.me?.role)) return null;
  let alive = true;
  let hotel = null;
  let currency = 'EUR';
  let digits = 2;
  let asking = 0; // the last request's number: older answers are dropped

  const input = (id, name, attrs = {}) => h('input', { id, name, autocomplete: 'off', ...attrs });
  const roomType = h('select', { id: 'wi-room-type', name: 'room_type_id' });
  const from = input('wi-from', 'from', { type: 'date' });
  const to = input('wi-to', 'to', { type: 'date' });
  const kindAllowance = h('input', { id: 'wi-kind-allowance', type: 'radio', name: 'wi-kind', value: 'allowance', checked: true });
  const kindRisk = h('input', { id: 'wi-kind-risk', type: 'radio', name: 'wi-kind', value: 'risk' });
  const allowance = input('wi-allowance', 'overbooking_allowance', { type: 'number', min: '0', max: '10000', step: '1', inputmode: 'numeric', placeholder: 'e.g. 2' });
  const risk = input('wi-risk', 'suggested_risk', { type: 'number', min: '0', max: '1', step: 'any', inputmode: 'decimal', placeholder: 'e.g. 0.05' });
  const walkCost = input('wi-walk-cost', 'walk_cost', { type: 'text', inputmode: 'decimal', spellcheck: 'false', placeholder: 'e.g. 250' });
  const walkCostLabel = h('label', { for: 'wi-walk-cost' }, 'Walk cost per guest (optional)');
  const submit = h('button', { type: 'submit', class: 'primary', disabled: true }, 'Replay');
  const formStatus = h('div', { class: 'wi-form-status' });
  // The answer's figures are tables (too much for a live region to read out): the page's
  // polite announcer says its headline, and the error messages are alerts.
  const result = h('div', { class: 'wi-result', dataset: { whatIfResult: '' } });

  /** A field with a place for its error: the API names `key`. */
  const slots = new Map();
  function slot(key, control, wrapper) {
    const message = h('p', { class: 'wi-field-error error', id: `${control.id}-error`, dataset: { fieldError: key }, hidden: true });
    slots.set(key, { control, message });
    wrapper.append(message);
    return wrapper;
  }
  const plainField = (key, text, control, cls) => slot(key, control, h('div', { class: ['field', cls] }, h('label', { for: control.id }, text), control));
  const option = (radio, text, control, key, inputLabel) => slot(key, control,
    h('div', { class: 'wi-option' },
      h('div', { class: 'check' }, radio, h('label', { for: radio.id }, text)),
      h('label', { for: control.id, class: 'sr-only' }, inputLabel), control));

  const policy = h('fieldset', { class: 'wi-policy' },
    h('legend', null, 'Replay under'),
    option(kindAllowance, 'Allowance', allowance, 'policy.overbooking_allowance', 'Allowance (rooms over the physical ones)'),
    option(kindRisk, 'Walk risk', risk, 'policy.suggested_risk', 'Walk risk (0 to 1, such as 0.05): the allowance the no-show report suggests for it'));
  for (const [radio, control] of [[kindAllowance, allowance], [kindRisk, risk]]) {
    control.addEventListener('focus', () => { radio.checked = true; });
  }

  const form = h('form', { class: 'wi-form', novalidate: true, dataset: { whatIf: '' }, 'aria-labelledby': 'ins-what-if-h' },
    plainField('room_type_id', 'Room type', roomType, 'wi-room-type'),
    plainField('from', 'From (first night)', from),
    plainField('to', 'To (night after the last)', to),
    policy,
    slot('walk_cost_cents', walkCost, h('div', { class: 'field' }, walkCostLabel, walkCost)),
    h('div', { class: 'wi-actions' }, submit));
  const section = card('what-if', 'What if…',
    h('p', { class: 'hint' }, 'Replays a room type\u2019s recorded demand over a range of nights \u2014 holds, confirmations, cancellations, no-shows, and the holds turned away as sold out \u2014 under another overbooking allowance, beside the allowance in force. A turned-away hold the allowance would have taken counts as booked at the night\u2019s rate.'),
    form, formStatus, result);

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    ask();
  });

  function clearErrors() {
    for (const { control, message } of slots.values()) {
      control.removeAttribute('aria-invalid');
      control.removeAttribute('aria-describedby');
      message.hidden = true;
      message.removeAttribute('role');
      message.textContent = '';
    }
    formStatus.replaceChildren();
  }

  /** `text` by the field the API (or the page) names; by the button for any other. */
  function fieldError(key, text) {
    // `policy` (neither or both of its two): the one chosen.
    const place = slots.get(key === 'policy' ? `policy.${kindRisk.checked ? 'suggested_risk' : 'overbooking_allowance'}` : key);
    if (!place) {
      formStatus.replaceChildren(h('p', { role: 'alert', class: 'error' }, text));
      return;
    }
    place.message.textContent = text;
    place.message.setAttribute('role', 'alert');
    place.message.hidden = false;
    place.control.setAttribute('aria-invalid', 'true');
    place.control.setAttribute('aria-describedby', place.message.id);
    place.control.focus();
  }

  /** The request the form says, or null (its error shown by its field). */
  function question() {
    const refuse = (key, text) => {
      fieldError(key, text);
      return null;
    };
    if (!hotel) return null;
    if (roomType.value === '') return refuse('room_type_id', 'Pick a room type.');
    if (!from.value) return refuse('from', 'Give the first night (a date).');
    if (!to.value) return refuse('to', 'Give the night after the last (a date).');
    const body = { hotel_id: hotel.hotel_id, room_type_id: Number(roomType.value), from: from.value, to: to.value };
    if (kindRisk.checked) {
      const r = Number(risk.value.trim().replace(',', '.'));
      if (risk.value.trim() === '' || !Number.isFinite(r)) return refuse('policy.suggested_risk', 'Give a walk risk: a number such as 0.05.');
      body.policy = { suggested_risk: r };
    } else {
      const t = allowance.value.trim();
      if (!/^-?\d{1,9}$/.test(t)) return refuse('policy.overbooking_allowance', 'Give an allowance: a whole number of rooms, such as 2.');
      body.policy = { overbooking_allowance: Number(t) };
    }
    if (walkCost.value.trim() !== '') {
      const cents = parseMoney(walkCost.value, digits);
      if (Number.isNaN(cents)) return refuse('walk_cost_cents', `Walk cost: an amount in ${currency} such as 250${digits ? ` or 250.${'5'.padEnd(digits, '0')}` : ''}, or nothing.`);
      body.walk_cost_cents = cents;
    }
    return body;
  }

  async function ask() {
    clearErrors();
    const body = question();
    if (!body) return;
    const mine = ++asking;
    const name = roomType.selectedOptions[0]?.textContent ?? '';
    submit.disabled = true;
    formStatus.replaceChildren(h('p', { class: 'loading', role: 'status' }, 'Replaying…'));
    try {
      const answer = await ctx.api('/v1/analytics/what-if', { method: 'POST', body });
      if (!alive || mine !== asking) return;
      formStatus.replaceChildren();
      show(answer, name);
      ctx.announce(whatIfHeadline(answer, name));
    } catch (e) {
      if (!alive || mine !== asking) return;
      formStatus.replaceChildren();
      result.replaceChildren();
      const key = e instanceof ApiError && e.status >= 400 && e.status < 500 ? e.details?.field : null;
      if (key && (slots.has(key) || key === 'policy')) fieldError(key, e.message || errorText(e));
      else formStatus.replaceChildren(h('p', { role: 'alert', class: 'error' }, `Could not replay: ${errorText(e)}`));
    } finally {
      if (alive && mine === asking) submit.disabled = !hotel || roomType.options.length === 0;
    }
  }

  function show(answer, name) {
    const nowT = answer?.in_force ?? {};
    const thenT = answer?.what_if ?? {};
    const withCost = answer?.assumptions?.walk_cost_cents != null;
    const figures = WHAT_IF_FIGURES.filter(([key]) => withCost || (key !== 'walk_cost_cents' && key !== 'net_revenue_cents'));
    const nights = Array.isArray(answer?.nights) ? answer.nights : [];
    const span = answer?.from && answer?.to ? `${dayWithYear(answer.from)} to ${dayWithYear(addDays(answer.to, -1))} (${plural(nightsBetween(answer.from, answer.to).length, 'night', 'nights')})` : '';
    const cell = (kind, v, col) => h('td', { class: 'num', dataset: { col, value: v ?? '' } }, whatIfValue(kind, v, currency));
    const totals = h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': 'What-if totals (table)' },
      h('table', { class: 'data wi-totals' },
        h('caption', { class: 'sr-only' }, `Totals of ${name}, in force and what if`),
        h('thead', null, h('tr', null, ['', 'In force', 'What if', 'Difference'].map((t, i) => h('th', { scope: 'col', class: i ? 'num' : null }, i ? t : h('span', { class: 'sr-only' }, 'Figure'))))),
        h('tbody', null, figures.map(([key, heading, kind, better]) => {
          const diff = whatIfDifference(kind, nowT[key], thenT[key], currency);
          const gain = (diff.value ?? 0) * better;
          return h('tr', { dataset: { figure: key } },
            h('th', { scope: 'row' }, heading),
            cell(kind, nowT[key], 'in_force'),
            cell(kind, thenT[key], 'what_if'),
            h('td', { class: ['num', gain > 0 && 'better', gain < 0 && 'worse'], dataset: { col: 'difference', value: diff.value ?? '' } }, diff.text));
        }))));
    const perNight = h('div', { class: 'table-wrap ins-numbers-wrap', tabindex: '0', role: 'region', 'aria-label': 'What if, night by night (table)' },
      h('table', { class: 'data wi-nights' },
        h('caption', { class: 'sr-only' }, 'What if, night by night'),
        h('thead', null, h('tr', null, ['Night', 'Sold in force', 'Sold what if', 'Walks at worst (what if)'].map((t, i) => h('th', { scope: 'col', class: i ? 'num' : null }, t)))),
        h('tbody', null, nights.map((n) => h('tr', { dataset: { night: n.date } },
          h('th', { scope: 'row', class: 'nowrap' }, fmtDayShort(n.date)),
          cell('int', n.in_force?.room_nights_sold, 'in_force'),
          cell('int', n.what_if?.room_nights_sold, 'what_if'),
          h('td', { class: 'num', dataset: { col: 'walks_worst', value: n.what_if?.walks_worst ?? '' } }, fmtInt(n.what_if?.walks_worst)))))));
    result.replaceChildren(
      h('h3', null, `${name}${span ? `, ${span}` : ''}`),
      totals,
      h('p', { class: 'wi-assumptions', dataset: { allowance: answer?.policy?.overbooking_allowance ?? '' } }, whatIfAssumptions(answer)),
      nights.length ? perNight : h('p', { class: 'empty' }, 'No night in the range.'));
  }

  return {
    section,
    setHotel(next) {
      asking += 1; // an answer about the last hotel is not this one's
      hotel = next;
      clearErrors();
      result.replaceChildren();
      const types = Array.isArray(next?.room_types) ? next.room_types : [];
      roomType.replaceChildren(...types.map((rt) => h('option', { value: String(rt.room_type_id) }, String(rt.name ?? `Room type ${rt.room_type_id}`))));
      currency = next?.currency ?? 'EUR';
      digits = minorDigits(currency);
      walkCostLabel.textContent = `Walk cost per guest (${currency}, optional)`;
      const today = hotelToday(next?.timezone);
      from.value = today;
      to.value = addDays(today, WHAT_IF_NIGHTS);
      submit.disabled = !next || types.length === 0;
      if (next && types.length === 0) formStatus.replaceChildren(h('p', { class: 'empty' }, 'This hotel has no room types yet.'));
    },
    destroy() {
      alive = false;
    },
  };
}

// ---------------------------------------------------------------------------
// The view.

export function mountInsights(root, ctx, route) {
  let alive = true;
  let hotels = null;
  let hotel = null;
  let start = null; // the hotel's today when last loaded
  let gen = 0; // a new hotel (or day): answers of older ones are dropped
  let loading = null; // the generation being loaded
  let pickup = null; // {rows, body} of the last good pickup answer
  let year = null; // the last good occupancy answer
  let pickupError = '';
  let yearError = '';
  let drawnWidth = 0;
  let missed = false; // a refresh fell while the tab was hidden
  const signatures = {};
  let pendingRoute = route;

  ctx.setTitle('Pickup & year');

  // -- Static parts -------------------------------------------------------------------
  const heading = h('h1', { tabindex: '-1' }, 'Pickup & year');
  const hotelSelect = h('select', { id: 'ins-hotel', name: 'hotel', disabled: true });
  const refreshButton = h('button', { type: 'button', class: 'ins-refresh', disabled: true }, 'Refresh');
  const hotelInfo = h('p', { class: 'hotel-info' });
  const asOf = h('p', { class: 'as-of ins-as-of' }, 'Loading…');
  const alerts = h('div', { class: 'ins-alerts' });

  const otbBox = h('div', { class: 'ins-chart-box' }, loadingNote());
  const otbCaption = h('figcaption', { class: 'ins-caption' });
  const otbTable = h('div');
  const otb = card('otb', 'On the books against a week ago',
    h('p', { class: 'hint' }, 'Rooms on the books (live holds and sold stays) for each of the next 90 nights: now, and for the same night 7 days ago. The gap is the week\u2019s pickup.'),
    h('figure', { class: 'ins-figure' }, otbBox,
      legend([['key-otb', 'On the books now'], ['key-week-ago', 'On the books a week ago']]), otbCaption),
    otbTable);

  const bookingsBox = h('div', { class: 'ins-chart-box' }, loadingNote());
  const bookingsCaption = h('figcaption', { class: 'ins-caption' });
  const countedTo = h('span', { class: 'muted' });
  const bookingsTable = h('div');
  const bookings = card('bookings', 'Bookings and cancellations of the last 7 days',
    h('p', { class: 'hint' }, 'Per night of stay over the next 90 nights: rooms booked in the last 7 days above the line, rooms cancelled in the last 7 days below it; the darker part of each bar happened in the last 24 hours.'),
    h('figure', { class: 'ins-figure' }, bookingsBox,
      legend([['key-booked-week', 'Booked, last 7 days'], ['key-booked-day', 'of which last 24 h'],
        ['key-cancelled-week', 'Cancelled, last 7 days'], ['key-cancelled-day', 'of which last 24 h']]),
      bookingsCaption),
    bookingsTable);

  const yearBox = h('div', { class: 'ins-year-scroll', tabindex: '0', role: 'region', 'aria-label': 'Occupancy heat map (scrolls sideways)' }, loadingNote());
  const yearCaption = h('figcaption', { class: 'ins-caption' });
  const yearTableBox = h('div');
  const yearSection = card('year', 'The year: occupancy per room type',
    h('p', { class: 'hint' }, 'Rooms sold (confirmed) of the rooms for sale, per room type and night, for the next 365 nights; weeks run across, Monday to Sunday down. Hover a square for its night.'),
    h('figure', { class: 'ins-figure ins-year-figure' },
      h('div', { class: 'ins-year-layout' }, yearBox,
        h('div', { class: 'ins-year-legend' }, h('h3', null, 'Occupancy'), legend(BANDS.map(([cls, text]) => [`key-${cls}`, text])))),
      yearCaption),
    yearTableBox);

  const exportButton = h('button', { type: 'button', class: 'ins-export', disabled: true }, 'Export CSV');
  const tableBox = h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': `Pickup of the next ${TABLE_NIGHTS} nights (table)` }, loadingNote());
  const tableSection = card('pickup-table', `Pickup of the next ${TABLE_NIGHTS} nights`,
    h('div', { class: 'ins-card-tools' }, exportButton,
      h('span', { class: 'hint' }, `The CSV has all ${PICKUP_NIGHTS} nights.`)),
    tableBox);

  // Demand the hotel turned away (the turnaway log): refused holds per coming night.
  const turnawayBox = h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': `Turnaways of the next ${PICKUP_NIGHTS} nights (table)` }, loadingNote());
  const turnawaySection = card('turnaways', 'Turned away',
    h('p', { class: 'hint' }, `Holds refused for the next ${PICKUP_NIGHTS} nights: a night sold out, a restriction, more guests than the room type takes, or a group block already full (general sale may still have rooms). A refused hold counts on each night it asked for.`),
    turnawayBox);

  // Another overbooking policy replayed over recorded demand (admins and auditors only).
  const whatIf = whatIfCard(ctx);

  const view = h('div', { class: 'insights-view' },
    h('div', { class: 'ins-head' }, heading, h('div', { class: 'ins-status' }, hotelInfo, asOf)),
    h('div', { class: 'toolbar ins-toolbar' }, field('Hotel', hotelSelect, 'field-hotel'), refreshButton,
      h('span', { class: 'hint ins-every' }, 'Refreshes every 60 s.')),
    alerts,
    h('div', { class: 'ins-grid' }, otb, bookings, yearSection, tableSection, turnawaySection, whatIf?.section));
  root.append(view);

  hotelSelect.addEventListener('change', () => {
    const hash = `#/insights/${encodeURIComponent(hotelSelect.value)}`;
    if (location.hash !== hash) location.hash = hash; // the router calls update()
  });
  refreshButton.addEventListener('click', () => load({ announce: true }));
  exportButton.addEventListener('click', exportCsv);

  const timer = setInterval(() => {
    if (document.hidden) missed = true;
    else load();
  }, REFRESH_MS);
  const onVisibility = () => {
    if (!document.hidden && missed) {
      missed = false;
      load();
    }
  };
  document.addEventListener('visibilitychange', onVisibility);
  // Charts are drawn at their box's width: redraw when it changes.
  let frameRequest = 0;
  const resizer = typeof ResizeObserver === 'function' ? new ResizeObserver(() => {
    cancelAnimationFrame(frameRequest);
    frameRequest = requestAnimationFrame(() => {
      if (alive && pickup && chartWidth() !== drawnWidth) drawCharts();
    });
  }) : null;
  resizer?.observe(otbBox);

  loadHotels();

  // -- Hotels and the route -----------------------------------------------------------
  async function loadHotels() {
    alerts.replaceChildren();
    try {
      hotels = await ctx.hotels();
    } catch (e) {
      if (!alive) return;
      setText(asOf, '');
      alerts.replaceChildren(hotelsError(ctx, e, loadHotels));
      showEverywhere(null);
      return;
    }
    if (!alive) return;
    hotelSelect.replaceChildren(...hotels.map((x) =>
      hotelOption(x)));
    hotelSelect.disabled = hotels.length === 0;
    const current = ctx.route();
    apply(current.seg[0] === 'insights' ? current : pendingRoute);
  }

  /** Puts `node` (or nothing) in every section's box: before a first answer. */
  function showEverywhere(make) {
    for (const box of [otbBox, bookingsBox, yearBox, tableBox]) {
      delete box.dataset.error;
      box.replaceChildren(...(make ? [make()] : []));
    }
    for (const el of [otbCaption, bookingsCaption, yearCaption, otbTable, bookingsTable, yearTableBox]) el.replaceChildren();
  }

  function apply(r) {
    pendingRoute = r;
    if (!hotels) return;
    if (hotels.length === 0) {
      setText(asOf, '');
      showEverywhere(() => h('p', { class: 'empty' }, 'No hotels yet.'));
      return;
    }
    const asked = r.seg[1] != null ? Number(r.seg[1]) : hotels[0].hotel_id;
    const found = hotels.find((x) => x.hotel_id === asked);
    if (!found) {
      gen += 1;
      hotel = null;
      pickup = null;
      year = null;
      hotelSelect.value = '';
      whatIf?.setHotel(null);
      refreshButton.disabled = true;
      exportButton.disabled = true;
      setText(asOf, '');
      setText(hotelInfo, '');
      showEverywhere(null);
      alerts.replaceChildren(errorNote(`unknown_hotel: no hotel #${r.seg[1]} (pick one above).`));
      return;
    }
    const canonical = `#/insights/${found.hotel_id}`;
    if (location.hash !== canonical) history.replaceState(null, '', canonical);
    if (hotel && found.hotel_id === hotel.hotel_id) return;
    hotel = found;
    hotelSelect.value = String(hotel.hotel_id);
    whatIf?.setHotel(hotel);
    ctx.setTitle(`Pickup & year · ${hotel.name}`);
    start = null;
    load();
  }

  // -- Loading --------------------------------------------------------------------------
  async function load({ announce = false } = {}) {
    if (!alive || !hotel) return;
    const today = hotelToday(hotel.timezone);
    if (today !== start) {
      // A new hotel, or midnight passed at the hotel: new ranges, new page.
      gen += 1;
      start = today;
      pickup = null;
      year = null;
      pickupError = '';
      yearError = '';
      for (const k of Object.keys(signatures)) delete signatures[k];
      alerts.replaceChildren();
      delete alerts.dataset.key;
      setText(asOf, 'Loading…');
      asOf.classList.remove('stale');
      exportButton.disabled = true;
      showEverywhere(() => loadingNote());
      const last = addDays(start, PICKUP_NIGHTS - 1);
      setText(hotelInfo, `${hotel.name}, ${hotel.city} · today there ${fmtDayShort(start)} · next ${PICKUP_NIGHTS} nights to ${fmtDayShort(last)}, the year to ${dayWithYear(addDays(start, YEAR_NIGHTS - 1))}`);
    } else if (loading === gen) {
      return; // already asking
    }
    const mine = gen;
    const from = start;
    loading = mine;
    refreshButton.disabled = true;
    const ask = (path, nights) => ctx.api(`/v1/hotels/${hotel.hotel_id}/${path}?start_date=${from}&end_date=${addDays(from, nights)}`);
    const turned = ctx.api(`/v1/hotels/${hotel.hotel_id}/turnaways?from=${from}&to=${addDays(from, PICKUP_NIGHTS)}`);
    const [p, o, t] = await Promise.allSettled([ask('pickup', PICKUP_NIGHTS), ask('occupancy', YEAR_NIGHTS), turned]);
    if (!alive || mine !== gen) return;
    if (t.status === 'fulfilled') showTurnaways(t.value);
    else boxError(turnawayBox, `Could not load the turnaways: ${errorText(t.reason)}`);
    loading = null;
    refreshButton.disabled = false;
    if (p.status === 'fulfilled') {
      pickup = { body: p.value, rows: pickupRows(p.value, from) };
      pickupError = '';
      showPickup();
    } else {
      pickupError = `Could not load the pickup: ${errorText(p.reason)}`;
      if (!pickup) for (const box of [otbBox, bookingsBox, tableBox]) boxError(box, pickupError);
    }
    if (o.status === 'fulfilled') {
      year = o.value;
      yearError = '';
      showYear();
    } else {
      yearError = `Could not load the occupancy: ${errorText(o.reason)}`;
      if (!year) boxError(yearBox, yearError);
    }
    showStatus(p.status === 'fulfilled' ? p.value : null, o.status === 'fulfilled' ? o.value : null);
    if (announce) ctx.announce(pickupError || yearError ? 'Refresh failed: see the errors on the page.' : `Pickup and year of ${hotel.name} refreshed.`);
  }

  /** The as-of line, and errors of a refresh that leaves older numbers on screen. */
  function showStatus(p, o) {
    const text = asOfText(p, o);
    if (text) setText(asOf, text);
    else if (!pickup && !year) setText(asOf, 'Not loaded: no time to show.');
    asOf.dataset.pickupAsOf = p ? String(p.as_of ?? 'none') : asOf.dataset.pickupAsOf ?? '';
    asOf.dataset.occupancyAsOf = o ? String(o.as_of ?? 'none') : asOf.dataset.occupancyAsOf ?? '';
    const neverRan = (p && !p.as_of) || (o && !o.as_of);
    const stale = [pickup && pickupError, year && yearError].filter(Boolean);
    asOf.classList.toggle('stale', Boolean(neverRan || stale.length));
    const key = stale.join('|');
    if (alerts.dataset.key !== key) {
      alerts.dataset.key = key;
      alerts.replaceChildren(...stale.map((t) => errorNote(`${t} (the numbers below are older)`)));
    }
  }

  /** Nights with turnaways, as a table (nights with none are left out by the API). */
  function showTurnaways(body) {
    const nights = Array.isArray(body?.nights) ? body.nights : [];
    const sig = JSON.stringify(nights);
    if (signatures.turnaways === sig) return;
    signatures.turnaways = sig;
    if (!nights.length) {
      turnawayBox.replaceChildren(h('p', { class: 'empty' }, `No hold was turned away for the next ${PICKUP_NIGHTS} nights.`));
      return;
    }
    const headings = ['Night', 'Requests', 'Rooms', 'Sold out', 'Restricted', 'Too many guests', 'Block full'];
    turnawayBox.replaceChildren(h('table', { class: 'data turnaways-table' },
      h('caption', { class: 'sr-only' }, 'Holds turned away per night'),
      h('thead', null, h('tr', null, headings.map((t, i) => h('th', { scope: 'col', class: i ? 'num' : null }, t)))),
      h('tbody', null, nights.map((n) => h('tr', { dataset: { night: n.date } },
        h('th', { scope: 'row', class: 'nowrap' }, fmtDayShort(n.date)),
        [['requests', n.requests], ['rooms', n.rooms], ['sold_out', n.by_reason?.sold_out],
          ['restricted', n.by_reason?.restricted], ['occupancy', n.by_reason?.occupancy],
          ['block_exhausted', n.by_reason?.block_exhausted]]
          .map(([field, v]) => h('td', { class: 'num', dataset: { field } }, String(v ?? '—'))))))));
  }

  // -- Drawing --------------------------------------------------------------------------
  function chartWidth() {
    const w = Math.round(otbBox.clientWidth || 0);
    return Math.min(Math.max(w || 640, 300), 1200);
  }

  function showPickup() {
    const sig = JSON.stringify(pickup.rows);
    exportButton.disabled = false;
    // The last 24 h and 7 days end at the answer's `now`: it moves at every refresh.
    setText(countedTo, pickup.body?.now ? ` · counted to ${fmtTime(pickup.body.now)}` : '');
    if (signatures.pickup === sig) return;
    signatures.pickup = sig;
    drawCharts();
    const rows = pickup.rows;
    const t = pickupTotals(rows);
    otbCaption.replaceChildren(h('span', { dataset: { onTheBooks: t.on_the_books, weekAgo: t.on_the_books_week_ago, pickup: t.pickup } },
      `On the books: ${fmtInt(t.on_the_books)} room-nights; a week ago: ${fmtInt(t.on_the_books_week_ago)}; pickup ${signed(t.pickup)}`));
    bookingsCaption.replaceChildren(h('span', {
      dataset: { bookedWeek: t.booked_last_week, bookedDay: t.booked_last_day, cancelledWeek: t.cancelled_last_week, cancelledDay: t.cancelled_last_day },
    }, `Booked in the last 7 days: ${fmtInt(t.booked_last_week)} room-nights (${fmtInt(t.booked_last_day)} in the last 24 h); cancelled: ${fmtInt(t.cancelled_last_week)} (${fmtInt(t.cancelled_last_day)} in the last 24 h); net ${signed(t.booked_last_week - t.cancelled_last_week)}`),
    countedTo);
    keepOpen(otbTable, numbersTable('On the books against a week ago', ['Night', 'On the books', 'A week ago', 'Change'],
      rows.map((r) => [r.date, fmtInt(r.on_the_books), fmtInt(r.on_the_books_week_ago), signed(r.on_the_books - r.on_the_books_week_ago)])));
    keepOpen(bookingsTable, numbersTable('Bookings and cancellations of the last 7 days', ['Night', 'Booked 7 d', 'of which 24 h', 'Cancelled 7 d', 'of which 24 h'],
      rows.map((r) => [r.date, fmtInt(r.booked_last_week), fmtInt(r.booked_last_day), fmtInt(r.cancelled_last_week), fmtInt(r.cancelled_last_day)])));
    delete tableBox.dataset.error;
    tableBox.replaceChildren(pickupTable(rows.slice(0, TABLE_NIGHTS)));
  }

  /** A section's error before it has shown numbers (said once, not at every refresh). */
  function boxError(box, text) {
    if (box.dataset.error === text) return;
    box.dataset.error = text;
    box.replaceChildren(errorNote(text));
  }

  function drawCharts() {
    const width = chartWidth();
    drawnWidth = width;
    delete otbBox.dataset.error;
    delete bookingsBox.dataset.error;
    otbBox.replaceChildren(otbChart(pickup.rows, width));
    bookingsBox.replaceChildren(bookingsChart(pickup.rows, width));
  }

  function pickupTable(rows) {
    return h('table', { class: 'data ins-pickup' },
      h('caption', { class: 'sr-only' }, `Pickup of the next ${TABLE_NIGHTS} nights`),
      h('thead', null, h('tr', null,
        h('th', { scope: 'col' }, 'Night'),
        PICKUP_FIELDS.map((f) => h('th', { scope: 'col', class: 'num' }, FIELD_HEADINGS[f])),
        h('th', { scope: 'col', class: 'num' }, 'Change'))),
      h('tbody', null, rows.map((r) => {
        const change = r.on_the_books - r.on_the_books_week_ago;
        return h('tr', { dataset: { night: r.date } },
          h('th', { scope: 'row', class: 'nowrap' }, fmtDayShort(r.date)),
          PICKUP_FIELDS.map((f) => h('td', { class: ['num', r[f] === 0 && 'zero'], dataset: { field: f } }, String(r[f]))),
          h('td', { class: ['num', change > 0 && 'up', change < 0 && 'down'], dataset: { field: 'change' } }, signed(change)));
      })));
  }

  function showYear() {
    const types = (Array.isArray(year?.room_types) ? year.room_types : []).map((rt) => ({
      room_type_id: rt.room_type_id,
      name: String(rt.name ?? `Room type ${rt.room_type_id}`),
      totals: rt.totals,
      nights: Array.isArray(rt.nights) ? rt.nights : [],
    }));
    const sig = JSON.stringify(types);
    if (signatures.year === sig) return;
    signatures.year = sig;
    delete yearBox.dataset.error;
    if (types.length === 0) {
      yearBox.replaceChildren(h('p', { class: 'empty' }, 'This hotel has no room types yet.'));
      yearCaption.replaceChildren();
      yearTableBox.replaceChildren();
      return;
    }
    const { svg, summaries } = yearMap(types, start);
    const scrolled = yearBox.scrollLeft;
    yearBox.replaceChildren(svg);
    yearBox.scrollLeft = scrolled;
    yearCaption.replaceChildren(h('ul', { class: 'ins-year-summary' }, summaries.map((t) => h('li', null, t))));
    keepOpen(yearTableBox, yearTable(types, start));
  }

  function exportCsv() {
    if (!pickup || !hotel) return;
    const rows = [['date', ...PICKUP_FIELDS], ...pickup.rows.map((r) => [r.date, ...PICKUP_FIELDS.map((f) => r[f])])];
    downloadCsv(`pickup-${hotel.hotel_id}-${start}.csv`, rows);
    ctx.announce(`Exported ${pickup.rows.length} nights of pickup as CSV.`);
  }

  return {
    update(next) {
      if (next.seg[0] !== 'insights') return false;
      apply(next);
      return true;
    },
    destroy() {
      alive = false;
      whatIf?.destroy();
      clearInterval(timer);
      cancelAnimationFrame(frameRequest);
      resizer?.disconnect();
      document.removeEventListener('visibilitychange', onVisibility);
    },
  };
}
