// The live inventory calendar: room types × 14, 31, 60 or 90 nights (opening at the
// hotel's today, marked), polled every 2 s, with rectangle selection and a bulk-edit
// panel (revenue and admins) that sends one `PUT .../ari`. An inventory change is shown
// night by night, type by type (before → after) and sent only once staff confirm it; the
// last one can be undone from the page.
//
// Under the room types, the hotel's numbers per night from the occupancy report (rooms
// sold, occupancy, revenue, ADR, RevPAR, a flag on a night sold beyond its rooms) and,
// on demand, its pickup. A night's history (who changed what, when) opens from the
// focused cell; the range exports as CSV.

import { errorText, hotelsError } from './api.js';
import {
  h, field, srOnly, fmtRate, fmtMoney, parseMoney, minorDigits, parseIntStrict, plural, addDays, nightsBetween,
  weekday, isWeekend, dayOfMonth, fmtDayShort, fmtDayLong, shiftMonth, isMonth,
  fmtTime, setText, parseChange, applyChange, isDate, hotelToday, downloadCsv, fmtDateTime, hotelOption,
} from './util.js';

/** The ranges the calendar shows, in nights. */
const SPANS = [14, 31, 60, 90];

const POLL_MS = 2000;
const FLASH_MS = 1600;
const STATE_CLASSES = ['occ-0', 'occ-1', 'occ-2', 'occ-3', 'occ-full', 'stopped', 'no-inventory'];

/** The restrictions a night can carry, in display order. */
const RESTRICTIONS = [
  { key: 'stop_sell', short: () => 'SS', long: () => 'stop-sell' },
  { key: 'closed_to_arrival', short: () => 'CTA', long: () => 'arrival closed' },
  { key: 'closed_to_departure', short: () => 'CTD', long: () => 'departure closed' },
  { key: 'min_stay', short: (n) => `min ${n}`, long: (n) => `minimum stay ${n} nights` },
  { key: 'max_stay', short: (n) => `max ${n}`, long: (n) => `maximum stay ${n} nights` },
  { key: 'min_stay_through', short: (n) => `MST ${n}`, long: (n) => `minimum stay-through ${n} nights` },
  { key: 'min_advance_days', short: (n) => `adv≥${n}`, long: (n) => `book at least ${n} days ahead` },
  { key: 'max_advance_days', short: (n) => `adv≤${n}`, long: (n) => `book at most ${n} days ahead` },
];

/** The binding restrictions of a `restrictions` object: `[{key, value, short, long}]`. */
function binding(restrictions) {
  const out = [];
  if (!restrictions || typeof restrictions !== 'object') return out;
  for (const r of RESTRICTIONS) {
    const value = restrictions[r.key];
    if (value == null || value === false) continue;
    out.push({ key: r.key, value, short: r.short(value), long: r.long(value) });
  }
  return out;
}

function occupancyClass(night) {
  const capacity = night.total_rooms + night.overbooking_allowance;
  if (night.remaining <= 0) return 'occ-full';
  const occ = capacity > 0 ? (night.held + night.confirmed + night.blocked) / capacity : 1;
  if (occ < 0.2) return 'occ-0';
  if (occ < 0.5) return 'occ-1';
  if (occ < 0.8) return 'occ-2';
  return 'occ-3';
}

/** A night with every number present (the server may leave some out). */
function normal(night, date) {
  const n = night ?? {};
  return {
    date,
    total_rooms: Number(n.total_rooms ?? 0),
    overbooking_allowance: Number(n.overbooking_allowance ?? 0),
    held: Number(n.held ?? 0),
    confirmed: Number(n.confirmed ?? 0),
    blocked: Number(n.blocked ?? 0),
    remaining: Number(n.remaining ?? 0),
    rate_cents: n.rate_cents ?? null,
    has_inventory: n.has_inventory,
    restrictions: n.restrictions ?? {},
    prices: Array.isArray(n.prices) ? n.prices : [],
    missing: night == null,
  };
}

export function mountCalendar(root, ctx, firstRoute) {
  const admin = ctx.can.sell; // revenue and admins change what is sold
  let alive = true;
  let hotels = null; // null until loaded
  let pendingRoute = firstRoute;
  let hotelId = null;
  let hotelZone = null; // the hotel's time zone: its today opens the calendar
  let start = null; // the first night shown (YYYY-MM-DD)
  let span = null; // how many nights are shown
  let gen = 0; // bumped when the hotel or range changes: older answers are dropped
  let showPickup = false;
  let lastOccupancy = null; // the occupancy report's hotel nights, by date
  let lastPickup = null; // the pickup report's nights, by date
  // The hotel's currency: rates are typed and shown in its units (whole yen for JPY).
  let currency = 'EUR';
  let digits = 2;
  let timer = null;
  let inFlight = false;
  let again = false;
  let lastError = '';

  // The table as built: its nights, room types and cells[r][c].
  let nights = [];
  let roomTypes = [];
  let cells = [];
  let structure = '';
  let plans = []; // [{rate_plan_id, name}]
  let shownPlan = ''; // the plan whose rate the cells show ('' : the base rate)
  let lastBody = null;
  const cellSig = new WeakMap();
  // Each cell's night as last shown, for the bulk edit's before → after.
  const cellNight = new WeakMap();
  // The last inventory change saved from this page, and how to put it back.
  let lastChange = null;
  const cellPos = new WeakMap();
  const flashTimers = new WeakMap();
  let focusPos = { r: 0, c: 0 };
  let anchor = null;
  let sel = null; // {r0, r1, c0, c1}
  let dragging = false;
  let lastPointer = 'mouse'; // what pressed last: a finger selects by taps, not drags

  ctx.setTitle('Calendar');

  // -- Static page parts ----------------------------------------------------------
  const heading = h('h1', { tabindex: '-1' }, 'Inventory calendar');
  const hotelSelect = h('select', { id: 'cal-hotel', name: 'hotel', disabled: true });
  const startInput = h('input', { id: 'cal-start', name: 'start', type: 'date', required: true });
  const spanSelect = h('select', { id: 'cal-nights', name: 'nights' },
    SPANS.map((n) => h('option', { value: String(n) }, `${n} nights`)));
  const prevButton = h('button', { type: 'button', class: 'range-prev' }, '‹ Earlier');
  const nextButton = h('button', { type: 'button', class: 'range-next' }, 'Later ›');
  const todayButton = h('button', { type: 'button', class: 'range-today' }, 'Today');
  const rateSelect = h('select', { id: 'cal-rate', name: 'rate_shown' }, h('option', { value: '' }, 'Base rate'));
  const pickupToggle = h('input', { id: 'cal-pickup', name: 'pickup', type: 'checkbox' });
  const exportButton = h('button', { type: 'button', class: 'export-csv' }, 'Export CSV');
  const toolbar = h('div', { class: 'toolbar' },
    field('Hotel', hotelSelect, 'field-hotel'),
    h('div', { class: 'range-nav' }, prevButton, field('From', startInput, 'field-start'), field('Show', spanSelect, 'field-nights'), nextButton, todayButton),
    field('Rates shown', rateSelect, 'field-rate'),
    h('div', { class: 'field-check' }, pickupToggle, h('label', { for: 'cal-pickup' }, 'Show pickup')),
    exportButton,
  );
  const hotelInfo = h('p', { class: 'hotel-info' });
  const asOf = h('p', { class: 'as-of' }, 'Loading…');
  const alerts = h('div', { class: 'alerts' });
  const gridWrap = h('div', { class: 'grid-wrap' });
  const panelSlot = h('div', { class: 'panel-slot' });
  const undoBar = h('div', { class: 'undo-bar', role: 'status' });
  const historyButton = h('button', { type: 'button', class: 'night-history-open' }, 'History of the focused night');
  const historyBox = h('div', { class: 'night-history-body' });
  const historySection = h('section', { class: 'card night-history', 'aria-labelledby': 'night-history-h' },
    h('h2', { id: 'night-history-h' }, 'A night\'s history'),
    h('p', { class: 'hint' }, 'Move to a night (click it, or arrow keys), then ask for every change to it: who made it and when.'),
    historyButton, historyBox);
  const hint = h('p', { class: 'hint grid-hint' }, admin
    ? 'Click a night to select it; Shift+click or drag to select a block (on a touch screen: tap a night, then another). Arrow keys move, Shift+arrows extend, Space selects, Escape clears.'
    : 'Read-only: arrow keys move between nights.');

  const view = h('div', { class: 'calendar-view' },
    h('div', { class: 'cal-head' }, heading, h('div', { class: 'cal-status' }, hotelInfo, asOf)),
    toolbar,
    alerts, gridWrap,
    h('div', { class: 'cal-foot' }, legend(), hint),
    panelSlot,
    undoBar,
  );
  // The history under the view, not in it: the view fills the screen with the grid.
  root.append(view, historySection);

  hotelSelect.addEventListener('change', () => go(Number(hotelSelect.value), null, span));
  startInput.addEventListener('change', () => {
    if (isDate(startInput.value)) go(hotelId, startInput.value, span);
  });
  spanSelect.addEventListener('change', () => go(hotelId, start, Number(spanSelect.value)));
  prevButton.addEventListener('click', () => go(hotelId, addDays(start, -span), span));
  nextButton.addEventListener('click', () => go(hotelId, addDays(start, span), span));
  todayButton.addEventListener('click', () => go(hotelId, hotelToday(hotelZone), span));
  pickupToggle.addEventListener('change', () => {
    showPickup = pickupToggle.checked;
    lastPickup = null;
    structure = '';
    if (lastBody) render(lastBody);
    refresh();
  });
  exportButton.addEventListener('click', exportCsv);
  historyButton.addEventListener('click', () => openHistory());
  rateSelect.addEventListener('change', () => {
    shownPlan = rateSelect.value;
    if (lastBody) render(lastBody);
  });

  const onVisibility = () => {
    if (!document.hidden && !inFlight && hotelId != null) poll();
  };
  const onMouseUp = () => {
    dragging = false;
  };
  document.addEventListener('visibilitychange', onVisibility);
  document.addEventListener('mouseup', onMouseUp);

  loadHotels();

  // -- Hotels and route -------------------------------------------------------------
  async function loadHotels() {
    alerts.replaceChildren();
    try {
      hotels = await ctx.hotels();
    } catch (e) {
      if (!alive) return;
      asOf.textContent = '';
      alerts.replaceChildren(hotelsError(ctx, e, loadHotels));
      return;
    }
    if (!alive) return;
    hotelSelect.replaceChildren(...hotels.map((hotel) =>
      hotelOption(hotel)));
    hotelSelect.disabled = hotels.length === 0;
    // The address bar may have moved on while the hotels loaded, its `hashchange` not
    // yet run: apply what it names now, or the canonical address written for the older
    // route would overwrite the newer one.
    const current = ctx.route();
    apply(current.seg[0] === 'calendar' ? current : pendingRoute);
  }

  /** The span a narrow screen opens with: fewer nights fit a phone. */
  function defaultSpan() {
    return window.matchMedia?.('(max-width: 600px)').matches ? 14 : 31;
  }

  function go(id, from, nightsShown) {
    if (id == null) return;
    const hotel = hotels?.find((x) => x.hotel_id === id);
    const first = isDate(from) ? from : hotelToday(hotel?.timezone);
    const n = SPANS.includes(nightsShown) ? nightsShown : defaultSpan();
    const hash = `#/calendar/${id}?start=${first}&nights=${n}`;
    if (location.hash !== hash) location.hash = hash; // the router calls update()
  }

  /** The range a route names: `start` and `nights`, or (older links) a `month`. */
  function rangeOf(route, hotel) {
    const q = route.query;
    const month = q.get('month');
    if (!q.get('start') && isMonth(month)) {
      const first = `${month}-01`;
      return { first, n: nightsBetween(first, `${shiftMonth(month, 1)}-01`).length };
    }
    const n = Number(q.get('nights'));
    return {
      first: isDate(q.get('start')) ? q.get('start') : hotelToday(hotel.timezone),
      n: SPANS.includes(n) ? n : defaultSpan(),
    };
  }

  function apply(route) {
    pendingRoute = route;
    if (!hotels) return;
    if (hotels.length === 0) {
      asOf.textContent = '';
      gridWrap.replaceChildren(h('p', { class: 'empty' }, 'No hotels yet.'));
      return;
    }
    const asked = route.seg[1] != null ? Number(route.seg[1]) : hotels[0].hotel_id;
    const hotel = hotels.find((x) => x.hotel_id === asked);
    if (!hotel) {
      stopPolling();
      gen += 1;
      structure = '';
      sel = null;
      anchor = null;
      cells = [];
      updatePanel();
      hotelId = null;
      asOf.textContent = '';
      gridWrap.replaceChildren();
      alerts.replaceChildren(h('p', { role: 'alert', class: 'error' }, `unknown_hotel: no hotel #${route.seg[1]} (pick one above).`));
      hotelSelect.value = '';
      return;
    }
    const { first, n } = rangeOf(route, hotel);
    const canonical = `#/calendar/${hotel.hotel_id}?start=${first}&nights=${n}`;
    if (location.hash !== canonical) history.replaceState(null, '', canonical);
    if (hotel.hotel_id === hotelId && first === start && n === span) return;
    hotelId = hotel.hotel_id;
    hotelZone = hotel.timezone ?? null;
    start = first;
    span = n;
    hotelSelect.value = String(hotelId);
    startInput.value = start;
    if (!SPANS.includes(span) && !spanSelect.querySelector(`option[value="${span}"]`)) {
      spanSelect.append(h('option', { value: String(span) }, `${span} nights`));
    }
    spanSelect.value = String(span);
    currency = hotel.currency ?? 'EUR';
    digits = minorDigits(currency);
    const end = addDays(start, span);
    const range = `${fmtDayShort(start)} – ${fmtDayShort(addDays(end, -1))}`;
    hotelInfo.textContent = `${hotel.name}, ${hotel.city} · ${range} · today there ${fmtDayShort(hotelToday(hotelZone))} · times in ${hotel.timezone ?? 'hotel time'} · prices in ${currency}`;
    ctx.setTitle(`Calendar · ${hotel.name} · ${range}`);
    // A new hotel or range: a new table.
    gen += 1;
    structure = '';
    sel = null;
    anchor = null;
    lastError = '';
    lastOccupancy = null;
    lastPickup = null;
    alerts.replaceChildren();
    historyBox.replaceChildren();
    asOf.textContent = 'Loading…';
    gridWrap.replaceChildren(h('p', { class: 'loading' }, `Loading ${range}…`));
    updatePanel();
    refresh();
  }

  // -- Polling ------------------------------------------------------------------------
  function stopPolling() {
    clearTimeout(timer);
    timer = null;
  }

  /** Ask now (or right after the request in flight). */
  function refresh() {
    if (inFlight) again = true;
    else poll();
  }

  async function poll() {
    stopPolling();
    if (!alive || hotelId == null) return;
    if (document.hidden) {
      timer = setTimeout(poll, POLL_MS);
      return;
    }
    inFlight = true;
    const mine = gen;
    const end = addDays(start, span);
    const range = `start_date=${start}&end_date=${end}`;
    // The hotel's numbers and pickup come from the read side; a failure there leaves
    // their rows unknown ("—"), never zero, and the calendar still shows.
    const numbers = ctx.api(`/v1/hotels/${hotelId}/occupancy?${range}`).catch(() => null);
    const pickup = showPickup ? ctx.api(`/v1/hotels/${hotelId}/pickup?${range}`).catch(() => null) : Promise.resolve(null);
    try {
      const body = await ctx.api(`/v1/hotels/${hotelId}/calendar?${range}`);
      const [occupancy, moves] = await Promise.all([numbers, pickup]);
      if (alive && mine === gen) {
        lastOccupancy = occupancy?.hotel?.nights ? new Map(occupancy.hotel.nights.map((n) => [n.date, n])) : null;
        lastPickup = moves?.nights ? new Map(moves.nights.map((n) => [n.date, n])) : null;
        render(body);
        showPollError('');
      }
    } catch (e) {
      if (alive && mine === gen) showPollError(`Could not load the calendar: ${errorText(e)}`);
    } finally {
      inFlight = false;
      if (alive) {
        if (again) {
          again = false;
          poll();
        } else {
          timer = setTimeout(poll, POLL_MS);
        }
      }
    }
  }

  function showPollError(text) {
    if (text === lastError) return;
    lastError = text;
    asOf.classList.toggle('stale', Boolean(text));
    if (text) alerts.replaceChildren(h('p', { role: 'alert', class: 'error poll-error' }, text));
    else alerts.replaceChildren();
  }

  // -- Rendering ------------------------------------------------------------------------
  function render(body) {
    lastBody = body;
    const list = nightsBetween(body?.start_date ?? start, body?.end_date ?? addDays(start, span));
    const types = (Array.isArray(body?.room_types) ? body.room_types : []).map((rt) => ({
      id: rt.room_type_id,
      name: String(rt.name ?? `Room type ${rt.room_type_id}`),
      nights: new Map((Array.isArray(rt.nights) ? rt.nights : []).map((n) => [n.date, n])),
    }));
    const newPlans = (Array.isArray(body?.rate_plans) ? body.rate_plans : [])
      .map((p) => ({ rate_plan_id: p.rate_plan_id, name: String(p.name ?? `Plan ${p.rate_plan_id}`) }));
    const plansChanged = JSON.stringify(newPlans) !== JSON.stringify(plans);
    plans = newPlans;

    const source = body?.source ? ` (${body.source})` : '';
    setText(asOf, body?.as_of ? `Live · as of ${fmtTime(body.as_of)}${source}` : `Live${source}`);

    const blocks = Array.isArray(body?.blocks) ? body.blocks : [];
    // The bands are rebuilt with the grid when a block or its pickup changes (rarely).
    const key = `${hotelId}|${showPickup}|${list.join(',')}|${types.map((t) => `${t.id}:${t.name}`).join(',')}|${JSON.stringify(blocks)}`;
    if (key !== structure) {
      build(list, types, blocks);
      structure = key;
    } else {
      types.forEach((rt, r) => list.forEach((date, c) => fillCell(cells[r][c], rt, normal(rt.nights.get(date), date), false)));
      roomTypes = types; // the same shape, this poll's nights (the export reads them)
    }
    fillTotals();
    if (plansChanged) {
      updatePanelPlans();
      updateRateChoices();
    }
  }

  /** The plans the cells can show the rate of; a plan gone from the hotel falls back to the base rate. */
  function updateRateChoices() {
    rateSelect.replaceChildren(h('option', { value: '' }, 'Base rate'),
      ...plans.map((p) => h('option', { value: String(p.rate_plan_id) }, `${p.name} (#${p.rate_plan_id})`)));
    if (!plans.some((p) => String(p.rate_plan_id) === shownPlan) && shownPlan !== '') {
      shownPlan = '';
      if (lastBody) render(lastBody);
    }
    rateSelect.value = shownPlan;
  }

  /** The rate a cell shows: the base rate, or the chosen plan's price (null: the plan does not sell it). */
  function shownRate(night) {
    if (shownPlan === '') return night.rate_cents;
    return night.prices.find((p) => String(p.rate_plan_id) === shownPlan)?.rate_cents ?? null;
  }

  function build(list, types, blocks = []) {
    const hadFocus = gridWrap.contains(document.activeElement);
    nights = list;
    roomTypes = types;
    cells = [];
    if (types.length === 0) {
      gridWrap.replaceChildren(h('p', { class: 'empty' }, 'This hotel has no room types yet.'));
      sel = null;
      updatePanel();
      return;
    }
    const today = hotelToday(hotelZone);
    const headRow = h('tr', null,
      h('th', { scope: 'col', class: 'corner' }, 'Room type'),
      list.map((date) => h('th', {
        scope: 'col',
        class: ['day', isWeekend(date) && 'weekend', date === today && 'today'],
        title: date === today ? `${fmtDayLong(date)} (today at the hotel)` : fmtDayLong(date),
        'aria-current': date === today ? 'date' : null,
        dataset: { night: date },
      }, h('span', { class: 'wd' }, weekday(date)), ' ', h('span', { class: 'dn' }, String(dayOfMonth(date))),
      date === today ? h('span', { class: 'today-mark' }, ' today') : null)),
    );
    const body = h('tbody');
    types.forEach((rt, r) => {
      const row = h('tr', { dataset: { roomType: rt.id } },
        h('th', { scope: 'row', class: 'rt' },
          h('span', { class: 'rt-name', title: rt.name }, rt.name), ' ', h('span', { class: 'rt-id' }, `#${rt.id}`)));
      const rowCells = [];
      list.forEach((date, c) => {
        const td = h('td', {
          class: ['cell', isWeekend(date) && 'weekend'],
          tabindex: '-1',
          dataset: { night: date, roomType: rt.id },
        });
        if (admin) td.setAttribute('aria-selected', 'false');
        cellPos.set(td, { r, c });
        fillCell(td, rt, normal(rt.nights.get(date), date), true);
        rowCells.push(td);
        row.append(td);
      });
      cells.push(rowCells);
      body.append(row);
      blocks.filter((b) => b.room_type_id === rt.id).forEach((b) => body.append(band(b, list)));
    });
    const table = h('table', {
      role: 'grid',
      'aria-label': 'Inventory calendar',
      'aria-multiselectable': admin ? 'true' : null,
      'aria-readonly': admin ? null : 'true',
      class: 'calendar',
    }, h('thead', null, headRow), body, totalsFoot(list));
    table.addEventListener('keydown', onKeyDown);
    table.addEventListener('pointerdown', (event) => {
      lastPointer = event.pointerType || 'mouse';
    });
    table.addEventListener('mousedown', onMouseDown);
    table.addEventListener('mouseover', onMouseOver);
    gridWrap.replaceChildren(table);

    // Keep focus and selection where they were when only the shape changed.
    focusPos = { r: Math.min(focusPos.r, types.length - 1), c: Math.min(focusPos.c, list.length - 1) };
    cells[focusPos.r][focusPos.c].tabIndex = 0;
    if (sel) {
      const clampR = (x) => Math.min(x, types.length - 1);
      const clampC = (x) => Math.min(x, list.length - 1);
      sel = { r0: clampR(sel.r0), r1: clampR(sel.r1), c0: clampC(sel.c0), c1: clampC(sel.c1) };
      if (anchor) anchor = { r: clampR(anchor.r), c: clampC(anchor.c) };
    }
    paintSelection();
    updatePanel();
    if (hadFocus) cells[focusPos.r][focusPos.c].focus();
  }

  /** A group block's band under its room type: its pickup of its rooms on each night. */
  function band(block, list) {
    const byDate = new Map((Array.isArray(block.nights) ? block.nights : []).map((n) => [n.date, n]));
    const released = block.status === 'released';
    const label = `Block ${block.code}: ${block.name}`;
    return h('tr', { class: ['block-band', released && 'released'], dataset: { block: block.code } },
      h('th', { scope: 'row', class: 'rt band-name' },
        h('span', { class: 'rt-name', title: label }, `Block ${block.code}`), ' ',
        h('span', { class: 'rt-id' }, released ? 'released' : `until ${block.release_date}`)),
      list.map((date) => {
        const n = byDate.get(date);
        if (!n) return h('td', { class: 'band' });
        return h('td', {
          class: ['band', 'in-block'],
          title: `${label}: ${n.picked_up} of ${n.rooms} room(s) picked up on ${fmtDayLong(date)}`,
          dataset: { night: date, block: block.code },
        }, `${n.picked_up}/${n.rooms}`);
      }));
  }

  // -- The hotel's numbers, pickup, a night's history, CSV --------------------------------

  /** The rows under the room types: the hotel's numbers per night, and its pickup. */
  const TOTAL_ROWS = [
    { key: 'sold', label: 'Rooms sold', long: 'rooms sold of the hotel\'s rooms' },
    { key: 'occupancy', label: 'Occupancy', long: 'occupancy' },
    { key: 'revenue', label: 'Revenue', long: 'revenue' },
    { key: 'adr', label: 'ADR', long: 'average daily rate' },
    { key: 'revpar', label: 'RevPAR', long: 'revenue per available room' },
  ];
  const PICKUP_ROWS = [
    { key: 'pickup-day', label: 'Pickup 24 h', long: 'rooms booked and cancelled in the last 24 hours' },
    { key: 'pickup-week', label: 'Pickup 7 days', long: 'rooms booked and cancelled in the last 7 days' },
  ];

  function totalsFoot(list) {
    const rows = showPickup ? [...TOTAL_ROWS, ...PICKUP_ROWS] : TOTAL_ROWS;
    return h('tfoot', null, rows.map((row, i) => h('tr', { class: ['totals-row', i === 0 && 'first-total', row.key.startsWith('pickup') && 'pickup-row'], dataset: { totals: row.key } },
      h('th', { scope: 'row', class: 'rt total-name', title: row.long }, row.label),
      list.map((date) => h('td', { class: 'total', dataset: { night: date, total: row.key } }, '…')))));
  }

  /** Percent, whole. */
  const pct = (ratio) => `${Math.round(ratio * 100)}%`;
  const money = (cents) => (cents == null ? '—' : fmtRate(cents, digits));

  /** One total's text, title and raw value (`data-value`, for exports and checks). */
  function totalOf(key, date) {
    if (key.startsWith('pickup')) {
      const p = lastPickup?.get(date);
      if (!p) return { text: '—', title: 'pickup unknown (the read side did not answer)', value: '' };
      const [booked, cancelled] = key === 'pickup-day'
        ? [p.booked_last_day, p.cancelled_last_day] : [p.booked_last_week, p.cancelled_last_week];
      const span = key === 'pickup-day' ? 'the last 24 hours' : 'the last 7 days';
      return {
        text: booked || cancelled ? `+${booked} −${cancelled}` : '0',
        title: `${fmtDayLong(date)}: ${booked} room(s) booked and ${cancelled} cancelled in ${span}; ${p.on_the_books} on the books (${p.on_the_books_week_ago} a week ago)`,
        value: `${booked}/${cancelled}`,
      };
    }
    const n = lastOccupancy?.get(date);
    if (!n) return { text: '—', title: 'unknown (the occupancy report did not answer)', value: '' };
    switch (key) {
      case 'sold':
        return {
          text: `${n.confirmed}/${n.total_rooms}${n.oversold ? ' ⚠' : ''}`,
          title: `${fmtDayLong(date)}: ${n.confirmed} of ${n.total_rooms} rooms sold, ${n.held} on hold${n.oversold ? '; sold beyond a room type\'s physical rooms (overbooking in use)' : ''}`,
          value: String(n.confirmed),
          oversold: n.oversold,
        };
      case 'occupancy':
        return { text: n.occupancy == null ? '—' : pct(n.occupancy), title: n.occupancy == null ? 'no rooms' : `occupancy ${(n.occupancy * 100).toFixed(1)}%`, value: n.occupancy == null ? '' : String(n.occupancy) };
      case 'revenue':
        return { text: money(n.revenue_cents), title: `revenue ${fmtMoney(n.revenue_cents, n.currency)}`, value: String(n.revenue_cents) };
      case 'adr':
        return { text: money(n.adr_cents), title: n.adr_cents == null ? 'nothing sold: no average rate' : `ADR ${fmtMoney(n.adr_cents, n.currency)}`, value: n.adr_cents == null ? '' : String(n.adr_cents) };
      case 'revpar':
        return { text: money(n.revpar_cents), title: n.revpar_cents == null ? 'no rooms' : `RevPAR ${fmtMoney(n.revpar_cents, n.currency)}`, value: n.revpar_cents == null ? '' : String(n.revpar_cents) };
      default:
        return { text: '—', title: '', value: '' };
    }
  }

  function fillTotals() {
    const foot = gridWrap.querySelector('tfoot');
    if (!foot) return;
    for (const td of foot.querySelectorAll('td.total')) {
      const { text, title, value, oversold } = totalOf(td.dataset.total, td.dataset.night);
      if (td.dataset.value === value && td.textContent === text) continue;
      td.textContent = text;
      td.title = title;
      td.dataset.value = value;
      td.classList.toggle('oversold', Boolean(oversold));
      if (oversold) td.append(srOnly(' sold beyond its rooms'));
    }
  }

  /** Every change to the focused night, who made it and when (its event stream). */
  async function openHistory() {
    const td = cells[focusPos.r]?.[focusPos.c];
    if (!td) return;
    const { night, roomType } = td.dataset;
    const rt = roomTypes.find((t) => String(t.id) === roomType);
    const mine = gen;
    historyBox.replaceChildren(h('p', { class: 'loading', role: 'status' }, 'Loading the history…'));
    try {
      const body = await ctx.api(`/v1/hotels/${hotelId}/room-types/${roomType}/nights/${night}/events`);
      if (!alive || mine !== gen) return;
      const events = Array.isArray(body?.events) ? body.events : [];
      const title = h('h3', { tabindex: '-1' }, `${rt?.name ?? `Room type ${roomType}`} · ${fmtDayLong(night)}`);
      if (!events.length) {
        historyBox.replaceChildren(title, h('p', { class: 'empty' }, 'No changes: this night was never given inventory.'));
      } else {
        historyBox.replaceChildren(title, h('table', { class: 'data history-table' },
          h('caption', { class: 'sr-only' }, `Changes to ${rt?.name ?? roomType} on ${fmtDayLong(night)}, oldest first`),
          h('thead', null, h('tr', null, ['When', 'Who', 'What', 'Change'].map((t) => h('th', { scope: 'col' }, t)))),
          h('tbody', null, events.map((e) => h('tr', { dataset: { event: e.type } },
            h('td', null, fmtDateTime(e.recorded_at)),
            h('td', { class: 'by' }, String(e.metadata?.client ?? '—')),
            h('td', null, String(e.type ?? '').replace(/([a-z])([A-Z])/g, '$1 $2')),
            h('td', { class: 'change' }, describe(e)))))));
      }
      title.focus();
      ctx.announce(`${events.length} change(s) to this night.`);
    } catch (e) {
      if (alive && mine === gen) historyBox.replaceChildren(h('p', { role: 'alert', class: 'error' }, `Could not load the history: ${errorText(e)}`));
    }
  }

  /** An event's payload in a few words: the fields a person reads first. */
  function describe(event) {
    // The payload is the event's fields (or, in older shapes, wrapped in its type's name).
    const wrapped = event.data?.[event.type];
    const data = wrapped && typeof wrapped === 'object' ? wrapped : (event.data ?? {});
    const parts = [];
    const say = (key, label, fmt = (v) => String(v)) => {
      if (data && data[key] != null && typeof data[key] !== 'object') parts.push(`${label} ${fmt(data[key])}`);
    };
    say('total_rooms', 'rooms');
    say('overbooking_allowance', 'overbooking');
    say('rate_cents', 'rate', (v) => fmtMoney(Number(v), currency));
    say('rooms', 'rooms');
    say('reservation_id', 'reservation');
    if (data?.restrictions && typeof data.restrictions === 'object') {
      const set = binding(data.restrictions).map((b) => b.long);
      parts.push(set.length ? `restrictions: ${set.join(', ')}` : 'restrictions cleared');
    }
    return parts.join(' · ') || '—';
  }

  /** The range as CSV: one line per room type and night, then the hotel's numbers. */
  function exportCsv() {
    if (!lastBody || !roomTypes.length) return;
    const header = ['date', 'room_type_id', 'room_type', 'total_rooms', 'overbooking_allowance', 'remaining', 'held',
      'confirmed', 'blocked', 'rate_cents', 'currency', 'restrictions'];
    const rows = [header];
    for (const rt of roomTypes) {
      for (const date of nights) {
        const n = normal(rt.nights.get(date), date);
        const none = n.missing || n.has_inventory === false;
        rows.push([date, rt.id, rt.name, none ? null : n.total_rooms, none ? null : n.overbooking_allowance, none ? null : n.remaining,
          n.held, n.confirmed, n.blocked, n.rate_cents, currency, binding(n.restrictions).map((b) => b.short).join(' ')]);
      }
    }
    rows.push([]);
    rows.push(['date', 'hotel_total_rooms', 'hotel_confirmed', 'occupancy', 'revenue_cents', 'adr_cents', 'revpar_cents', 'oversold']);
    for (const date of nights) {
      const n = lastOccupancy?.get(date);
      rows.push(n ? [date, n.total_rooms, n.confirmed, n.occupancy, n.revenue_cents, n.adr_cents, n.revpar_cents, n.oversold ? 'yes' : 'no']
        : [date]);
    }
    downloadCsv(`calendar-${hotelId}-${nights[0]}-${nights[nights.length - 1]}.csv`, rows);
    ctx.announce('The calendar was exported as CSV.');
  }

  function planName(id) {
    if (id == null) return 'Base rate';
    return plans.find((p) => p.rate_plan_id === id)?.name ?? `Plan ${id}`;
  }

  /** Write one night into its cell; flash it when its remaining count changed. */
  function fillCell(td, rt, night, initial) {
    const sig = `${shownPlan}|${JSON.stringify(night)}`;
    if (cellSig.get(td) === sig) return;
    cellSig.set(td, sig);
    const previous = td.dataset.remaining;

    const noInventory = night.missing || night.has_inventory === false
      || (night.has_inventory == null && night.total_rooms === 0 && night.rate_cents == null && night.prices.length === 0);
    cellNight.set(td, { night, none: noInventory });
    const capacity = night.total_rooms + night.overbooking_allowance;
    const base = binding(night.restrictions);
    const baseKeys = new Map(base.map((b) => [b.key, b.value]));
    const planOnly = [];
    for (const price of night.prices) {
      if (price.rate_plan_id == null) continue;
      for (const b of binding(price.restrictions)) {
        if (baseKeys.get(b.key) === b.value) continue;
        planOnly.push({ ...b, plan: price.rate_plan_id, short: `${b.short}·${price.rate_plan_id}`, long: `${b.long} (${planName(price.rate_plan_id)})` });
      }
    }
    const marks = [...base, ...planOnly];
    const stopped = Boolean(night.restrictions.stop_sell);
    const day = fmtDayShort(night.date);

    const lines = [];
    if (noInventory) {
      lines.push(h('span', { class: 'l1' }, h('span', { class: 'left' }, '—')));
    } else {
      lines.push(h('span', { class: 'l1' }, h('span', { class: 'left' }, String(night.remaining)), h('span', { class: 'cap' }, `/${capacity}`)));
      const rate = shownRate(night);
      lines.push(h('span', { class: 'l2 rate' }, rate == null ? '–' : fmtRate(rate, digits)));
    }
    if (!noInventory || night.held + night.confirmed > 0) {
      const blocked = night.blocked > 0 ? ` B${night.blocked}` : '';
      lines.push(h('span', { class: 'l3 hc' }, `H${night.held} C${night.confirmed}${blocked}`));
    }
    if (marks.length) {
      lines.push(h('span', { class: 'marks' }, marks.map((m) =>
        h('span', { class: ['mark', `mark-${m.key.replace(/_/g, '-')}`, m.plan != null && 'plan-mark'], title: m.long },
          h('span', { 'aria-hidden': 'true' }, m.short), srOnly(m.long)))));
    }
    // The cell is read by its sentence (below), not by its abbreviations: the short
    // lines are hidden from assistive technology, the sentence from the eye. (An
    // aria-label would hide the visible text from the accessible name instead.)
    for (const line of lines) line.setAttribute('aria-hidden', 'true');

    for (const c of STATE_CLASSES) td.classList.remove(c);
    td.classList.toggle('oversold', !noInventory && night.confirmed > night.total_rooms);
    if (noInventory) td.classList.add('no-inventory');
    else td.classList.add(occupancyClass(night));
    if (stopped) td.classList.add('stopped');

    td.dataset.remaining = String(night.remaining);
    td.dataset.total = String(night.total_rooms);
    td.dataset.allowance = String(night.overbooking_allowance);
    td.dataset.held = String(night.held);
    td.dataset.confirmed = String(night.confirmed);
    if (night.rate_cents == null) delete td.dataset.rate;
    else td.dataset.rate = String(night.rate_cents);
    td.dataset.restrictions = marks.map((m) => m.short).join(' ');

    // Title: everything, incl. the plans' rates.
    const title = [`${rt.name} · ${fmtDayLong(night.date)}`];
    if (noInventory) {
      title.push('No inventory');
    } else {
      title.push(`${night.remaining} of ${capacity} left (${night.total_rooms} rooms + ${night.overbooking_allowance} overbooking)`);
      title.push(`Held ${night.held}, confirmed ${night.confirmed}${night.blocked ? `, set aside for blocks ${night.blocked}` : ''}`);
      title.push(`Base rate ${night.rate_cents == null ? '—' : fmtMoney(night.rate_cents, currency)}`);
      if (night.prices.length) {
        title.push(night.prices.map((p) => `${planName(p.rate_plan_id)} ${fmtMoney(p.rate_cents, currency)}`).join(', '));
      }
    }
    if (base.length) title.push(`Restrictions: ${base.map((b) => b.long).join(', ')}`);
    for (const p of planOnly) title.push(`${planName(p.plan)}: ${p.long.replace(/ \(.*\)$/, '')}`);
    td.title = title.join('\n');

    const label = noInventory
      ? [`${rt.name}, ${day}: no inventory`]
      : [`${rt.name}, ${day}: ${night.remaining} of ${capacity} left`, `${night.held} held`, `${night.confirmed} confirmed`,
        ...(night.blocked ? [`${night.blocked} set aside for blocks`] : []),
        ...(night.confirmed > night.total_rooms ? ['sold beyond its physical rooms'] : [])];
    const labelRate = shownRate(night);
    if (!noInventory && labelRate != null) {
      label.push(shownPlan === '' ? `rate ${fmtRate(labelRate, digits)}` : `${planName(Number(shownPlan))} ${fmtRate(labelRate, digits)}`);
    }
    for (const m of marks) label.push(m.long);
    td.replaceChildren(...lines, srOnly(label.join(', ')));

    if (!initial && previous !== undefined && previous !== String(night.remaining)) flash(td);
  }

  function flash(td) {
    td.classList.remove('flash');
    void td.offsetWidth; // restart the animation
    td.classList.add('flash');
    clearTimeout(flashTimers.get(td));
    flashTimers.set(td, setTimeout(() => td.classList.remove('flash'), FLASH_MS));
  }

  // -- Focus and selection ------------------------------------------------------------
  function setFocus(r, c, move = true) {
    if (!cells.length) return;
    const nr = Math.max(0, Math.min(r, cells.length - 1));
    const nc = Math.max(0, Math.min(c, nights.length - 1));
    const old = cells[focusPos.r]?.[focusPos.c];
    if (old) old.tabIndex = -1;
    focusPos = { r: nr, c: nc };
    const td = cells[nr][nc];
    td.tabIndex = 0;
    if (move) td.focus();
  }

  function select(from, to) {
    if (!admin || !cells.length) return;
    anchor = from;
    sel = {
      r0: Math.min(from.r, to.r), r1: Math.max(from.r, to.r),
      c0: Math.min(from.c, to.c), c1: Math.max(from.c, to.c),
    };
    paintSelection();
    updatePanel();
  }

  function clearSelection() {
    if (!sel) return;
    sel = null;
    anchor = null;
    paintSelection();
    updatePanel();
    ctx.announce('Selection cleared.');
  }

  function paintSelection() {
    if (!admin) return;
    cells.forEach((row, r) => row.forEach((td, c) => {
      const on = Boolean(sel) && r >= sel.r0 && r <= sel.r1 && c >= sel.c0 && c <= sel.c1;
      if (td.classList.contains('selected') !== on) {
        td.classList.toggle('selected', on);
        td.setAttribute('aria-selected', on ? 'true' : 'false');
      }
    }));
  }

  function onKeyDown(event) {
    const td = event.target.closest?.('td[data-night]');
    if (!td) return;
    const pos = cellPos.get(td);
    if (!pos) return;
    let next = null;
    switch (event.key) {
      case 'ArrowLeft': next = { r: pos.r, c: pos.c - 1 }; break;
      case 'ArrowRight': next = { r: pos.r, c: pos.c + 1 }; break;
      case 'ArrowUp': next = { r: pos.r - 1, c: pos.c }; break;
      case 'ArrowDown': next = { r: pos.r + 1, c: pos.c }; break;
      case 'Home': next = { r: event.ctrlKey ? 0 : pos.r, c: 0 }; break;
      case 'End': next = { r: event.ctrlKey ? cells.length - 1 : pos.r, c: nights.length - 1 }; break;
      case ' ':
      case 'Spacebar':
      case 'Enter':
        event.preventDefault();
        select(pos, pos);
        return;
      case 'Escape':
        if (sel) {
          event.preventDefault();
          clearSelection();
        }
        return;
      default:
        return;
    }
    event.preventDefault();
    next = { r: Math.max(0, Math.min(next.r, cells.length - 1)), c: Math.max(0, Math.min(next.c, nights.length - 1)) };
    setFocus(next.r, next.c);
    if (event.shiftKey && admin) select(sel && anchor ? anchor : pos, next);
  }

  function onMouseDown(event) {
    if (event.button !== 0) return;
    const td = event.target.closest?.('td[data-night]');
    if (!td) return;
    const pos = cellPos.get(td);
    if (!pos) return;
    event.preventDefault(); // no text selection while dragging; focus is moved by hand
    setFocus(pos.r, pos.c);
    if (!admin) return;
    // A finger cannot drag across the grid (that scrolls it): a tap on one night then a
    // tap on another selects the nights between; a third tap starts again.
    const touch = lastPointer === 'touch';
    const single = sel && anchor && sel.r0 === sel.r1 && sel.c0 === sel.c1;
    if ((event.shiftKey || (touch && single)) && sel && anchor && (pos.r !== anchor.r || pos.c !== anchor.c)) select(anchor, pos);
    else select(pos, pos);
    dragging = !touch;
  }

  function onMouseOver(event) {
    if (!dragging || !admin) return;
    if (!(event.buttons & 1)) {
      dragging = false;
      return;
    }
    const td = event.target.closest?.('td[data-night]');
    const pos = td && cellPos.get(td);
    if (!pos || !anchor) return;
    setFocus(pos.r, pos.c);
    select(anchor, pos);
  }

  // -- Bulk-edit panel (admins) ----------------------------------------------------------
  let panel = null;

  function selectedRange() {
    return {
      types: roomTypes.slice(sel.r0, sel.r1 + 1),
      first: nights[sel.c0],
      last: nights[sel.c1],
      count: sel.c1 - sel.c0 + 1,
    };
  }

  function updatePanel() {
    if (!admin) return;
    if (!sel || !cells.length) {
      if (panel) {
        const hadFocus = panel.section.contains(document.activeElement);
        panel.section.remove();
        panel = null;
        if (hadFocus) cells[focusPos.r]?.[focusPos.c]?.focus();
      }
      return;
    }
    if (!panel) {
      panel = buildPanel();
      panelSlot.append(panel.section);
    }
    const { types, first, last, count } = selectedRange();
    const summary = `${plural(count, 'night', 'nights')} × ${plural(types.length, 'room type', 'room types')}`;
    setText(panel.summary, summary);
    setText(panel.range, `${first === last ? first : `${first} → ${last}`} · ${types.map((t) => t.name).join(', ')}`);
    panel.section.dataset.nights = String(count);
    panel.section.dataset.roomTypes = types.map((t) => t.id).join(',');
    // A new selection starts with empty fields and its own flags: a value typed for
    // the last selection must not be sent for this one.
    const key = `${sel.r0},${sel.r1},${sel.c0},${sel.c1}`;
    if (panel.selection !== key) {
      panel.selection = key;
      panel.setRooms(types);
      panel.closePreview();
      for (const input of panel.values) input.value = '';
      // "Applies to" too: a restriction meant for one plan over the last selection
      // must not quietly bind only that plan over this one.
      panel.restrictionPlan.value = '';
      panel.status.replaceChildren();
      prefillFlags();
    }
    updatePlaceholders();
  }

  /** Hint the current values: the selection's common value, or "mixed". */
  function updatePlaceholders() {
    const values = (attr, rows = [sel.r0, sel.r1]) => {
      const seen = new Set();
      for (let r = rows[0]; r <= rows[1]; r += 1) {
        for (let c = sel.c0; c <= sel.c1; c += 1) seen.add(cells[r][c].dataset[attr] ?? '');
      }
      return seen;
    };
    const hintFor = (input, attr, format = (v) => v, rows = undefined) => {
      const seen = values(attr, rows);
      if (seen.size === 1) {
        const [v] = seen;
        input.placeholder = v === '' ? '' : `now ${format(v)}`;
      } else {
        input.placeholder = 'mixed';
      }
    };
    for (const [id, input] of panel.rooms) {
      const r = roomTypes.findIndex((t) => t.id === id);
      hintFor(input, 'total', (v) => v, [r, r]);
    }
    hintFor(panel.allowance, 'allowance');
    hintFor(panel.rate, 'rate', (v) => fmtRate(Number(v), digits));
  }

  /**
   * Each flag's box starts as the selection has it (ticked when every selected night
   * has it, indeterminate when some do), and only a box staff change is sent: setting
   * a minimum stay must not clear a stop-sell nobody touched.
   */
  function prefillFlags() {
    const plan = panel.restrictionPlan.value;
    for (const [box, short] of panel.flags) {
      const token = plan === '' ? short : `${short}·${plan}`;
      let on = 0;
      let all = 0;
      for (let r = sel.r0; r <= sel.r1; r += 1) {
        for (let c = sel.c0; c <= sel.c1; c += 1) {
          all += 1;
          if ((cells[r][c].dataset.restrictions ?? '').split(' ').includes(token)) on += 1;
        }
      }
      box.checked = on === all && all > 0;
      box.indeterminate = on > 0 && on < all;
      box.dataset.initial = box.indeterminate ? 'mixed' : String(box.checked);
      delete box.dataset.touched;
    }
  }

  function planOptions() {
    return plans.map((p) => h('option', { value: String(p.rate_plan_id) }, `${p.name} (#${p.rate_plan_id})`));
  }

  function updatePanelPlans() {
    if (!panel) return;
    const keep1 = panel.restrictionPlan.value;
    panel.restrictionPlan.replaceChildren(h('option', { value: '' }, 'Every plan'), ...planOptions());
    panel.restrictionPlan.value = [...panel.restrictionPlan.options].some((o) => o.value === keep1) ? keep1 : '';
    const keep2 = panel.ratePlan.value;
    panel.ratePlan.replaceChildren(...planOptions());
    if ([...panel.ratePlan.options].some((o) => o.value === keep2)) panel.ratePlan.value = keep2;
    panel.ratePlanNote.hidden = plans.length > 0;
    panel.ratePlanButton.disabled = plans.length === 0;
  }

  function buildPanel() {
    const num = (id, name, min, required = false) =>
      h('input', { id, name, type: 'number', min: String(min), step: '1', inputmode: 'numeric', required });
    const money = (id, name, required = false) =>
      h('input', { id, name, type: 'text', inputmode: 'decimal', pattern: '\\d+([.,]\\d{1,2})?', autocomplete: 'off', required, title: 'An amount such as 180 or 180.50' });
    const check = (id, name, text) => h('div', { class: 'check' },
      h('input', { id, name, type: 'checkbox' }), h('label', { for: id }, text));

    // Inventory fields take a value (45) or a change of each night's own (+2, -10%): over
    // several room types, rooms are given per type, so one count never lands on all.
    const change = (id, name, title) =>
      h('input', { id, name, type: 'text', inputmode: 'decimal', autocomplete: 'off', spellcheck: 'false', title });
    const roomsTitle = 'A number of rooms (45), or a change of each night\'s rooms (+2, -3, -10%)';
    const roomsBox = h('div', { class: 'row rooms-fields' });
    const rooms = new Map();
    function setRooms(types) {
      rooms.clear();
      const one = types.length === 1;
      roomsBox.replaceChildren(...types.map((t) => {
        const input = change(one ? 'edit-total-rooms' : `edit-total-rooms-${t.id}`, 'total_rooms', roomsTitle);
        input.dataset.roomType = String(t.id);
        rooms.set(t.id, input);
        return field(one ? 'Total rooms' : `Total rooms: ${t.name}`, input);
      }));
    }
    const allowance = change('edit-overbooking', 'overbooking_allowance', 'A number (2), or a change (+1, -1)');
    const rate = change('edit-rate', 'rate', 'An amount (180 or 180.50), or a change of each night\'s rate (+5, -10%)');
    const inventoryButton = h('button', { type: 'submit', class: 'primary', dataset: { action: 'inventory' } }, 'Preview changes');
    const preview = h('div', { class: 'inventory-preview', hidden: true, tabindex: '-1' });
    const inventory = h('fieldset', { class: 'fs-inventory' },
      h('legend', null, 'Inventory'),
      roomsBox,
      h('div', { class: 'row' }, field('Overbooking allowance', allowance), field('Base rate', rate)),
      h('div', { class: 'actions' }, inventoryButton,
        h('span', { class: 'hint' }, 'Empty keeps each night\'s value; 45 sets it; +2, -3 or -10% changes each night\'s own. You see every change before it is sent.')),
      preview);

    const stopSell = check('edit-stop-sell', 'stop_sell', 'Stop-sell');
    const cta = check('edit-cta', 'closed_to_arrival', 'Closed to arrival');
    const ctd = check('edit-ctd', 'closed_to_departure', 'Closed to departure');
    const minStay = num('edit-min-stay', 'min_stay', 1);
    const maxStay = num('edit-max-stay', 'max_stay', 1);
    const restrictionPlan = h('select', { id: 'edit-applies-to', name: 'applies_to' }, h('option', { value: '' }, 'Every plan'), ...planOptions());
    const restrictionsButton = h('button', { type: 'submit', class: 'primary', dataset: { action: 'restrictions' } }, 'Set restrictions');
    const restrictions = h('fieldset', { class: 'fs-restrictions' },
      h('legend', null, 'Restrictions'),
      h('div', { class: 'checks' }, stopSell, cta, ctd),
      h('div', { class: 'row' }, field('Min stay', minStay), field('Max stay', maxStay), field('Applies to', restrictionPlan, 'field-wide')),
      h('div', { class: 'actions' }, restrictionsButton,
        h('span', { class: 'hint' }, 'A box you change is set (ticked) or cleared (unticked) on every selected night; the others, and empty stays, are kept.')));
    const flags = [[stopSell, 'SS'], [cta, 'CTA'], [ctd, 'CTD']].map(([wrap, short]) => [wrap.querySelector('input'), short]);
    for (const [box] of flags) {
      box.addEventListener('change', () => { box.dataset.touched = '1'; });
    }
    restrictionPlan.addEventListener('change', () => prefillFlags());

    const ratePlan = h('select', { id: 'edit-rate-plan', name: 'rate_plan', required: true }, ...planOptions());
    const planRate = money('edit-plan-rate', 'plan_rate', true);
    const ratePlanButton = h('button', { type: 'submit', class: 'primary', dataset: { action: 'rates' }, disabled: plans.length === 0 }, 'Set plan rate');
    const ratePlanNote = h('p', { class: 'hint', hidden: plans.length > 0 }, 'This hotel has no rate plans.');
    const planRates = h('fieldset', { class: 'fs-plan-rate' },
      h('legend', null, 'Plan rate'),
      h('div', { class: 'row' }, field('Rate plan', ratePlan, 'field-wide'), field('Rate', planRate)), ratePlanNote,
      h('div', { class: 'actions' }, ratePlanButton));

    const summary = h('strong', { class: 'selection-summary' });
    const range = h('span', { class: 'selection-range' });
    const status = h('div', { role: 'status', class: 'panel-status' });
    const clear = h('button', { type: 'button', class: 'clear-selection' }, 'Clear selection');
    clear.addEventListener('click', clearSelection);

    const form = h('form', { class: 'edit-form', novalidate: true }, inventory, restrictions, planRates);
    const section = h('section', { class: 'edit-panel', 'aria-label': 'Edit selection' },
      h('div', { class: 'panel-head' },
        h('h2', null, 'Edit selection'), summary, range, clear),
      form, status);

    // Enter in a field submits its own fieldset, not the form's first button.
    for (const fs of [inventory, restrictions, planRates]) {
      fs.addEventListener('keydown', (event) => {
        if (event.key === 'Enter' && event.target instanceof HTMLInputElement && event.target.type !== 'checkbox') {
          event.preventDefault();
          fs.querySelector('button[type=submit]').click();
        }
      });
    }
    // Escape in the panel clears the selection too.
    section.addEventListener('keydown', (event) => {
      if (event.key === 'Escape' && !(event.target instanceof HTMLSelectElement)) {
        event.preventDefault();
        clearSelection();
      }
    });

    const buttons = [inventoryButton, restrictionsButton, ratePlanButton];
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const action = event.submitter?.dataset.action;
      const fs = { inventory, restrictions, rates: planRates }[action];
      if (!fs || !sel) return;
      // The answer to the last submit is not this one's.
      status.replaceChildren();
      for (const input of fs.querySelectorAll('input, select')) {
        if (!input.checkValidity()) {
          const label = fs.querySelector(`label[for="${input.id}"]`)?.textContent ?? input.name;
          input.reportValidity();
          return invalid(input, `${label}: ${input.validationMessage}`);
        }
      }
      let change;
      if (action === 'inventory') {
        const changes = { rooms: new Map(), allowance: parseChange(allowance.value), rate: parseChange(rate.value, true, digits) };
        for (const [id, input] of rooms) {
          const c = parseChange(input.value);
          const label = fs.querySelector(`label[for="${input.id}"]`)?.textContent ?? 'Total rooms';
          if (!c) return invalid(input, `${label}: a number of rooms (45), or a change (+2, -3, -10%).`);
          changes.rooms.set(id, c);
        }
        if (!changes.allowance) return invalid(allowance, 'Overbooking allowance: a number (2), or a change (+1, -1).');
        if (!changes.rate) return invalid(rate, 'Base rate: an amount (180 or 180.50), or a change (+5, -10%).');
        const all = [...changes.rooms.values(), changes.allowance, changes.rate];
        if (all.every((c) => c.kind === 'keep')) {
          return invalid(rooms.values().next().value ?? rate, 'Nothing to change: give rooms, an allowance or a rate.');
        }
        showPreview(changes);
        return undefined;
      } else if (action === 'restrictions') {
        change = {};
        const names = { SS: 'stop_sell', CTA: 'closed_to_arrival', CTD: 'closed_to_departure' };
        for (const [box, short] of flags) {
          if (box.dataset.touched && !box.indeterminate) change[names[short]] = box.checked;
        }
        for (const [input, key, label] of [[minStay, 'min_stay', 'Min stay'], [maxStay, 'max_stay', 'Max stay']]) {
          if (input.value.trim() === '') continue;
          const n = parseIntStrict(input.value);
          if (Number.isNaN(n) || n < 1) return invalid(input, `${label}: a whole number of nights, 1 or more.`);
          change[key] = n;
        }
        if (Object.keys(change).length === 0) {
          return invalid(stopSell.querySelector('input'), 'Nothing to change: tick or untick a box, or give a stay.');
        }
        if (restrictionPlan.value !== '') change.rate_plan_id = Number(restrictionPlan.value);
      } else {
        const cents = parseMoney(planRate.value, digits);
        if (Number.isNaN(cents)) return invalid(planRate, 'Rate: an amount such as 180 or 180.50.');
        if (ratePlan.value === '') return invalid(ratePlan, 'Pick a rate plan.');
        change = [{ rate_plan_id: Number(ratePlan.value), rate_cents: cents }];
      }
      const { types, first, last } = selectedRange();
      const end = addDays(last, 1);
      const updates = types.map((t) => ({ room_type_id: t.id, start_date: first, end_date: end, [action]: change }));
      const saving = hotelId;
      buttons.forEach((b) => { b.disabled = true; });
      status.replaceChildren(h('span', { class: 'pending' }, 'Saving…'));
      try {
        const answer = await ctx.api(`/v1/hotels/${saving}/ari`, { method: 'PUT', body: { updates } });
        if (!alive) return;
        const n = Number(answer?.nights ?? 0);
        status.replaceChildren(h('span', { class: 'ok' }, `Saved: ${plural(n, 'night', 'nights')}.`));
        if (action === 'restrictions') {
          for (const [box] of flags) {
            box.dataset.initial = String(box.checked);
            delete box.dataset.touched;
          }
        }
      } catch (e) {
        if (!alive) return;
        status.replaceChildren(h('span', { role: 'alert', class: 'error' }, errorText(e)));
      } finally {
        buttons.forEach((b) => { b.disabled = false; });
        ratePlanButton.disabled = plans.length === 0;
        if (alive && saving === hotelId) refresh();
      }
      return undefined;
    });

    function invalid(input, text) {
      status.replaceChildren(h('span', { role: 'alert', class: 'error' }, text));
      input.focus();
    }

    /**
     * What `changes` would do to each selected night, type by type: its values before
     * and after, the updates to send, and the updates that would put it back. Nights
     * without inventory are changed only when given rooms and a rate outright.
     */
    function inventoryPlan(changes) {
      const sections = [];
      const problems = [];
      const warnings = [];
      let skipped = 0;
      for (let r = sel.r0; r <= sel.r1; r += 1) {
        const type = roomTypes[r];
        const roomsChange = changes.rooms.get(type.id) ?? { kind: 'keep' };
        const rows = [];
        for (let c = sel.c0; c <= sel.c1; c += 1) {
          const shown = cellNight.get(cells[r][c]);
          const night = shown?.night;
          const none = !night || shown.none;
          const before = none ? null : { rooms: night.total_rooms, allowance: night.overbooking_allowance, rate: night.rate_cents };
          const after = {
            rooms: applyChange(roomsChange, before ? before.rooms : null),
            allowance: applyChange(changes.allowance, before ? before.allowance : 0),
            rate: applyChange(changes.rate, before ? before.rate : null),
          };
          if (none && (after.rooms == null || after.rate == null)) {
            skipped += 1;
            continue;
          }
          const changed = !before || ['rooms', 'allowance', 'rate'].some((k) => before[k] !== after[k]);
          if (!changed) continue;
          const where = `${type.name}, ${nights[c]}`;
          if (after.rooms < 0 || after.allowance < 0) problems.push(`${where}: rooms and overbooking cannot go below 0.`);
          if (after.rate != null && after.rate < 0) problems.push(`${where}: the rate cannot go below 0.`);
          const sold = night ? night.held + night.confirmed + night.blocked : 0;
          if (after.rooms + after.allowance < sold) {
            warnings.push(`${where}: ${sold} rooms are held, sold or set aside for blocks; the server refuses fewer.`);
          }
          rows.push({ date: nights[c], before, after });
        }
        sections.push({ type, rows, roomsChange });
      }
      const sent = (kind, before) => kind !== 'keep' || !before;
      const ranges = (pick) => {
        const updates = [];
        for (const { type, rows, roomsChange } of sections) {
          let open = null;
          for (const row of rows) {
            const inventory = pick(row, roomsChange);
            if (!inventory) { open = null; continue; }
            const same = open && open.end_date === row.date && JSON.stringify(open.inventory) === JSON.stringify(inventory);
            if (same) {
              open.end_date = addDays(row.date, 1);
            } else {
              open = { room_type_id: type.id, start_date: row.date, end_date: addDays(row.date, 1), inventory };
              updates.push(open);
            }
          }
        }
        return updates;
      };
      const forward = ranges((row, roomsChange) => {
        const inv = {};
        if (sent(roomsChange.kind, row.before)) inv.total_rooms = row.after.rooms;
        if (changes.allowance.kind !== 'keep') inv.overbooking_allowance = row.after.allowance;
        if (sent(changes.rate.kind, row.before) && row.after.rate != null) inv.rate_cents = row.after.rate;
        return inv;
      });
      const back = ranges((row, roomsChange) => {
        if (!row.before) return null;
        const inv = {};
        if (roomsChange.kind !== 'keep') inv.total_rooms = row.before.rooms;
        if (changes.allowance.kind !== 'keep') inv.overbooking_allowance = row.before.allowance;
        if (changes.rate.kind !== 'keep' && row.before.rate != null) inv.rate_cents = row.before.rate;
        return Object.keys(inv).length ? inv : null;
      });
      const count = sections.reduce((n, sec) => n + sec.rows.length, 0);
      const opened = sections.reduce((n, sec) => n + sec.rows.filter((row) => !row.before).length, 0);
      return { sections, problems, warnings, skipped, forward, back, count, opened };
    }

    function closePreview() {
      preview.hidden = true;
      preview.replaceChildren();
      inventoryButton.hidden = false;
    }

    function showPreview(changes) {
      const plan = inventoryPlan(changes);
      const money = (v) => (v == null ? '—' : fmtRate(v, digits));
      const value = (before, after, format = String) => {
        if (before == null) return h('span', { class: 'new' }, format(after));
        if (before === after) return h('span', { class: 'same' }, format(after));
        return h('span', { class: 'changed' }, `${format(before)} → ${format(after)}`);
      };
      const tables = plan.sections.map(({ type, rows }) => h('div', { class: 'preview-type', dataset: { roomType: String(type.id) } },
        h('h4', null, `${type.name}: ${rows.length === 0 ? 'no night changes' : plural(rows.length, 'night', 'nights')}`),
        rows.length === 0 ? null : h('table', { class: 'data preview-table', 'aria-label': `Changes to ${type.name}` },
          h('thead', null, h('tr', null, ['Night', 'Rooms', 'Overbooking', 'Rate'].map((t) => h('th', { scope: 'col' }, t)))),
          h('tbody', null, rows.map((row) => h('tr', { dataset: { night: row.date, roomType: String(type.id) } },
            h('th', { scope: 'row', class: 'nowrap' }, row.date),
            h('td', { dataset: { field: 'rooms' } }, value(row.before?.rooms, row.after.rooms)),
            h('td', { dataset: { field: 'allowance' } }, value(row.before?.allowance, row.after.allowance)),
            h('td', { dataset: { field: 'rate' } }, value(row.before?.rate, row.after.rate, money))))))));
      const save = h('button', { type: 'button', class: 'primary save-changes', disabled: plan.count === 0 || plan.problems.length > 0 },
        `Save ${plural(plan.count, 'night', 'nights')}`);
      const back = h('button', { type: 'button', class: 'back' }, 'Back');
      back.addEventListener('click', () => { closePreview(); inventoryButton.focus(); });
      save.addEventListener('click', () => saveInventory(plan, save, back));
      preview.replaceChildren(...[
        h('h3', null, plan.count === 0 ? 'Nothing would change' : `Check before saving: ${plural(plan.count, 'night changes', 'nights change')}`),
        plan.problems.length ? h('ul', { role: 'alert', class: 'error problems' }, plan.problems.map((t) => h('li', null, t))) : null,
        plan.warnings.length ? h('ul', { class: 'warning' }, plan.warnings.map((t) => h('li', null, t))) : null,
        plan.skipped ? h('p', { class: 'hint' }, `${plural(plan.skipped, 'night has', 'nights have')} no inventory yet and ${plan.skipped === 1 ? 'is' : 'are'} left out: give rooms and a rate as numbers to put ${plan.skipped === 1 ? 'it' : 'them'} on sale.`) : null,
        ...tables,
        h('div', { class: 'actions' }, save, back)].filter(Boolean));
      preview.hidden = false;
      inventoryButton.hidden = true;
      preview.focus();
    }

    async function saveInventory(plan, save, back) {
      const saving = hotelId;
      save.disabled = true;
      back.disabled = true;
      buttons.forEach((b) => { b.disabled = true; });
      status.replaceChildren(h('span', { class: 'pending' }, 'Saving…'));
      try {
        const answer = await ctx.api(`/v1/hotels/${saving}/ari`, { method: 'PUT', body: { updates: plan.forward } });
        if (!alive) return;
        const n = Number(answer?.nights ?? 0);
        closePreview();
        status.replaceChildren(h('span', { class: 'ok' }, `Saved: ${plural(n, 'night', 'nights')}.`));
        offerUndo({ hotel: saving, back: plan.back, nights: plan.count, opened: plan.opened });
      } catch (e) {
        if (!alive) return;
        closePreview();
        status.replaceChildren(h('span', { role: 'alert', class: 'error' }, errorText(e)));
      } finally {
        buttons.forEach((b) => { b.disabled = false; });
        ratePlanButton.disabled = plans.length === 0;
        if (alive && saving === hotelId) refresh();
      }
    }

    const values = [allowance, rate, minStay, maxStay, planRate];
    return { section, summary, range, status, rooms, setRooms, closePreview, allowance, rate, flags, values, restrictionPlan, ratePlan, ratePlanNote, ratePlanButton };
  }

  // -- Undo ------------------------------------------------------------------------------

  /** Offers to put back the last inventory change saved here (one at a time). */
  function offerUndo(change) {
    lastChange = change;
    const button = h('button', { type: 'button', class: 'undo' }, 'Undo last change');
    button.addEventListener('click', () => undo(button));
    const undoable = change.back.length > 0;
    undoBar.replaceChildren(...[
      h('span', null, `Last inventory change: ${plural(change.nights, 'night', 'nights')} of hotel #${change.hotel}.`),
      undoable ? button : null,
      change.opened ? h('span', { class: 'hint' }, ` ${plural(change.opened, 'night', 'nights')} had no inventory before; undo leaves ${change.opened === 1 ? 'it' : 'them'} on sale (stop-sell to close).`) : null]
      .filter(Boolean));
  }

  async function undo(button) {
    const change = lastChange;
    if (!change) return;
    button.disabled = true;
    try {
      const answer = await ctx.api(`/v1/hotels/${change.hotel}/ari`, { method: 'PUT', body: { updates: change.back } });
      if (!alive) return;
      lastChange = null;
      undoBar.replaceChildren(h('span', { class: 'ok' },
        `Undone: ${plural(Number(answer?.nights ?? 0), 'night is', 'nights are')} back as ${Number(answer?.nights ?? 0) === 1 ? 'it was' : 'they were'}.`));
    } catch (e) {
      if (!alive) return;
      button.disabled = false;
      undoBar.append(h('span', { role: 'alert', class: 'error' }, ` Undo failed: ${errorText(e)}`));
    } finally {
      if (alive && change.hotel === hotelId) refresh();
    }
  }

  // -- The view -------------------------------------------------------------------------
  return {
    update(route) {
      apply(route);
      return true;
    },
    destroy() {
      alive = false;
      stopPolling();
      document.removeEventListener('visibilitychange', onVisibility);
      document.removeEventListener('mouseup', onMouseUp);
    },
  };
}

function legend() {
  const item = (cls, text) => h('li', null, h('span', { class: ['swatch', cls], 'aria-hidden': 'true' }), text);
  return h('div', { class: 'legend', role: 'group', 'aria-label': 'Legend' },
    h('ul', { class: 'legend-occ' },
      item('occ-0', '< 20 %'), item('occ-1', '20–50 %'), item('occ-2', '50–80 %'), item('occ-3', '80–100 %'),
      item('occ-full', 'Full'), item('stopped', 'Stop-sell'), item('no-inventory', 'No inventory')),
    h('p', { class: 'legend-marks' },
      'Cell: left/capacity · rate · H held, C confirmed, B set aside for blocks (a band each, picked up/rooms). SS stop-sell · CTA/CTD closed to arrival/departure · min/max stay · MST min stay-through · “·2”: rate plan 2 only.'),
  );
}
