// Small helpers shared by the console's views: DOM building, formatting, dates.

/** Properties set as properties (not attributes) by `h`. */
const PROPS = new Set(['value', 'checked', 'disabled', 'hidden', 'selected', 'required', 'multiple']);

/**
 * Build an element: `h('button', {type: 'button', onclick: fn}, 'Save')`.
 * Attributes whose value is null, undefined or false are left out; `true` sets an
 * empty attribute. Children may be nodes, strings, numbers, arrays, or null (skipped).
 * Text always goes in as text nodes: never HTML.
 */
export function h(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** As `h`, for SVG elements. */
export function s(tag, attrs, ...children) {
  return fill(document.createElementNS('http://www.w3.org/2000/svg', tag), attrs, children);
}

function fill(el, attrs, children) {
  if (attrs) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value == null || value === false) continue;
      if (key === 'class') {
        const names = Array.isArray(value) ? value.filter(Boolean).join(' ') : value;
        if (names) el.setAttribute('class', names);
      } else if (key === 'dataset') {
        for (const [k, v] of Object.entries(value)) if (v != null) el.dataset[k] = String(v);
      } else if (key.startsWith('on') && typeof value === 'function') {
        el.addEventListener(key.slice(2).toLowerCase(), value);
      } else if (PROPS.has(key) && key in el) {
        el[key] = value;
      } else {
        el.setAttribute(key, value === true ? '' : String(value));
      }
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child == null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.append(child);
    else el.append(document.createTextNode(String(child)));
  }
}

/** A labelled form field: `<div class="field"><label for=id>text</label>input</div>`. */
export function field(labelText, input, extraClass) {
  if (!input.id) throw new Error('field(): the input needs an id');
  return h('div', { class: ['field', extraClass] }, h('label', { for: input.id }, labelText), input);
}

/** Text for screen readers only. */
export function srOnly(text) {
  return h('span', { class: 'sr-only' }, text);
}

// ---------------------------------------------------------------------------
// Numbers and money (integer cents).

const INT = new Intl.NumberFormat('en-US');
const MONEY = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });

export function fmtInt(n) {
  return n == null || Number.isNaN(Number(n)) ? '—' : INT.format(n);
}

const CURRENCIES = new Map();

/** The formatter of an ISO 4217 currency (`EUR`), made once. */
function currencyFormat(code) {
  if (!CURRENCIES.has(code)) {
    let f = null;
    try { f = new Intl.NumberFormat('en-US', { style: 'currency', currency: code }); } catch { f = null; }
    CURRENCIES.set(code, f);
  }
  return CURRENCIES.get(code);
}

/** How many digits a currency's minor unit has (amounts are integers of it): 2 for EUR, 0 for JPY. */
export function minorDigits(code) {
  return code ? currencyFormat(code)?.resolvedOptions().maximumFractionDigits ?? 2 : 2;
}

/** A rate in the grid, in units of a currency with `digits` minor digits: `180` when whole, else `180.50`; '' for null. */
export function fmtRate(cents, digits = 2) {
  if (cents == null) return '';
  const unit = 10 ** digits;
  return cents % unit === 0 ? String(cents / unit) : (cents / unit).toFixed(digits);
}

/** Money with its currency (`CHF 1,486.00`, `¥48,050`), or with two decimals when none is known: `1,486.00`. */
export function fmtMoney(cents, currency) {
  if (cents == null) return '—';
  const f = currency ? currencyFormat(currency) : null;
  if (!f) return MONEY.format(cents / 100);
  return f.format(cents / 10 ** f.resolvedOptions().maximumFractionDigits);
}

/** `180`, `180.5`, `180.50` → minor units; NaN when not a non-negative amount with at most `digits` decimals. */
export function parseMoney(text, digits = 2) {
  const t = String(text).trim();
  const m = digits === 0 ? /^(\d{1,14})()$/.exec(t) : new RegExp(`^(\\d{1,12})(?:[.,](\\d{1,${digits}}))?$`).exec(t);
  if (!m) return NaN;
  return Number(m[1]) * 10 ** digits + Number((m[2] ?? '').padEnd(digits, '0') || '0');
}

/** A whole number from an input, or NaN. */
export function parseIntStrict(text) {
  const t = String(text).trim();
  return /^\d{1,9}$/.test(t) ? Number(t) : NaN;
}

/**
 * A change typed into a bulk-edit field, as staff write them: empty keeps each night's
 * value, `45` sets it, `+2` or `-3` adds to each night's own value, `+10%` or `-10%`
 * scales it (rounded to a whole room, or to the cent). `money` reads amounts as money
 * (`-5` is five units of money, in cents). `null` when the text is none of these.
 */
export function parseChange(text, money = false, digits = 2) {
  const t = String(text ?? '').replace(/\u2212/g, '-').replace(/\s+/g, '');
  if (t === '') return { kind: 'keep' };
  const pct = /^([+-])(\d{1,3}(?:[.,]\d{1,2})?)%$/.exec(t);
  if (pct) {
    const v = Number(pct[2].replace(',', '.'));
    return { kind: 'pct', value: pct[1] === '-' ? -v : v };
  }
  const sign = t[0] === '+' || t[0] === '-' ? t[0] : '';
  const n = money ? parseMoney(sign ? t.slice(1) : t, digits) : parseIntStrict(sign ? t.slice(1) : t);
  if (Number.isNaN(n)) return null;
  if (!sign) return { kind: 'set', value: n };
  return { kind: 'add', value: sign === '-' ? -n : n };
}

/** A night's value after `change` (see parseChange); `null` when there is nothing to change. */
export function applyChange(change, before) {
  switch (change?.kind) {
    case 'set': return change.value;
    case 'add': return before == null ? null : before + change.value;
    case 'pct': return before == null ? null : Math.round((before * (100 + change.value)) / 100);
    default: return before;
  }
}

export function plural(n, one, many) {
  return `${fmtInt(n)} ${n === 1 ? one : many}`;
}

/** Seconds as `42 s`, `3 min 5 s`, `2 h 4 min`. */
export function fmtSeconds(sec) {
  if (sec == null || Number.isNaN(sec)) return '—';
  const v = Math.round(sec);
  if (Math.abs(v) < 60) return `${Number.isInteger(sec) ? sec : sec.toFixed(1)} s`;
  if (v < 3600) return `${Math.floor(v / 60)} min ${v % 60} s`;
  return `${Math.floor(v / 3600)} h ${Math.floor((v % 3600) / 60)} min`;
}

// ---------------------------------------------------------------------------
// Dates: nights are `YYYY-MM-DD` strings, handled in UTC to stay free of time zones.

const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const WEEKDAYS_LONG = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const MONTHS_LONG = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August',
  'September', 'October', 'November', 'December'];

/** `YYYY-MM-DD` naming a day that exists (not 2027-02-30). */
export function isDate(text) {
  if (typeof text !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(text)) return false;
  const day = new Date(`${text}T00:00:00Z`);
  return !Number.isNaN(day.getTime()) && day.toISOString().slice(0, 10) === text;
}

export function isMonth(text) {
  return typeof text === 'string' && /^\d{4}-(0[1-9]|1[0-2])$/.test(text);
}

function utc(date) {
  const [y, m, d] = date.split('-').map(Number);
  return new Date(Date.UTC(y, m - 1, d));
}

function iso(dt) {
  return dt.toISOString().slice(0, 10);
}

export function addDays(date, n) {
  const dt = utc(date);
  dt.setUTCDate(dt.getUTCDate() + n);
  return iso(dt);
}

/** Every night from `start` (included) to `end` (excluded). */
export function nightsBetween(start, end) {
  const out = [];
  for (let d = start; d < end && out.length < 400; d = addDays(d, 1)) out.push(d);
  return out;
}

export function weekday(date) {
  return WEEKDAYS[utc(date).getUTCDay()];
}

export function isWeekend(date) {
  const day = utc(date).getUTCDay();
  return day === 0 || day === 6;
}

export function dayOfMonth(date) {
  return utc(date).getUTCDate();
}

/** `Tue 1 Jun` */
export function fmtDayShort(date) {
  const dt = utc(date);
  return `${WEEKDAYS[dt.getUTCDay()]} ${dt.getUTCDate()} ${MONTHS[dt.getUTCMonth()]}`;
}

/** `Tuesday 1 June 2027` */
export function fmtDayLong(date) {
  const dt = utc(date);
  return `${WEEKDAYS_LONG[dt.getUTCDay()]} ${dt.getUTCDate()} ${MONTHS_LONG[dt.getUTCMonth()]} ${dt.getUTCFullYear()}`;
}

/** `June 2027` */
export function fmtMonth(month) {
  const [y, m] = month.split('-').map(Number);
  return `${MONTHS_LONG[m - 1]} ${y}`;
}

export function currentMonth() {
  const now = new Date();
  return `${now.getFullYear()}-${String(now.getMonth() + 1).padStart(2, '0')}`;
}

export function shiftMonth(month, delta) {
  const [y, m] = month.split('-').map(Number);
  const dt = new Date(Date.UTC(y, m - 1 + delta, 1));
  return iso(dt).slice(0, 7);
}

const pad = (n) => String(n).padStart(2, '0');

/** An instant as local `10:22:07`. */
export function fmtTime(instant) {
  const dt = new Date(instant);
  if (Number.isNaN(dt.getTime())) return String(instant ?? '—');
  return `${pad(dt.getHours())}:${pad(dt.getMinutes())}:${pad(dt.getSeconds())}`;
}

/** An instant as local `10:22`. */
export function fmtHourMinute(instant) {
  const dt = new Date(instant);
  if (Number.isNaN(dt.getTime())) return '';
  return `${pad(dt.getHours())}:${pad(dt.getMinutes())}`;
}

/** An instant as local `2027-05-01 10:22:07`; '—' for none. */
export function fmtDateTime(instant) {
  if (instant == null || instant === '') return '—';
  const dt = new Date(instant);
  if (Number.isNaN(dt.getTime())) return String(instant);
  return `${dt.getFullYear()}-${pad(dt.getMonth() + 1)}-${pad(dt.getDate())} ${fmtTime(dt)}`;
}

// ---------------------------------------------------------------------------

/** A random UUID, also where `crypto.randomUUID` is missing (plain-HTTP hosts). */
export function uuid() {
  if (globalThis.crypto?.randomUUID) {
    try {
      return crypto.randomUUID();
    } catch {
      // not a secure context: fall through
    }
  }
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const hex = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Replace an element's text only when it changed (no needless live-region chatter). */
export function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
}

/** Crockford's base 32, as the server prints references (no I, L, O, U). */
const REFERENCE_ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/**
 * A reservation's short reference from its id, by the server's rule: the id's last 40
 * bits (its last 10 hex digits) in Crockford's base 32. Lets a page name a reservation
 * before its answer arrives; `null` for what is not an id.
 */
export function referenceOf(id) {
  const hex = String(id ?? '').replace(/-/g, '');
  if (!/^[0-9a-fA-F]{32}$/.test(hex)) return null;
  let bits = BigInt(`0x${hex.slice(22)}`);
  let out = '';
  for (let i = 0; i < 8; i += 1) {
    out = REFERENCE_ALPHABET[Number(bits & 31n)] + out;
    bits >>= 5n;
  }
  return out;
}

/** Today's date (`YYYY-MM-DD`) at a hotel, in its time zone (the browser's if unknown). */
export function hotelToday(timeZone) {
  try {
    // en-CA writes dates as YYYY-MM-DD.
    return new Intl.DateTimeFormat('en-CA', { timeZone: timeZone || undefined, year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date());
  } catch {
    return new Date().toISOString().slice(0, 10);
  }
}

/** One CSV field: quoted when it must be, and text that a spreadsheet would run as a
 * formula (`=`, `+`, `-`, `@` first) kept as text. Numbers are written as they are. */
function csvField(value) {
  if (value == null) return '';
  if (typeof value === 'number') return Number.isFinite(value) ? String(value) : '';
  let text = String(value);
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n']/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** Rows (arrays) as CSV text, with CRLF line ends (RFC 4180). */
export function toCsv(rows) {
  return rows.map((row) => row.map(csvField).join(',')).join('\r\n') + '\r\n';
}

/** Offers `rows` as a CSV file named `name` for download. */
export function downloadCsv(name, rows) {
  const blob = new Blob([toCsv(rows)], { type: 'text/csv;charset=utf-8' });
  const url = URL.createObjectURL(blob);
  const a = h('a', { href: url, download: name, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** A hotel as the views' pickers name it: `Hotel Tejo — Lisbon (#812)`. */
export function hotelOption(hotel) {
  return h('option', { value: String(hotel.hotel_id) }, `${hotel.name} — ${hotel.city} (#${hotel.hotel_id})`);
}
