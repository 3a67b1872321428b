// Reservations: the search (`#/reservations?...`) and one reservation's page
// (`#/reservations/<id>`) with its money, messages, history and the staff actions.

import { errorText, ApiError } from './api.js';
import { h, field, fmtMoney, fmtInt, fmtDateTime, fmtTime, plural, uuid, isDate, referenceOf, downloadCsv, hotelOption } from './util.js';

const STATUSES = ['held', 'confirmed', 'cancelled', 'expired', 'checked_in', 'checked_out', 'no_show', 'declined'];
const FILTERS = ['reference', 'guest_email', 'date', 'hotel_id', 'status'];

function statusBadge(status, extraClass) {
  return h('span', { class: ['badge', extraClass, `st-${status}`], dataset: { status } }, String(status).replace(/_/g, ' '));
}

function hotelLabel(hotels, id) {
  const hotel = hotels.find((x) => x.hotel_id === id);
  return hotel ? `${hotel.name} (#${id})` : `#${id}`;
}

function roomTypeLabel(hotels, hotelId, id) {
  const rt = hotels.find((x) => x.hotel_id === hotelId)?.room_types?.find((r) => r.room_type_id === id);
  return rt ? `${rt.name} (#${id})` : `#${id}`;
}

// A reservation of several room types (`lines`): each line's room type and rooms.
function severalLines(r) {
  return Array.isArray(r.lines) && r.lines.length > 1 ? r.lines : null;
}

function roomTypesLabel(hotels, r) {
  const lines = severalLines(r);
  if (!lines) return roomTypeLabel(hotels, r.hotel_id, r.room_type_id);
  return lines.map((l) => `${roomTypeLabel(hotels, r.hotel_id, l.room_type_id)} × ${fmtInt(l.rooms)}`).join(', ');
}

function planLabel(hotels, hotelId, id) {
  if (id == null) return 'Base rate';
  const plan = hotels.find((x) => x.hotel_id === hotelId)?.rate_plans?.find((p) => p.rate_plan_id === id);
  return plan ? `${plan.name} (#${id})` : `Plan #${id}`;
}

function policyWords(policy) {
  if (!policy) return '—';
  if (policy.refundable === false) return 'Non-refundable: a cancellation refunds nothing.';
  const parts = [];
  if (policy.full_refund_hours != null) parts.push(`full refund up to ${policy.full_refund_hours} h before check-in`);
  if (policy.partial_refund_hours != null && policy.partial_refund_percent != null) {
    parts.push(`${policy.partial_refund_percent} % back up to ${policy.partial_refund_hours} h before`);
  }
  parts.push('nothing after');
  return `Refundable: ${parts.join('; ')} (check-in 15:00 local time on arrival).`;
}

function dl(pairs) {
  return h('dl', { class: 'facts' }, pairs.filter(Boolean).map(([term, value, key]) =>
    h('div', { class: 'fact', dataset: { field: key } }, h('dt', null, term), h('dd', null, value))));
}

async function hotelsOrEmpty(ctx) {
  try {
    return await ctx.hotels();
  } catch {
    return [];
  }
}

// ---------------------------------------------------------------------------
// Search.

export function mountReservationSearch(root, ctx, firstRoute) {
  let alive = true;
  let searchGen = 0;
  ctx.setTitle('Reservations');

  // A reference as a guest reads it out: any case, with or without a hyphen (the server
  // reads O as 0 and I, L as 1, and says what is wrong with anything else).
  const reference = h('input', { id: 'res-reference', name: 'reference', autocomplete: 'off', spellcheck: 'false',
    maxlength: '12', placeholder: 'K7M29QXD', class: 'mono' });
  const email = h('input', { id: 'res-email', name: 'guest_email', type: 'email', autocomplete: 'off' });
  const night = h('input', { id: 'res-night', name: 'date', type: 'date' });
  const hotel = h('select', { id: 'res-hotel', name: 'hotel_id' }, h('option', { value: '' }, 'Any hotel'));
  const status = h('select', { id: 'res-status', name: 'status' },
    h('option', { value: '' }, 'Any'), STATUSES.map((s) => h('option', { value: s }, s)));
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Search');
  const form = h('form', { class: 'search-form', role: 'search', 'aria-label': 'Find reservations' },
    // Whether an address has stays here is personal data: only roles that see guests
    // search by it (the server refuses the others).
    field('Reference', reference, 'field-reference'), ctx.can.seeGuests ? field('Guest e-mail', email, 'field-email') : null,
    field('Night', night), field('Hotel', hotel), field('Status', status),
    h('div', { class: 'actions' }, submit));
  const info = h('p', { role: 'status', class: 'result-info' });
  const results = h('div', { class: 'results table-wrap' });
  const exportButton = h('button', { type: 'button', class: 'export-csv', disabled: true }, 'Export CSV');
  exportButton.addEventListener('click', exportRows);

  root.append(h('h1', { tabindex: '-1' }, 'Reservations'), form, h('div', { class: 'result-bar' }, info, exportButton), results);

  let hotels = [];
  let currentQuery = new URLSearchParams();
  let lastRows = null;
  hotelsOrEmpty(ctx).then((list) => {
    if (!alive) return;
    hotels = list;
    const keep = hotel.value || currentQuery.get('hotel_id') || '';
    hotel.replaceChildren(h('option', { value: '' }, 'Any hotel'),
      ...list.map((x) => hotelOption(x)));
    hotel.value = keep;
    if (lastRows) showRows(lastRows);
  });

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    if (!email.reportValidity()) return;
    const q = new URLSearchParams();
    const values = { reference: reference.value.trim(), guest_email: email.value.trim(), date: night.value, hotel_id: hotel.value, status: status.value };
    for (const key of FILTERS) if (values[key]) q.set(key, values[key]);
    const hash = `#/reservations${q.toString() ? `?${q}` : ''}`;
    if (location.hash === hash) search(q);
    else location.hash = hash; // the router calls update()
  });

  function fillForm(q) {
    reference.value = q.get('reference') ?? '';
    email.value = q.get('guest_email') ?? '';
    night.value = isDate(q.get('date')) ? q.get('date') : '';
    if (q.get('hotel_id') && ![...hotel.options].some((o) => o.value === q.get('hotel_id'))) {
      hotel.append(h('option', { value: q.get('hotel_id') }, `#${q.get('hotel_id')}`));
    }
    hotel.value = q.get('hotel_id') ?? '';
    status.value = STATUSES.includes(q.get('status')) ? q.get('status') : '';
  }

  async function search(q) {
    currentQuery = q;
    const mine = ++searchGen;
    // A date in the address that is not a day (typed by hand, 2027-02-30) is said so
    // here, in the page's words, rather than sent.
    if (q.get('date') && !isDate(q.get('date'))) {
      lastRows = null;
      info.textContent = 'The search was not made.';
      results.replaceChildren(h('p', { role: 'alert', class: 'error' },
        `Night: "${q.get('date')}" in the address is not a date that exists (YYYY-MM-DD).`));
      return;
    }
    const params = new URLSearchParams();
    for (const key of FILTERS) if (q.get(key)) params.set(key, q.get(key));
    params.set('limit', '100');
    submit.disabled = true;
    info.textContent = 'Searching…';
    try {
      const body = await ctx.api(`/v1/reservations?${params}`);
      if (!alive || mine !== searchGen) return;
      const rows = Array.isArray(body?.reservations) ? body.reservations : [];
      lastRows = rows;
      const asOf = body?.as_of ? ` · as of ${fmtTime(body.as_of)}` : '';
      info.textContent = rows.length === 0
        ? `No reservations found${asOf}.`
        : `${plural(rows.length, 'reservation', 'reservations')}${rows.length >= 100 ? ' (the first 100)' : ''}${asOf}`;
      showRows(rows);
    } catch (e) {
      if (!alive || mine !== searchGen) return;
      lastRows = null;
      exportButton.disabled = true;
      info.textContent = 'The search failed.';
      results.replaceChildren(h('p', { role: 'alert', class: 'error' }, errorText(e)));
    } finally {
      if (mine === searchGen) submit.disabled = false;
    }
  }

  /** The search's rows as CSV (what the table shows, ids and amounts unformatted). */
  function exportRows() {
    if (!lastRows?.length) return;
    const header = ['reference', 'reservation_id', 'guest_name', 'guest_email', 'hotel_id', 'room_types', 'start_date',
      'end_date', 'rooms', 'status', 'total_due_cents', 'currency', 'channel'];
    const rows = lastRows.map((r) => [r.reference ?? referenceOf(r.reservation_id), r.reservation_id, r.guest?.name ?? '',
      r.guest?.email ?? '', r.hotel_id, roomTypesLabel(hotels, r), r.start_date, r.end_date, r.rooms, r.status,
      r.total_due_cents ?? r.total_cents, r.currency, r.channel]);
    downloadCsv(`reservations-${new Date().toISOString().slice(0, 10)}.csv`, [header, ...rows]);
    ctx.announce('The reservations found were exported as CSV.');
  }

  function showRows(rows) {
    exportButton.disabled = rows.length === 0;
    if (rows.length === 0) {
      results.replaceChildren();
      return;
    }
    const head = h('tr', null, ['Reference', 'Guest', 'E-mail', 'Hotel', 'Room type', 'Dates', 'Rooms', 'Status', 'Total due']
      .map((t) => h('th', { scope: 'col', class: ['Rooms', 'Total due'].includes(t) ? 'num' : null }, t)));
    const body = h('tbody', null, rows.map((r) => h('tr', { dataset: { reservationId: r.reservation_id } },
      h('td', { class: 'mono' }, h('a', { href: `#/reservations/${encodeURIComponent(r.reservation_id)}`, title: r.reservation_id },
        String(r.reference ?? referenceOf(r.reservation_id) ?? r.reservation_id))),
      h('td', null, String(r.guest?.name ?? '')),
      h('td', null, String(r.guest?.email ?? '')),
      h('td', null, hotelLabel(hotels, r.hotel_id)),
      h('td', null, roomTypesLabel(hotels, r)),
      h('td', { class: 'nowrap' }, `${r.start_date} → ${r.end_date}`, ' ', h('span', { class: 'muted' }, `(${plural(r.nights, 'night', 'nights')})`)),
      h('td', { class: 'num' }, fmtInt(r.rooms)),
      h('td', null, statusBadge(r.status)),
      h('td', { class: 'num' }, fmtMoney(r.total_due_cents ?? r.total_cents, r.currency)),
    )));
    results.replaceChildren(h('table', { class: 'data reservations-table', 'aria-label': 'Reservations found' },
      h('thead', null, head), body));
  }

  function run(route) {
    fillForm(route.query);
    search(route.query);
  }
  run(firstRoute);

  return {
    update(route) {
      if (route.seg[1]) return false;
      run(route);
      return true;
    },
    destroy() {
      alive = false;
    },
  };
}

// ---------------------------------------------------------------------------
// One reservation.

const ACTIONS = {
  held: ['cancel'],
  confirmed: ['cancel', 'check-in', 'no-show'],
  checked_in: ['check-out'],
};
const ACTION_TEXT = { cancel: 'Cancel', 'check-in': 'Check in', 'check-out': 'Check out', 'no-show': 'No-show' };
const ACTION_DONE = {
  cancel: 'Reservation cancelled.',
  'check-in': 'Checked in.',
  'check-out': 'Checked out.',
  'no-show': 'Marked as no-show.',
};

export function mountReservation(root, ctx, route) {
  const id = route.seg[1];
  const admin = ctx.can.workStays; // the front desk and admins act on a stay
  const seesGuests = ctx.can.seeGuests;
  let alive = true;
  let loadGen = 0;
  let hotels = [];
  const shortRef = referenceOf(id) ?? id;
  ctx.setTitle(`Reservation ${shortRef}`);

  const section = (key, title) => {
    const body = h('div', { class: 'section-body' }, h('p', { class: 'loading' }, 'Loading…'));
    const el = h('section', { class: ['card', `sec-${key}`], 'aria-labelledby': `sec-${key}-h`, dataset: { section: key } },
      h('h2', { id: `sec-${key}-h` }, title), body);
    return { el, body };
  };
  const stay = section('stay', 'Stay');
  const guest = section('guest', 'Guest');
  const money = section('money', 'Money');
  const messages = section('messages', 'Messages');
  const history = section('history', 'History');
  const top = h('div', { class: 'page-alerts' });

  let actions = null;
  if (admin) {
    const buttons = h('div', { class: 'action-buttons' });
    const step = h('div', { class: 'action-step' });
    const status = h('div', { role: 'status', class: 'action-status' });
    const el = h('section', { class: 'card sec-actions', 'aria-labelledby': 'sec-actions-h', dataset: { section: 'actions' } },
      h('h2', { id: 'sec-actions-h' }, 'Actions'), buttons, step, status);
    actions = { el, buttons, step, status, busy: false };
  }

  root.append(
    h('p', { class: 'crumbs' }, h('a', { href: '#/reservations', class: 'back-link' }, '← Back to the search')),
    h('h1', { tabindex: '-1' }, 'Reservation ', h('span', { class: 'mono reference' }, shortRef)),
    h('p', { class: 'muted mono full-id' }, id),
    top,
    h('div', { class: 'cards' }, stay.el, actions?.el, guest.el, money.el),
    messages.el,
    history.el,
  );

  async function load() {
    const mine = ++loadGen;
    hotels = await hotelsOrEmpty(ctx);
    if (!alive || mine !== loadGen) return;
    const base = `/v1/reservations/${encodeURIComponent(id)}`;
    const reservation = ctx.api(base);
    const events = ctx.api(`${base}/events`);
    // Messages carry personal data: only staff may read them (the server answers an
    // auditor 403; asking anyway would only log a failed request).
    const msgs = seesGuests ? ctx.api(`${base}/messages`) : Promise.reject(new ApiError(403, 'forbidden', 'not for this role'));

    reservation.then((r) => {
      if (!alive || mine !== loadGen) return;
      top.replaceChildren();
      showReservation(r);
    }, (e) => {
      if (!alive || mine !== loadGen) return;
      const text = e instanceof ApiError && e.status === 404 ? `not_found: no reservation ${id}.` : errorText(e);
      top.replaceChildren(h('p', { role: 'alert', class: 'error' }, `Could not load the reservation: ${text}`));
      for (const s of [stay, guest, money]) s.body.replaceChildren(h('p', { class: 'muted' }, '—'));
      if (actions) actions.buttons.replaceChildren();
    });
    msgs.then((body) => {
      if (alive && mine === loadGen) showMessages(body);
    }, (e) => {
      if (!alive || mine !== loadGen) return;
      if (e instanceof ApiError && e.status === 403) {
        messages.body.replaceChildren(h('p', { class: 'muted not-visible' }, 'Not visible to this role (personal data).'));
      } else {
        messages.body.replaceChildren(h('p', { role: 'alert', class: 'error' }, errorText(e)));
      }
    });
    events.then((body) => {
      if (alive && mine === loadGen) showEvents(body);
    }, (e) => {
      if (alive && mine === loadGen) history.body.replaceChildren(h('p', { role: 'alert', class: 'error' }, errorText(e)));
    });
  }

  function showReservation(r) {
    const held = r.status === 'held' || r.status === 'expired';
    const lines = severalLines(r);
    // One room type: its fields; several: a row per line with its rooms, guests, plan
    // and price.
    const rooms = lines
      ? lines.map((l, i) => [`Room type ${i + 1}`,
        `${roomTypeLabel(hotels, r.hotel_id, l.room_type_id)} × ${fmtInt(l.rooms)}, ${fmtInt(l.guests)} per room, `
          + `${planLabel(hotels, r.hotel_id, l.rate_plan_id)}, ${fmtMoney(l.total_cents, r.currency)}`, `line_${i}`])
      : [
        ['Room type', roomTypeLabel(hotels, r.hotel_id, r.room_type_id), 'room_type'],
        ['Guests', r.guests == null ? '—' : `${fmtInt(r.guests)} per room`, 'guests'],
        ['Rate plan', planLabel(hotels, r.hotel_id, r.rate_plan_id), 'rate_plan'],
      ];
    stay.body.replaceChildren(dl([
      ['Status', statusBadge(r.status, 'status'), 'status'],
      ['Hotel', hotelLabel(hotels, r.hotel_id), 'hotel'],
      ['Dates', `${r.start_date} → ${r.end_date}`, 'dates'],
      ['Nights', fmtInt(r.nights), 'nights'],
      ['Rooms', fmtInt(r.rooms), 'rooms'],
      ...rooms,
      ['Channel', String(r.channel ?? '—'), 'channel'],
      held && ['Hold expiry', fmtDateTime(r.hold_expires_at), 'hold_expires_at'],
      ['Created', fmtDateTime(r.created_at), 'created_at'],
      ['Updated', fmtDateTime(r.updated_at), 'updated_at'],
    ]));
    const g = r.guest && typeof r.guest === 'object' ? r.guest : {};
    const extra = Object.entries(g).filter(([k, v]) => k !== 'name' && k !== 'email' && typeof v !== 'object');
    guest.body.replaceChildren(dl([
      ['Name', String(g.name ?? '—'), 'guest_name'],
      ['E-mail', String(g.email ?? '—'), 'guest_email'],
      ...extra.map(([k, v]) => [k, String(v), `guest_${k}`]),
    ]));
    const p = r.payment ?? {};
    const cur = r.currency;
    const taxes = Array.isArray(r.taxes) ? r.taxes : [];
    money.body.replaceChildren(dl([
      ['Currency', String(cur ?? '—'), 'currency'],
      ['Room price', fmtMoney(r.total_cents, cur), 'total'],
      ...taxes.map((t) => [`${t.code}${t.included ? ' (in the price)' : ''}`, fmtMoney(t.amount_cents, cur), `tax_${t.code}`]),
      ['Total due', fmtMoney(r.total_due_cents ?? r.total_cents, cur), 'total_due'],
      r.paid_cents != null && ['Paid (taken, less refunds)', fmtMoney(r.paid_cents, cur), 'paid'],
      ['Payment', String(p.status ?? '—'), 'payment_status'],
      ['Authorized on the card', fmtMoney(p.authorized_cents, cur), 'authorized'],
      p.to_capture_cents != null && ['To be captured', fmtMoney(p.to_capture_cents, cur), 'to_capture'],
      ['Captured', fmtMoney(p.captured_cents, cur), 'captured'],
      ['Refunded', fmtMoney(p.refunded_cents, cur), 'refunded'],
      r.status === 'cancelled' && r.refund_cents != null && ['Refunded by the cancellation', fmtMoney(r.refund_cents, cur), 'refund'],
      lines
        ? ['Cancellation policy', 'Each room type by the policy of its plan (above).', 'policy']
        : ['Cancellation policy', policyWords(r.cancellation_policy), 'policy'],
    ]));
    showActions(r.status);
  }

  function showActions(status) {
    if (!actions) return;
    actions.step.replaceChildren();
    actions.buttons.hidden = false;
    const kinds = ACTIONS[status] ?? [];
    if (kinds.length === 0) {
      actions.buttons.replaceChildren(h('p', { class: 'muted' }, `No staff action for a ${String(status).replace(/_/g, ' ')} reservation.`));
      return;
    }
    actions.buttons.replaceChildren(...kinds.map((kind) => {
      const b = h('button', { type: 'button', class: kind === 'cancel' || kind === 'no-show' ? 'danger' : 'primary', dataset: { action: kind } }, ACTION_TEXT[kind]);
      b.addEventListener('click', () => {
        if (kind === 'cancel') askCancel();
        else if (kind === 'no-show') askNoShow();
        else run(kind);
      });
      return b;
    }));
  }

  function askCancel() {
    const reason = h('input', { id: 'cancel-reason', name: 'reason', type: 'text', maxlength: '500', autocomplete: 'off' });
    const back = h('button', { type: 'button' }, 'Keep reservation');
    back.addEventListener('click', closeStep);
    const form = h('form', { class: 'inline-step', 'aria-label': 'Cancel reservation' },
      field('Reason (optional)', reason),
      h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'danger' }, 'Confirm cancellation'), back));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      const text = reason.value.trim();
      run('cancel', text ? { reason: text } : {});
    });
    openStep(form);
    reason.focus();
  }

  function askNoShow() {
    const confirm = h('button', { type: 'button', class: 'danger' }, 'Confirm no-show');
    confirm.addEventListener('click', () => run('no-show'));
    const back = h('button', { type: 'button' }, 'Back');
    back.addEventListener('click', closeStep);
    openStep(h('div', { class: 'inline-step', role: 'group', 'aria-label': 'Mark as no-show' },
      h('p', null, 'Mark the guest as not arrived? The stay ends and the rooms are released.'),
      h('div', { class: 'actions' }, confirm, back)));
    confirm.focus();
  }

  /** Show a confirmation step in place of the action buttons. */
  function openStep(content) {
    actions.buttons.hidden = true;
    actions.step.replaceChildren(content);
  }

  function closeStep() {
    actions.step.replaceChildren();
    actions.buttons.hidden = false;
    actions.buttons.querySelector('button')?.focus();
  }

  async function run(kind, body) {
    if (actions.busy) return;
    actions.busy = true;
    for (const b of actions.el.querySelectorAll('button')) b.disabled = true;
    actions.status.replaceChildren(h('span', { class: 'pending' }, 'Working…'));
    const headers = { 'Idempotency-Key': `console-${uuid()}` };
    try {
      await ctx.api(`/v1/reservations/${encodeURIComponent(id)}/${kind}`, { method: 'POST', headers, body });
      if (!alive) return;
      actions.status.replaceChildren(h('span', { class: 'ok' }, ACTION_DONE[kind]));
    } catch (e) {
      if (!alive) return;
      actions.status.replaceChildren(h('span', { role: 'alert', class: 'error' }, errorText(e)));
    } finally {
      actions.busy = false;
      for (const b of actions.el.querySelectorAll('button')) b.disabled = false;
    }
    actions.step.replaceChildren();
    actions.buttons.hidden = false;
    load();
  }

  function showMessages(body) {
    const list = Array.isArray(body?.messages) ? body.messages : [];
    if (list.length === 0) {
      messages.body.replaceChildren(h('p', { class: 'muted' }, 'No messages.'));
      return;
    }
    messages.body.replaceChildren(h('div', { class: 'table-wrap' }, h('table', { class: 'data', 'aria-label': 'Messages' },
      h('thead', null, h('tr', null, ['Kind', 'To', 'State', 'Created', 'Sent', 'Attempts', 'Last error']
        .map((t) => h('th', { scope: 'col', class: t === 'Attempts' ? 'num' : null }, t)))),
      h('tbody', null, list.map((m) => h('tr', { dataset: { state: m.state } },
        h('td', null, String(m.kind ?? '')),
        h('td', null, String(m.to ?? '')),
        h('td', null, h('span', { class: ['badge', `msg-${m.state}`] }, String(m.state ?? ''))),
        h('td', { class: 'nowrap' }, fmtDateTime(m.created_at)),
        h('td', { class: 'nowrap' }, fmtDateTime(m.sent_at)),
        h('td', { class: 'num' }, fmtInt(m.attempts)),
        h('td', { class: 'wrap' }, String(m.last_error ?? ''))))))));
  }

  function showEvents(body) {
    const list = Array.isArray(body?.events) ? body.events : [];
    if (list.length === 0) {
      history.body.replaceChildren(h('p', { class: 'muted' }, 'No events.'));
      return;
    }
    history.body.replaceChildren(h('div', { class: 'table-wrap' }, h('table', { class: 'data events', 'aria-label': 'History' },
      h('thead', null, h('tr', null, ['Version', 'Type', 'Recorded', 'Data']
        .map((t) => h('th', { scope: 'col', class: t === 'Version' ? 'num' : null }, t)))),
      h('tbody', null, list.map((ev) => h('tr', { dataset: { version: ev.version, type: ev.type } },
        h('td', { class: 'num' }, String(ev.version ?? '')),
        h('td', null, h('code', null, String(ev.type ?? ''))),
        h('td', { class: 'nowrap' }, fmtDateTime(ev.recorded_at)),
        h('td', null, h('details', null,
          h('summary', null, 'data'),
          h('pre', null, JSON.stringify(ev.data ?? null, null, 2)),
          ev.metadata != null ? h('pre', { class: 'meta' }, `metadata: ${JSON.stringify(ev.metadata, null, 2)}`) : null))))))));
  }

  load();

  return {
    update() {
      return false; // another id: a fresh page
    },
    destroy() {
      alive = false;
    },
  };
}
