// Front desk (`#/today`, `#/today/<hotel>?date=YYYY-MM-DD`): a hotel's arrivals,
// departures and guests in house on one day (the hotel's today unless another is
// chosen), from the reservations read model, refreshed every 30 s. Staff who work stays
// check guests in and out and mark no-shows from the rows; a guest search, sorting,
// paging and a CSV export work on the lists as loaded.

import { errorText, hotelsError } from './api.js';
import { h, field, fmtInt, fmtTime, fmtDayLong, plural, uuid, isDate, referenceOf, hotelToday, downloadCsv, setText, hotelOption } from './util.js';

const REFRESH_MS = 30_000;
const PAGE_SIZE = 25;
/** A status shown over the read model's after an action, until the model agrees (or this long). */
const OVERRIDE_MS = 120_000;
const SEALED = new Set(['[sealed]', '']);
const ERASED = '[erased]';
const HIDDEN_TEXT = 'hidden (personal data)';

/** The three lists: how each is asked for and which statuses it shows. */
const LISTS = [
  {
    key: 'arrivals',
    title: 'Arrivals',
    query: (d) => `arrival_date=${d}`,
    keep: (s) => !['expired', 'declined', 'cancelled'].includes(s),
    empty: (day) => `No arrivals on ${day}.`,
    actions: { confirmed: ['check-in', 'no-show'] },
  },
  {
    key: 'departures',
    title: 'Departures',
    query: (d) => `departure_date=${d}`,
    keep: (s) => ['confirmed', 'checked_in', 'checked_out'].includes(s),
    empty: (day) => `No departures on ${day}.`,
    actions: { checked_in: ['check-out'] },
  },
  {
    key: 'in_house',
    title: 'In house',
    query: (d) => `date=${d}&status=checked_in`,
    keep: () => true,
    empty: (day) => `Nobody in house on the night of ${day}.`,
    actions: { checked_in: ['check-out'] },
  },
];

const ACTION_TEXT = { 'check-in': 'Check in', 'check-out': 'Check out', 'no-show': 'No-show' };
const ACTION_DONE = { 'check-in': 'Checked in', 'check-out': 'Checked out', 'no-show': 'Marked as no-show' };
const ACTION_STATUS = { 'check-in': 'checked_in', 'check-out': 'checked_out', 'no-show': 'no_show' };

const CSV_HEADER = ['list', 'reference', 'reservation_id', 'guest_name', 'guest_email', 'room_types', 'rooms', 'start_date', 'end_date', 'status'];

function statusBadge(status) {
  return h('span', { class: ['badge', `st-${status}`], dataset: { status } }, String(status).replace(/_/g, ' '));
}

function referenceText(r) {
  return String(r.reference ?? referenceOf(r.reservation_id) ?? r.reservation_id);
}

/** The guest as this role may see them: `{name, email}` (text), or `{hidden}` / `{erased}`. */
function guestOf(r, seesGuests) {
  const g = r.guest && typeof r.guest === 'object' ? r.guest : {};
  const name = typeof g.name === 'string' ? g.name : '';
  const email = typeof g.email === 'string' ? g.email : '';
  if (name === ERASED || email === ERASED) return { erased: true, name: '', email: '' };
  if (!seesGuests || SEALED.has(name)) return { hidden: true, name: '', email: '' };
  return { name, email: SEALED.has(email) ? '' : email };
}

function roomTypeName(hotel, id) {
  const rt = hotel?.room_types?.find((x) => x.room_type_id === id);
  return rt ? String(rt.name) : `#${id}`;
}

/** `King`, or `King × 1, Twin × 2` for a reservation of several room types. */
function roomTypesText(hotel, r) {
  const lines = Array.isArray(r.lines) && r.lines.length > 1 ? r.lines : null;
  if (!lines) return roomTypeName(hotel, r.room_type_id);
  return lines.map((l) => `${roomTypeName(hotel, l.room_type_id)} × ${fmtInt(l.rooms)}`).join(', ');
}

function nightsOf(r) {
  if (Number.isFinite(r.nights)) return r.nights;
  const ms = Date.parse(`${r.end_date}T00:00:00Z`) - Date.parse(`${r.start_date}T00:00:00Z`);
  return Number.isFinite(ms) ? Math.round(ms / 86_400_000) : 0;
}

const collator = new Intl.Collator('en', { sensitivity: 'base', numeric: true });

/** The sortable columns: their header and how two rows compare. */
const SORTS = {
  reference: (a, b) => collator.compare(a.reference, b.reference),
  guest: (a, b) => collator.compare(a.guest.name, b.guest.name),
  room_type: (a, b) => collator.compare(a.roomTypes, b.roomTypes),
  nights: (a, b) => a.nights - b.nights || collator.compare(a.r.start_date, b.r.start_date),
};
const SORT_NAMES = { reference: 'reference', guest: 'guest', room_type: 'room type', nights: 'nights' };

export function mountFrontDesk(root, ctx, firstRoute) {
  const canWork = ctx.can.workStays;
  const seesGuests = ctx.can.seeGuests;
  let alive = true;
  let hotels = null; // null until loaded
  let pendingRoute = firstRoute;
  let hotel = null;
  let date = null; // the day shown
  let explicitDate = null; // the day the address names; null: the hotel's today
  let gen = 0; // bumped when the hotel or day changes: older answers are dropped
  let timer = null;
  let inFlight = false;
  let again = false;
  let loaded = false;
  let asOf = undefined; // undefined: not known yet; null: the read model has not run
  let filterText = '';
  let announceNext = false; // a refresh asked for by hand says when it is done

  /** Per list: the rows as answered, its error, sort, page and what was last drawn. */
  const lists = new Map(LISTS.map((def) => [def.key, {
    def,
    raw: null,
    error: '',
    sort: seesGuests ? { key: 'guest', asc: true } : { key: 'reference', asc: true },
    page: 1,
    drawn: '',
    els: null,
  }]));
  /** Reservation ids with an action in flight. */
  const busy = new Set();
  /** `list:id` → the refusal shown next to that row (its element kept across redraws). */
  const rowErrors = new Map();
  /** id → {status, updatedAt, since}: an action's outcome the read model may not show yet. */
  const overrides = new Map();

  ctx.setTitle('Front desk');

  // -- Static page parts ----------------------------------------------------------
  const heading = h('h1', { tabindex: '-1' }, 'Front desk');
  const dayLine = h('p', { class: 'fd-day hotel-info' });
  const hotelSelect = h('select', { id: 'fd-hotel', name: 'hotel', disabled: true });
  const dateInput = h('input', { id: 'fd-date', name: 'date', type: 'date', required: true });
  const todayButton = h('button', { type: 'button', class: 'fd-today' }, 'Today');
  const refreshButton = h('button', { type: 'button', class: 'fd-refresh' }, 'Refresh');
  const exportButton = h('button', { type: 'button', class: 'fd-export', disabled: true }, 'Export CSV');
  const asOfLine = h('p', { class: 'as-of fd-as-of' }, 'Loading…');
  const alerts = h('div', { class: 'alerts' });
  const searchInfo = h('p', { role: 'status', class: 'fd-search-info' });

  let guestInput = null;
  let search;
  if (seesGuests) {
    guestInput = h('input', { id: 'fd-guest', name: 'guest', type: 'search', autocomplete: 'off', spellcheck: 'false' });
    search = h('form', { class: 'fd-search', role: 'search', 'aria-label': 'Find guests in these lists' },
      field('Guest name or e-mail', guestInput, 'field-guest'), searchInfo);
    search.addEventListener('submit', (event) => event.preventDefault());
    guestInput.addEventListener('input', () => {
      filterText = guestInput.value.trim().toLowerCase();
      for (const list of lists.values()) list.page = 1;
      renderAll();
    });
  } else {
    search = h('p', { class: 'fd-search-note muted' },
      'Searching by guest needs a role that may see personal data (front desk or admin).');
  }

  const sections = LISTS.map((def) => {
    const list = lists.get(def.key);
    const titleId = `fd-${def.key}-h`;
    const title = h('h2', { id: titleId, tabindex: '-1' }, def.title);
    const error = h('div', { class: 'fd-error' });
    const body = h('div', { class: 'fd-body' }, h('p', { class: 'loading' }, `Loading ${def.title.toLowerCase()}…`));
    const note = h('p', { class: 'fd-note muted', hidden: true });
    const pager = h('nav', { class: 'fd-pager', 'aria-label': `${def.title}: pages`, hidden: true });
    const el = h('section', { class: ['card', 'fd-list', `fd-${def.key}`], 'aria-labelledby': titleId, dataset: { list: def.key } },
      title, error, body, note, pager);
    list.els = { el, title, error, body, note, pager };
    return el;
  });

  root.append(h('div', { class: 'frontdesk' },
    h('div', { class: 'fd-head' }, heading, dayLine),
    h('div', { class: 'toolbar fd-toolbar' },
      field('Hotel', hotelSelect, 'field-hotel'),
      h('div', { class: 'fd-date-nav' }, field('Date', dateInput, 'field-date'), todayButton),
      h('div', { class: 'fd-buttons' }, refreshButton, exportButton)),
    asOfLine,
    alerts,
    search,
    h('div', { class: 'fd-lists' }, sections),
  ));

  hotelSelect.addEventListener('change', () => go(Number(hotelSelect.value), explicitDate));
  dateInput.addEventListener('change', () => {
    if (isDate(dateInput.value) && hotel) go(hotel.hotel_id, dateInput.value);
  });
  todayButton.addEventListener('click', () => {
    if (hotel) go(hotel.hotel_id, null);
  });
  refreshButton.addEventListener('click', () => refresh(true));
  exportButton.addEventListener('click', exportCsv);

  const onVisibility = () => {
    if (!document.hidden && hotel && !inFlight) poll();
  };
  document.addEventListener('visibilitychange', onVisibility);

  loadHotels();

  // -- Hotels and route -------------------------------------------------------------
  async function loadHotels() {
    alerts.replaceChildren();
    try {
      hotels = await ctx.hotels();
    } catch (e) {
      if (!alive) return;
      asOfLine.textContent = '';
      alerts.replaceChildren(hotelsError(ctx, e, loadHotels));
      for (const list of lists.values()) list.els.body.replaceChildren();
      return;
    }
    if (!alive) return;
    hotelSelect.replaceChildren(...hotels.map((x) =>
      hotelOption(x)));
    hotelSelect.disabled = hotels.length === 0;
    // The address may have moved on while the hotels loaded (its `hashchange` not run yet).
    const current = ctx.route();
    apply(current.seg[0] === 'today' ? current : pendingRoute);
  }

  function hashFor(id, day) {
    return `#/today/${id}${day ? `?date=${day}` : ''}`;
  }

  /** Show hotel `id` on `day` (null: the hotel's today), through the address. */
  function go(id, day) {
    if (id == null || Number.isNaN(id)) return;
    const target = hotels?.find((x) => x.hotel_id === id);
    const keep = day && target && day === hotelToday(target.timezone) ? null : day;
    const hash = hashFor(id, keep);
    if (location.hash !== hash) location.hash = hash; // the router calls update()
    else apply(ctx.route());
  }

  function apply(route) {
    pendingRoute = route;
    if (!hotels) return;
    if (hotels.length === 0) {
      stopPolling();
      asOfLine.textContent = '';
      alerts.replaceChildren(h('p', { class: 'empty' }, 'No hotels yet.'));
      for (const list of lists.values()) list.els.body.replaceChildren();
      return;
    }
    const asked = route.seg[1] != null ? Number(route.seg[1]) : hotels[0].hotel_id;
    const found = hotels.find((x) => x.hotel_id === asked);
    if (!found) {
      stopPolling();
      gen += 1;
      hotel = null;
      loaded = false;
      exportButton.disabled = true;
      hotelSelect.value = '';
      asOfLine.textContent = '';
      setText(dayLine, '');
      alerts.replaceChildren(h('p', { role: 'alert', class: 'error' }, `unknown_hotel: no hotel #${route.seg[1]} (pick one above).`));
      for (const list of lists.values()) {
        list.raw = null;
        list.drawn = '';
        list.els.title.textContent = list.def.title;
        list.els.body.replaceChildren();
        list.els.note.hidden = true;
        list.els.pager.hidden = true;
      }
      return;
    }
    const askedDate = route.query.get('date');
    const messages = [];
    let day = null;
    if (askedDate != null && askedDate !== '') {
      if (isDate(askedDate)) day = askedDate;
      else messages.push(`Date: "${askedDate}" in the address is not a date that exists (YYYY-MM-DD); showing today.`);
    }
    const today = hotelToday(found.timezone);
    if (day === today) day = null;
    const canonical = hashFor(found.hotel_id, day);
    if (location.hash !== canonical) history.replaceState(null, '', canonical);
    const shown = day ?? today;
    if (hotel && found.hotel_id === hotel.hotel_id && shown === date && day === explicitDate) {
      if (messages.length === 0 && alerts.querySelector('.address-error')) alerts.replaceChildren();
      return;
    }
    hotel = found;
    explicitDate = day;
    hotelSelect.value = String(hotel.hotel_id);
    alerts.replaceChildren(...messages.map((m) => h('p', { role: 'alert', class: 'error address-error' }, m)));
    showDay(shown);
  }

  /** A new hotel or day: fresh lists. */
  function showDay(day) {
    date = day;
    dateInput.value = day;
    const today = hotelToday(hotel.timezone);
    const when = day === today ? 'today' : day < today ? 'past day' : 'future day';
    setText(dayLine, `${fmtDayLong(day)} (${when}) · ${hotel.name}, ${hotel.city} · dates in ${hotel.timezone ?? 'hotel time'}`);
    todayButton.disabled = day === today;
    ctx.setTitle(`Front desk · ${hotel.name} · ${fmtDayLong(day)}`);
    gen += 1;
    loaded = false;
    asOf = undefined;
    exportButton.disabled = true;
    busy.clear();
    rowErrors.clear();
    overrides.clear();
    asOfLine.classList.remove('stale');
    asOfLine.textContent = 'Loading…';
    for (const list of lists.values()) {
      list.raw = null;
      list.error = '';
      list.page = 1;
      list.drawn = '';
      list.els.title.textContent = list.def.title;
      list.els.error.replaceChildren();
      list.els.note.hidden = true;
      list.els.pager.hidden = true;
      list.els.body.replaceChildren(h('p', { class: 'loading' }, `Loading ${list.def.title.toLowerCase()}…`));
    }
    refresh();
  }

  // -- Loading and refreshing -------------------------------------------------------
  function stopPolling() {
    clearTimeout(timer);
    timer = null;
  }

  /** Ask now (or right after the request in flight). */
  function refresh(byHand = false) {
    if (byHand) announceNext = true;
    if (inFlight) again = true;
    else poll();
  }

  async function poll() {
    stopPolling();
    if (!alive || !hotel) return;
    if (document.hidden) {
      timer = setTimeout(poll, REFRESH_MS);
      return;
    }
    // Left on today: follow the hotel's day past midnight.
    if (!explicitDate && hotelToday(hotel.timezone) !== date) {
      showDay(hotelToday(hotel.timezone));
      return;
    }
    inFlight = true;
    const mine = gen;
    const base = `/v1/reservations?hotel_id=${encodeURIComponent(hotel.hotel_id)}`;
    const answers = await Promise.allSettled(LISTS.map((def) => ctx.api(`${base}&${def.query(date)}&limit=500`)));
    inFlight = false;
    if (!alive) return;
    if (mine === gen) {
      show(answers);
      if (announceNext) {
        announceNext = false;
        ctx.announce(answers.every((a) => a.status === 'fulfilled') ? 'Lists refreshed.' : 'Some lists could not be refreshed.');
      }
    }
    if (again) {
      again = false;
      poll();
    } else {
      timer = setTimeout(poll, REFRESH_MS);
    }
  }

  function show(answers) {
    const times = [];
    let neverRan = false;
    answers.forEach((answer, i) => {
      const list = lists.get(LISTS[i].key);
      if (answer.status === 'fulfilled') {
        const body = answer.value;
        list.raw = Array.isArray(body?.reservations) ? body.reservations : [];
        list.error = '';
        if (body?.as_of) times.push(body.as_of);
        else neverRan = true;
      } else {
        const what = list.def.title.toLowerCase();
        list.error = list.raw
          ? `Could not refresh the ${what} (showing the last lists loaded): ${errorText(answer.reason)}`
          : `Could not load the ${what}: ${errorText(answer.reason)}`;
      }
    });
    if (neverRan) asOf = null;
    else if (times.length) asOf = times.sort((a, b) => Date.parse(a) - Date.parse(b))[0];
    settleOverrides();
    loaded = LISTS.some((def) => lists.get(def.key).raw);
    exportButton.disabled = !loaded;
    showAsOf(answers.some((a) => a.status === 'rejected'));
    renderAll();
  }

  function showAsOf(failed) {
    let text;
    if (asOf === undefined) text = failed ? 'The lists could not be loaded.' : 'Loading…';
    else if (asOf === null) text = 'The reservations read model has not run yet: these lists may be missing reservations.';
    else text = `Read model as of ${fmtTime(asOf)} · refreshed every 30 s`;
    asOfLine.classList.toggle('stale', failed || asOf === null);
    setText(asOfLine, text);
  }

  /** Drop the outcomes of actions the read model now shows (or has had time to). */
  function settleOverrides() {
    const now = Date.now();
    for (const [id, o] of overrides) {
      const rows = LISTS.flatMap((def) => lists.get(def.key).raw ?? []).filter((r) => r.reservation_id === id);
      const caughtUp = o.updatedAt && asOf && Date.parse(asOf) >= Date.parse(o.updatedAt);
      if (rows.some((r) => r.status === o.status) || caughtUp || now - o.since > OVERRIDE_MS) overrides.delete(id);
    }
  }

  // -- The rows as shown ------------------------------------------------------------
  /** A reservation with what the page shows of it, computed once per draw. */
  function item(r) {
    const o = overrides.get(r.reservation_id);
    const row = o ? { ...r, status: o.status } : r;
    return {
      r: row,
      id: row.reservation_id,
      status: row.status,
      reference: referenceText(row),
      guest: guestOf(row, seesGuests),
      roomTypes: roomTypesText(hotel, row),
      nights: nightsOf(row),
    };
  }

  function matches(it) {
    if (!filterText) return true;
    if (!it.guest.name && !it.guest.email) return false;
    return it.guest.name.toLowerCase().includes(filterText) || it.guest.email.toLowerCase().includes(filterText);
  }

  /** A list's rows: kept statuses, then the guest filter, sorted. */
  function rowsOf(list) {
    const all = (list.raw ?? []).map(item).filter((it) => list.def.keep(it.status));
    const shown = all.filter(matches);
    const compare = SORTS[list.sort.key];
    shown.sort((a, b) => {
      const c = compare(a, b) || collator.compare(a.reference, b.reference);
      return list.sort.asc ? c : -c;
    });
    return { all, shown };
  }

  function renderAll() {
    const total = new Set();
    const matching = new Set();
    for (const list of lists.values()) {
      const { all, shown } = renderList(list);
      for (const it of all) total.add(it.id);
      for (const it of shown) matching.add(it.id);
    }
    if (seesGuests) {
      const t = total.size;
      const m = matching.size;
      setText(searchInfo, !loaded ? '' : filterText
        ? `${fmtInt(m)} of ${plural(t, 'reservation', 'reservations')} match.`
        : `${plural(t, 'reservation', 'reservations')} on this day.`);
    }
  }

  function renderList(list) {
    const { def, els } = list;
    if (list.error) {
      if (els.error.textContent !== list.error) {
        els.error.replaceChildren(h('p', { role: 'alert', class: 'error' }, list.error));
      }
    } else {
      els.error.replaceChildren();
    }
    if (!list.raw) {
      if (list.error) els.body.replaceChildren();
      return { all: [], shown: [] };
    }
    const { all, shown } = rowsOf(list);
    const pages = Math.max(1, Math.ceil(shown.length / PAGE_SIZE));
    list.page = Math.min(Math.max(1, list.page), pages);
    const pageRows = shown.slice((list.page - 1) * PAGE_SIZE, list.page * PAGE_SIZE);

    setText(els.title, filterText ? `${def.title} (${fmtInt(shown.length)} of ${fmtInt(all.length)})` : `${def.title} (${fmtInt(all.length)})`);

    if (def.key === 'arrivals') {
      const cancelled = list.raw.map(item).filter((it) => it.status === 'cancelled').length;
      els.note.hidden = cancelled === 0;
      setText(els.note, cancelled === 0 ? '' : `${plural(cancelled, 'cancelled arrival', 'cancelled arrivals')} not shown.`);
    }

    // Drawn again only when something shown changed: a refresh that brings nothing new
    // leaves the table (and whoever is reading it) alone.
    const signature = JSON.stringify([
      pageRows.map((it) => [it.id, it.status, it.reference, it.guest, it.roomTypes, it.r.rooms, it.r.start_date, it.r.end_date,
        busy.has(it.id), rowErrors.has(`${def.key}:${it.id}`)]),
      list.page, pages, shown.length, all.length, list.sort, filterText, date,
    ]);
    if (signature === list.drawn) return { all, shown };
    list.drawn = signature;

    const focusKey = els.el.contains(document.activeElement) ? document.activeElement.dataset?.fk : null;
    if (shown.length === 0) {
      const day = fmtDayLong(date);
      els.body.replaceChildren(h('p', { class: 'empty' }, all.length === 0
        ? def.empty(day)
        : `No ${def.title.toLowerCase()} match “${guestInput?.value.trim() ?? filterText}”.`));
    } else {
      els.body.replaceChildren(h('div', { class: 'table-wrap' }, table(list, pageRows)));
    }
    renderPager(list, pages);
    if (focusKey) restoreFocus(els.el, focusKey);
    return { all, shown };
  }

  function restoreFocus(container, key) {
    const target = container.querySelector(`[data-fk="${CSS.escape(key)}"]`);
    if (target && !target.disabled) {
      target.focus();
      return;
    }
    // A pager button at the end of the pages: its sibling; an action done: the row's link.
    const [kind, listKey, id] = key.split(':');
    const fallback = kind === 'page'
      ? container.querySelector('.fd-pager button:not(:disabled)')
      : container.querySelector(`[data-fk="${CSS.escape(`ref:${listKey}:${id}`)}"]`);
    (fallback ?? container.querySelector('h2'))?.focus?.();
  }

  function columns() {
    return [
      { key: 'reference', label: 'Reference', sort: true },
      { key: 'guest', label: 'Guest', sort: seesGuests },
      { key: 'email', label: 'E-mail' },
      { key: 'room_type', label: 'Room type', sort: true },
      { key: 'rooms', label: 'Rooms', num: true },
      { key: 'nights', label: 'Nights', sort: true },
      { key: 'status', label: 'Status' },
      canWork && { key: 'actions', label: 'Actions' },
    ].filter(Boolean);
  }

  function table(list, rows) {
    const { def } = list;
    const cols = columns();
    const sorted = list.sort;
    return h('table', { class: 'data fd-table', role: 'table' },
      h('caption', { class: 'sr-only' },
        `${def.title}, ${fmtDayLong(date)}; sorted by ${SORT_NAMES[sorted.key]}, ${sorted.asc ? 'ascending' : 'descending'}`),
      h('thead', { role: 'rowgroup' }, h('tr', { role: 'row' }, cols.map((c) => headerCell(list, c)))),
      h('tbody', { role: 'rowgroup' }, rows.map((it) => row(list, it, cols))));
  }

  function headerCell(list, col) {
    const attrs = { scope: 'col', role: 'columnheader', class: [col.num && 'num', col.sort && 'sortable', `col-${col.key}`] };
    if (!col.sort) return h('th', attrs, col.label);
    const active = list.sort.key === col.key;
    if (active) attrs['aria-sort'] = list.sort.asc ? 'ascending' : 'descending';
    const button = h('button', { type: 'button', class: 'fd-sort', dataset: { fk: `sort:${list.def.key}:${col.key}`, sort: col.key } },
      col.label, h('span', { class: ['sort-mark', active && 'active'], 'aria-hidden': 'true' }, active ? (list.sort.asc ? '▲' : '▼') : '↕'));
    button.addEventListener('click', () => {
      list.sort = active ? { key: col.key, asc: !list.sort.asc } : { key: col.key, asc: true };
      list.page = 1;
      renderAll();
      ctx.announce(`${list.def.title} sorted by ${SORT_NAMES[col.key]}, ${list.sort.asc ? 'ascending' : 'descending'}.`);
    });
    return h('th', attrs, button);
  }

  function row(list, it, cols) {
    const { r } = it;
    // One wrapper per cell: a single item beside its label in the narrow layout.
    const cell = (key, label, content, cls) => h('td', { role: 'cell', class: [`col-${key}`, cls], dataset: { label } },
      Array.isArray(content) && content.length === 0 ? null : h('div', { class: 'fd-v' }, content));
    const guestCell = (text) => (it.guest.hidden
      ? h('span', { class: 'muted not-visible' }, HIDDEN_TEXT)
      : it.guest.erased ? h('span', { class: 'muted not-visible' }, 'erased') : text);
    const cells = {
      reference: () => cell('reference', 'Reference',
        h('a', { href: `#/reservations/${encodeURIComponent(it.id)}`, class: 'mono', title: it.id, dataset: { fk: `ref:${list.def.key}:${it.id}` } }, it.reference)),
      guest: () => cell('guest', 'Guest', guestCell(it.guest.name || '—')),
      email: () => cell('email', 'E-mail', guestCell(it.guest.email || '—'), 'fd-email'),
      room_type: () => cell('room_type', 'Room type', it.roomTypes),
      rooms: () => cell('rooms', 'Rooms', fmtInt(r.rooms), 'num'),
      nights: () => cell('nights', 'Nights', [
        h('span', { class: 'nowrap' }, `${r.start_date} → ${r.end_date}`), ' ',
        h('span', { class: 'muted nowrap' }, `(${plural(it.nights, 'night', 'nights')})`)]),
      status: () => cell('status', 'Status', statusBadge(it.status)),
      actions: () => cell('actions', 'Actions', actionsOf(list, it), 'fd-actions'),
    };
    return h('tr', { role: 'row', dataset: { reservation: it.id, status: it.status } }, cols.map((c) => cells[c.key]()));
  }

  function actionsOf(list, it) {
    const kinds = list.def.actions[it.status] ?? [];
    const out = [];
    if (kinds.length) {
      out.push(h('div', { class: 'fd-action-buttons' }, kinds.map((kind) => {
        const b = h('button', {
          type: 'button',
          class: [`act-${kind}`, kind === 'no-show' ? 'danger' : 'primary'],
          'aria-label': `${ACTION_TEXT[kind]} ${it.reference}`,
          disabled: busy.has(it.id),
          dataset: { fk: `act:${list.def.key}:${it.id}:${kind}`, action: kind },
        }, ACTION_TEXT[kind]);
        b.addEventListener('click', () => act(list, it, kind));
        return b;
      })));
    }
    const error = rowErrors.get(`${list.def.key}:${it.id}`);
    if (error) out.push(error);
    return out;
  }

  function renderPager(list, pages) {
    const { pager } = list.els;
    if (pages <= 1) {
      pager.hidden = true;
      pager.replaceChildren();
      return;
    }
    const move = (delta) => {
      list.page += delta;
      renderAll();
      ctx.announce(`${list.def.title}: page ${list.page} of ${pages}.`);
    };
    const prev = h('button', { type: 'button', class: 'fd-prev', disabled: list.page <= 1, dataset: { fk: `page:${list.def.key}:prev` } }, 'Previous');
    const next = h('button', { type: 'button', class: 'fd-next', disabled: list.page >= pages, dataset: { fk: `page:${list.def.key}:next` } }, 'Next');
    prev.addEventListener('click', () => move(-1));
    next.addEventListener('click', () => move(1));
    pager.replaceChildren(prev, h('span', { class: 'fd-page' }, `Page ${list.page} of ${pages}`), next);
    pager.hidden = false;
  }

  // -- Staff actions ----------------------------------------------------------------
  async function act(list, it, kind) {
    if (busy.has(it.id)) return;
    const errorKey = `${list.def.key}:${it.id}`;
    const focusKey = `act:${list.def.key}:${it.id}:${kind}`;
    const hadFocus = document.activeElement?.dataset?.fk === focusKey;
    // Back to the button (refused) or the row's link (done), unless focus moved on.
    const settleFocus = () => {
      const now = document.activeElement;
      if (hadFocus && (!now || now === document.body || list.els.el.contains(now))) restoreFocus(list.els.el, focusKey);
    };
    const mine = gen;
    busy.add(it.id);
    rowErrors.delete(errorKey);
    renderAll();
    const who = it.guest.name || it.reference;
    try {
      const answer = await ctx.api(`/v1/reservations/${encodeURIComponent(it.id)}/${kind}`, {
        method: 'POST',
        headers: { 'Idempotency-Key': uuid() },
      });
      if (!alive || mine !== gen) return;
      const status = typeof answer?.status === 'string' ? answer.status : ACTION_STATUS[kind];
      overrides.set(it.id, { status, updatedAt: answer?.updated_at ?? null, since: Date.now() });
      // Checked in on a night of the stay: in house now, before the next refresh says so.
      const house = lists.get('in_house');
      if (status === 'checked_in' && house.raw && it.r.start_date <= date && date < it.r.end_date
        && !house.raw.some((r) => r.reservation_id === it.id)) {
        house.raw = [...house.raw, { ...it.r, status }];
      }
      busy.delete(it.id);
      renderAll();
      settleFocus();
      ctx.announce(`${ACTION_DONE[kind]}: ${who}`);
    } catch (e) {
      if (!alive || mine !== gen) return;
      busy.delete(it.id);
      rowErrors.set(errorKey, h('p', { role: 'alert', class: 'error fd-row-error' }, `${ACTION_TEXT[kind]} ${it.reference}: ${errorText(e)}`));
      renderAll();
      settleFocus();
    }
  }

  // -- Export -----------------------------------------------------------------------
  function exportCsv() {
    if (!hotel || !loaded) return;
    const rows = [CSV_HEADER];
    for (const list of lists.values()) {
      if (!list.raw) continue;
      for (const it of rowsOf(list).shown) {
        rows.push([list.def.key, it.reference, it.id, it.guest.name, it.guest.email, it.roomTypes, it.r.rooms,
          it.r.start_date, it.r.end_date, it.status]);
      }
    }
    const name = `frontdesk-${hotel.hotel_id}-${date}.csv`;
    downloadCsv(name, rows);
    ctx.announce(`Exported ${plural(rows.length - 1, 'row', 'rows')} to ${name}.`);
  }

  // -- The view ---------------------------------------------------------------------
  return {
    update(route) {
      if (route.seg[0] !== 'today') return false;
      apply(route);
      return true;
    },
    destroy() {
      alive = false;
      stopPolling();
      document.removeEventListener('visibilitychange', onVisibility);
    },
  };
}
