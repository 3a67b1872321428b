// The staff console in Debian's Chromium, step by step, as staff would use it: sign
// in, read a night, watch a hold arrive without a reload, stop-sell a range from the
// calendar, be told why an inventory cut is refused, cancel a stay from its page and
// see its nights come back, run the audit. Then an auditor (sees, changes nothing) and a
// wrong password (refused, nothing stored in the page).
//
// Run by `cargo test` (tests/console/browser.rs), which starts the server, makes the
// data and passes it here in the environment. Each step leaves a screenshot in
// $SCREENSHOTS. Any console error or uncaught exception in the page fails the run.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { createRequire } from 'node:module';
import { chromium } from 'playwright-core';

const axeSource = createRequire(import.meta.url)('axe-core').source;

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (this scenario is run by cargo test)`);
  return value;
};

const BASE = env('BASE_URL');
// Machine tokens, for the API calls the scenario makes beside the browser.
const ADMIN_TOKEN = env('ADMIN_TOKEN');
const AUDITOR_TOKEN = env('AUDITOR_TOKEN');
const CHANNEL = env('CHANNEL_TOKEN');
// The people who sign in to the console (one password for all).
const ADMIN = env('ADMIN_EMAIL');
const AUDITOR = env('AUDITOR_EMAIL');
const PASSWORD = env('STAFF_PASSWORD');
const HOTEL = Number(env('HOTEL_ID'));
const ROOM_TYPE = Number(env('ROOM_TYPE_ID'));
const MONTH = env('MONTH');
const WATCHED = env('WATCHED_NIGHT');
const TWIN = Number(env('TWIN_ID'));
const RESERVATION = env('RESERVATION_ID');
const GUEST_EMAIL = env('GUEST_EMAIL');
const SHOTS = env('SCREENSHOTS');
const WAIT = 20_000;

let browser;
const problems = [];
/** Every answer of 400 and above the pages received, as "409 PUT /v1/...". */
const refusals = [];

/** A day `n` days after `date` (YYYY-MM-DD), as YYYY-MM-DD. */
function plusDays(date, n) {
  const d = new Date(`${date}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + n);
  return d.toISOString().slice(0, 10);
}

async function api(method, url, token, body) {
  const headers = { Authorization: `Bearer ${token}` };
  if (method !== 'GET') headers['Idempotency-Key'] = `e2e-${randomUUID()}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(`${BASE}${url}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, json: text ? JSON.parse(text) : null };
}

async function calendarNight(night, roomType = ROOM_TYPE) {
  const end = plusDays(night, 1);
  const reply = await api('GET', `/v1/hotels/${HOTEL}/calendar?start_date=${night}&end_date=${end}`, ADMIN_TOKEN);
  assert.equal(reply.status, 200, JSON.stringify(reply.json));
  return reply.json.room_types.find((rt) => rt.room_type_id === roomType).nights[0];
}

/** Rooms and rate of `roomType` on each of `dates`, as the API reads them: `[[rooms, rate], ...]`. */
async function levels(dates, roomType) {
  const out = [];
  for (const date of dates) {
    const night = await calendarNight(date, roomType);
    out.push([night.total_rooms, night.rate_cents]);
  }
  return out;
}

/**
 * Retries `check` (which throws while its assertion fails) for up to WAIT ms: the
 * calendar is the read model, which follows a write a moment later.
 */
async function eventually(check) {
  const deadline = Date.now() + WAIT;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/**
 * A page of its own (1280×800 unless told), whose console errors fail the run; its
 * answers of 400 and above go to `answers` (the run's `refusals` unless told).
 */
async function newPage(viewport = { width: 1280, height: 800 }, options = {}, answers = refusals) {
  const context = await browser.newContext({ viewport, ...options });
  const page = await context.newPage();
  page.on('console', (message) => {
    // Chromium itself logs every answer of 400 and above as "Failed to load
    // resource"; those are checked below, answer by answer, against the refusals the
    // scenario provokes.
    const refusal = /^Failed to load resource: the server responded with a status of 4\d\d/;
    if ((message.type() === 'error' || message.type() === 'warning') && !refusal.test(message.text())) {
      problems.push(`console ${message.type()}: ${message.text()}`);
    }
  });
  page.on('response', (response) => {
    if (response.status() >= 400) {
      const url = new URL(response.url());
      answers.push(`${response.status()} ${response.request().method()} ${url.pathname}`);
    }
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  return page;
}

async function shot(page, name) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
}

async function signIn(page, email, password = PASSWORD) {
  await page.goto(`${BASE}/console/`);
  await page.fill('input[name="email"]', email);
  await page.fill('input[name="password"]', password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

const cell = (page, night, roomType = ROOM_TYPE) => page.locator(`td[data-night="${night}"][data-room-type="${roomType}"]`);

async function roomsLeft(page, night) {
  const text = await cell(page, night).locator('.left').textContent();
  return Number(text.trim());
}

/** Waits (without reloading) until the cell of `night` shows `left` rooms left. */
async function untilLeft(page, night, left) {
  await page.waitForFunction(
    ([n, roomType, l]) => {
      const el = document.querySelector(`td[data-night="${n}"][data-room-type="${roomType}"] .left`);
      return el && Number(el.textContent.trim()) === l;
    },
    [night, ROOM_TYPE, left],
    { timeout: WAIT },
  );
}

async function openCalendar(page) {
  await page.goto(`${BASE}/console/#/calendar/${HOTEL}?month=${MONTH}`);
  await cell(page, WATCHED).waitFor({ timeout: WAIT });
}

before(async () => {
  browser = await chromium.launch({
    executablePath: env('CHROMIUM_PATH'),
    args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update'],
  });
});

after(async () => {
  await browser?.close();
});

test('staff sign in, watch a hold arrive, stop-sell a range and cancel a stay', async () => {
  const page = await newPage();

  // Sign in as the admin.
  await page.goto(`${BASE}/console/`);
  await shot(page, '01-sign-in');
  await signIn(page, ADMIN);
  await page.getByRole('button', { name: 'Sign out' }).waitFor({ timeout: WAIT });

  // The watched night shows the rooms left the API reports (once the read model has
  // the catalog the test made a moment ago: its plan's rates were set last).
  const before = await eventually(async () => {
    const night = await calendarNight(WATCHED);
    assert.ok(night.prices.some((p) => p.rate_cents === 21000), JSON.stringify(night));
    return night;
  });
  await openCalendar(page);
  await untilLeft(page, WATCHED, before.remaining);
  assert.match(await cell(page, WATCHED).textContent(), new RegExp(`${before.remaining}`));
  await shot(page, '02-calendar');

  // The cells show the base rate, or a plan's (the Flexible plan sells at 210).
  assert.equal((await cell(page, WATCHED).locator('.rate').textContent()).trim(), '180');
  await page.getByLabel('Rates shown').selectOption({ label: 'Flexible (#1)' });
  await page.waitForFunction(
    ([night, roomType]) => document.querySelector(`td[data-night="${night}"][data-room-type="${roomType}"] .rate`)?.textContent.trim() === '210',
    [WATCHED, ROOM_TYPE],
    { timeout: WAIT },
  );
  await page.getByLabel('Rates shown').selectOption({ label: 'Base rate' });

  // A hold through the API: the cell drops by one without a reload.
  await page.evaluate(() => { window.stillTheSamePage = true; });
  const hold = await api('POST', '/v1/reservations', CHANNEL, {
    hotel_id: HOTEL, room_type_id: ROOM_TYPE, start_date: WATCHED, end_date: plusDays(WATCHED, 1),
    rooms: 1, guest: { name: 'Rui Costa', email: 'rui@example.com' },
  });
  assert.equal(hold.status, 201, JSON.stringify(hold.json));
  await untilLeft(page, WATCHED, before.remaining - 1);
  assert.equal(await page.evaluate(() => window.stillTheSamePage), true, 'the page was reloaded');
  await shot(page, '03-after-a-hold');

  // Keyboard: the arrow keys move between nights.
  await cell(page, WATCHED).click();
  await page.keyboard.press('ArrowRight');
  const focused = await page.evaluate(() => document.activeElement?.dataset?.night);
  assert.equal(focused, plusDays(WATCHED, 1));
  await page.keyboard.press('Escape');

  // A second person (an auditor) has the same month open in another browser.
  const colleague = await newPage();
  await signIn(colleague, AUDITOR);
  await colleague.getByRole('button', { name: 'Sign out' }).waitFor({ timeout: WAIT });
  await openCalendar(colleague);
  assert.equal(await cell(colleague, plusDays(WATCHED, 5)).getByText('SS').count(), 0);
  await colleague.evaluate(() => { window.stillTheSamePage = true; });

  // Stop-sell three nights through the page, checked through the API.
  const [from, to] = [plusDays(WATCHED, 5), plusDays(WATCHED, 7)];
  await cell(page, from).click();
  await cell(page, to).click({ modifiers: ['Shift'] });
  const panel = page.getByRole('region', { name: 'Edit selection' });
  await panel.waitFor({ timeout: WAIT });
  await panel.getByLabel('Stop-sell').check();
  await panel.getByRole('button', { name: 'Set restrictions' }).click();
  await panel.getByText(/Saved: 3 nights/).waitFor({ timeout: WAIT });
  await eventually(async () => {
    for (let n = 4; n <= 8; n += 1) {
      const night = await calendarNight(plusDays(WATCHED, n));
      assert.equal(Boolean(night.restrictions.stop_sell), n >= 5 && n <= 7, `stop-sell on night +${n}`);
    }
  });
  const refused = await api('POST', '/v1/reservations', CHANNEL, {
    hotel_id: HOTEL, room_type_id: ROOM_TYPE, start_date: from, end_date: plusDays(from, 1),
    rooms: 1, guest: { name: 'Rui Costa', email: 'rui@example.com' },
  });
  assert.equal(refused.status, 409);
  assert.equal(refused.json.error, 'restricted');
  await cell(page, from).getByText('SS').first().waitFor({ timeout: WAIT });
  await shot(page, '04-stop-sell');
  // The colleague sees it too, without reloading.
  await cell(colleague, to).getByText('SS').first().waitFor({ timeout: WAIT });
  assert.equal(await colleague.evaluate(() => window.stillTheSamePage), true);
  await shot(colleague, '04b-a-colleague-sees-it');
  await colleague.context().close();

  // A minimum stay on two of those nights: the stop-sell box opens ticked (the nights
  // have it), and a box nobody touched is not sent, so the stop-sell stays.
  await page.keyboard.press('Escape');
  await cell(page, from).click();
  await cell(page, plusDays(from, 1)).click({ modifiers: ['Shift'] });
  assert.equal(await panel.getByLabel('Stop-sell').isChecked(), true);
  await panel.getByLabel('Min stay').fill('2');
  await panel.getByRole('button', { name: 'Set restrictions' }).click();
  await panel.getByText(/Saved: 2 nights/).waitFor({ timeout: WAIT });
  await eventually(async () => {
    const kept = await calendarNight(from);
    assert.equal(kept.restrictions.min_stay, 2, JSON.stringify(kept.restrictions));
    assert.equal(kept.restrictions.stop_sell, true, JSON.stringify(kept.restrictions));
  });

  // A later submit the page refuses (a minimum stay of 0) does not leave "Saved" up.
  await panel.getByLabel('Min stay').fill('0');
  await panel.getByRole('button', { name: 'Set restrictions' }).click();
  await panel.locator('.panel-status [role="alert"]').waitFor({ timeout: WAIT });
  assert.equal(await panel.getByText(/Saved:/).count(), 0, 'no stale "Saved"');
  assert.match(await panel.locator('.panel-status').textContent(), /Min stay/);
  // "Applies to" picked for this selection...
  const appliesTo = panel.getByLabel('Applies to');
  const planValue = await appliesTo.locator('option').nth(1).getAttribute('value');
  assert.ok(planValue, 'the hotel has a plan to pick');
  await appliesTo.selectOption(planValue);

  // Cutting the watched night's rooms below what is held: the server's answer names it.
  await page.keyboard.press('Escape');
  await cell(page, WATCHED).click();
  assert.equal(await panel.getByLabel('Min stay').inputValue(), '', 'a new selection starts empty');
  // ...does not carry over to the next selection, as no other field does.
  assert.equal(await panel.getByLabel('Applies to').inputValue(), '', '"Applies to" starts at every plan');
  assert.equal(await panel.locator('.panel-status').textContent(), '', 'nor does the last answer');
  await panel.getByLabel('Total rooms', { exact: true }).fill('0');
  await panel.getByRole('button', { name: 'Preview changes' }).click();
  // The preview warns before anything is sent; the server's answer is still the word.
  await panel.locator('.inventory-preview .warning').waitFor({ timeout: WAIT });
  await panel.getByRole('button', { name: 'Save 1 night' }).click();
  await panel.getByText(/inventory_below_reserved/).waitFor({ timeout: WAIT });
  assert.match(await panel.textContent(), new RegExp(WATCHED));
  assert.equal((await calendarNight(WATCHED)).total_rooms, before.total_rooms, 'a refused cut changed nothing');
  await shot(page, '05-refused-cut');

  // A bulk change over two room types: two rooms more for king, a twin count of its
  // own, every rate 10% down. Nothing is sent until the preview, type by type and
  // night by night, is confirmed; then the page undoes it.
  await page.keyboard.press('Escape');
  const bulk = [plusDays(WATCHED, 15), plusDays(WATCHED, 16), plusDays(WATCHED, 17)];
  const kingBefore = await levels(bulk, ROOM_TYPE);
  const twinBefore = await levels(bulk, TWIN);
  await cell(page, bulk[0]).click();
  await cell(page, bulk[2], TWIN).click({ modifiers: ['Shift'] });
  await panel.getByLabel('Total rooms: king').fill('+2');
  await panel.getByLabel('Total rooms: twin').fill('6');
  await panel.getByLabel('Base rate').fill('-10%');
  await panel.getByRole('button', { name: 'Preview changes' }).click();
  const previewed = async (roomType, night, field) => (await panel
    .locator(`.inventory-preview tr[data-room-type="${roomType}"][data-night="${night}"] td[data-field="${field}"]`)
    .textContent()).trim();
  const money = (cents) => (cents % 100 === 0 ? String(cents / 100) : (cents / 100).toFixed(2));
  for (const [i, night] of bulk.entries()) {
    const [kingRooms, kingRate] = kingBefore[i];
    const [twinRooms, twinRate] = twinBefore[i];
    assert.equal(await previewed(ROOM_TYPE, night, 'rooms'), `${kingRooms} → ${kingRooms + 2}`);
    assert.equal(await previewed(ROOM_TYPE, night, 'rate'), `${money(kingRate)} → ${money(Math.round(kingRate * 0.9))}`);
    assert.equal(await previewed(TWIN, night, 'rooms'), `${twinRooms} → 6`);
    assert.equal(await previewed(TWIN, night, 'rate'), `${money(twinRate)} → ${money(Math.round(twinRate * 0.9))}`);
  }
  assert.doesNotMatch(await panel.locator('.inventory-preview').textContent(), /null|undefined|NaN/);
  assert.deepEqual(await levels(bulk, ROOM_TYPE), kingBefore, 'nothing is sent before the preview is confirmed');
  await shot(page, '05b-bulk-preview');
  await panel.getByRole('button', { name: 'Save 6 nights' }).click();
  await panel.getByText(/Saved: 6 nights/).waitFor({ timeout: WAIT });
  // (The calendar is the read model: it follows each write a moment later.)
  await eventually(async () => {
    assert.deepEqual(await levels(bulk, ROOM_TYPE),
      kingBefore.map(([rooms, rate]) => [rooms + 2, Math.round(rate * 0.9)]));
    assert.deepEqual(await levels(bulk, TWIN), twinBefore.map(([, rate]) => [6, Math.round(rate * 0.9)]));
  });
  await page.getByRole('button', { name: 'Undo last change' }).click();
  await page.locator('.undo-bar', { hasText: /Undone: 6 nights are back/ }).waitFor({ timeout: WAIT });
  await eventually(async () => {
    assert.deepEqual(await levels(bulk, ROOM_TYPE), kingBefore, 'undo puts king back');
    assert.deepEqual(await levels(bulk, TWIN), twinBefore, 'undo puts twin back');
  });
  await shot(page, '05c-bulk-undone');

  // A night typed by hand into the address that does not exist is said so in the page's
  // words, and nothing is asked of the server.
  await page.goto(`${BASE}/console/#/reservations?date=2027-02-30`);
  const badDate = page.locator('[role="alert"]', { hasText: 'not a date that exists' });
  await badDate.waitFor({ timeout: WAIT });
  assert.match(await badDate.textContent(), /2027-02-30/);

  // Find the stay by its guest's e-mail, open it, cancel it; its nights come back.
  const reservation = (await api('GET', `/v1/reservations/${RESERVATION}`, ADMIN_TOKEN)).json;
  const stayNight = reservation.start_date;
  const leftBefore = await eventually(async () => {
    const night = await calendarNight(stayNight);
    assert.equal(night.confirmed, reservation.rooms, 'the stay is in the calendar');
    return night.remaining;
  });
  // Each row reads the reservation's short reference, as the API answers it; typed as a
  // guest reads it out (lower case, a hyphen), it finds that one reservation alone.
  assert.match(reservation.reference, /^[0-9A-HJKMNP-TV-Z]{8}$/);
  await page.goto(`${BASE}/console/#/reservations`);
  await page.getByLabel('Guest e-mail').fill(GUEST_EMAIL);
  await page.getByRole('button', { name: 'Search' }).click();
  const byEmail = page.locator(`a[href="#/reservations/${RESERVATION}"]`);
  await byEmail.waitFor({ timeout: WAIT });
  assert.equal((await byEmail.textContent()).trim(), reservation.reference);
  const typed = `${reservation.reference.slice(0, 4)}-${reservation.reference.slice(4)}`.toLowerCase();
  await page.getByLabel('Guest e-mail').fill('');
  await page.getByLabel('Reference').fill(typed);
  await page.getByRole('button', { name: 'Search' }).click();
  await page.locator('.result-info', { hasText: /^1 reservation/ }).waitFor({ timeout: WAIT });
  assert.equal(await page.locator('.reservations-table tbody tr').count(), 1);
  await shot(page, '06a-found-by-reference');
  await page.locator(`a[href="#/reservations/${RESERVATION}"]`).click();
  await page.locator('.status[data-status="confirmed"]').first().waitFor({ timeout: WAIT });
  assert.equal((await page.locator('h1 .reference').textContent()).trim(), reservation.reference);
  await shot(page, '06-reservation');
  await page.getByRole('button', { name: 'Cancel', exact: true }).click();
  await page.getByLabel('Reason (optional)').fill('guest called');
  await page.getByRole('button', { name: 'Confirm cancellation' }).click();
  await page.locator('.status[data-status="cancelled"]').first().waitFor({ timeout: WAIT });
  await shot(page, '07-cancelled');
  await page.goto(`${BASE}/console/#/calendar/${HOTEL}?month=${MONTH}`);
  await untilLeft(page, stayNight, leftBefore + reservation.rooms);
  await shot(page, '08-nights-back');

  // The audit verifies.
  await page.goto(`${BASE}/console/#/health`);
  await page.getByRole('button', { name: 'Run audit verify' }).click();
  const verdict = page.locator('.verdict[data-ok]');
  await verdict.waitFor({ timeout: 60_000 });
  assert.equal(await verdict.getAttribute('data-ok'), 'true', await verdict.textContent());
  assert.match(await verdict.textContent(), /ok/);
  await page.locator('svg[role="img"]').first().waitFor({ timeout: WAIT });
  await shot(page, '09-health');

  // At a tablet's width the calendar still opens (it scrolls within its frame).
  await page.setViewportSize({ width: 768, height: 1024 });
  await openCalendar(page);
  await shot(page, '10-tablet');

  // And on a phone (390 px): nothing runs off the screen but the grid, which scrolls
  // in its frame, and a week of nights fits across it.
  await page.setViewportSize({ width: 390, height: 844 });
  await openCalendar(page);
  const fit = await page.evaluate(() => {
    const bar = document.querySelector('header.topbar');
    const frame = document.querySelector('.grid-wrap').getBoundingClientRect();
    // Nights right of the sticky room-type column and inside the frame and the screen.
    const from = document.querySelector('tbody tr:first-child th.rt').getBoundingClientRect().right;
    const to = Math.min(frame.right, window.innerWidth) + 0.5;
    const visible = [...document.querySelectorAll('tbody tr:first-child td.cell')]
      .filter((td) => {
        const r = td.getBoundingClientRect();
        return r.left >= from - 0.5 && r.right <= to;
      }).length;
    // What sticks out, to name it if anything does.
    const wide = [...document.querySelectorAll('body *')]
      .filter((el) => el.getBoundingClientRect().right > window.innerWidth + 0.5
        && !el.closest('.grid-wrap'))
      .slice(0, 3)
      .map((el) => `${el.tagName.toLowerCase()}.${[...el.classList].join('.')}`);
    return {
      bar: bar.scrollWidth - bar.clientWidth,
      page: document.documentElement.scrollWidth - window.innerWidth,
      visible,
      wide,
    };
  });
  assert.equal(fit.bar, 0, `the top bar overflows by ${fit.bar} px`);
  assert.ok(fit.page <= 0, `the page overflows by ${fit.page} px: ${fit.wide.join(', ')}`);
  assert.ok(fit.visible >= 7, `${fit.visible} nights fit across a phone`);
  await shot(page, '10b-phone');
  await page.context().close();
});

test('an auditor sees the calendar and the stays but nothing to change them with', async () => {
  const page = await newPage();
  await signIn(page, AUDITOR);
  await page.getByRole('button', { name: 'Sign out' }).waitFor({ timeout: WAIT });

  await openCalendar(page);
  assert.ok((await roomsLeft(page, WATCHED)) >= 0);
  await cell(page, WATCHED).click();
  assert.equal(await page.getByRole('region', { name: 'Edit selection' }).count(), 0);
  assert.equal(await page.getByRole('button', { name: 'Set inventory' }).count(), 0);
  await shot(page, '11-auditor-calendar');

  await page.goto(`${BASE}/console/#/reservations/${RESERVATION}`);
  await page.locator('.status[data-status]').first().waitFor({ timeout: WAIT });
  for (const action of ['Cancel', 'Check in', 'Check out', 'No-show']) {
    assert.equal(await page.getByRole('button', { name: action, exact: true }).count(), 0, action);
  }
  await shot(page, '12-auditor-reservation');

  // And the API refuses the auditor anyway.
  const refused = await api('PUT', `/v1/hotels/${HOTEL}/ari`, AUDITOR_TOKEN, {
    updates: [{ room_type_id: ROOM_TYPE, start_date: WATCHED, end_date: plusDays(WATCHED, 1),
      restrictions: { stop_sell: true } }],
  });
  assert.equal(refused.status, 403);
  await page.context().close();
});

test("a family's reservation shows each room type with its rooms, plan and price", async () => {
  const night = plusDays(WATCHED, 20);
  const family = await api('POST', '/v1/reservations', CHANNEL, {
    hotel_id: HOTEL, start_date: night, end_date: plusDays(night, 2),
    guest: { name: 'Ana Lima', email: 'ana.family@example.com' },
    lines: [{ room_type_id: ROOM_TYPE, rooms: 1, guests: 2 }, { room_type_id: TWIN, rooms: 2 }],
  });
  assert.equal(family.status, 201, JSON.stringify(family.json));
  const [king, twin] = family.json.lines;
  const page = await newPage();
  await signIn(page, ADMIN);
  await page.getByRole('button', { name: 'Sign out' }).waitFor({ timeout: WAIT });

  await page.goto(`${BASE}/console/#/reservations/${family.json.reservation_id}`);
  await page.locator('.status[data-status="held"]').first().waitFor({ timeout: WAIT });

  const fact = (key) => page.locator(`.fact[data-field="${key}"] dd`).first().textContent();
  assert.equal((await fact('rooms')).trim(), '3');
  assert.match(await fact('line_0'), new RegExp(`#${ROOM_TYPE}\\) × 1, 2 per room, Base rate, \\D*${king.total_cents / 100}\\b`));
  assert.match(await fact('line_1'), new RegExp(`#${TWIN}\\) × 2, 1 per room, Base rate, \\D*${twin.total_cents / 100}\\b`));
  assert.equal(await page.locator('.fact[data-field="room_type"]').count(), 0, 'no single room type row');
  await shot(page, '13a-family-reservation');
  await page.context().close();
});

test("a group block shows as a band under its room type, with its pickup on each night", async () => {
  const start = plusDays(WATCHED, 5);
  const block = await api('PUT', `/v1/hotels/${HOTEL}/blocks/ACME`, ADMIN_TOKEN, {
    name: 'Acme offsite', room_type_id: ROOM_TYPE, start_date: start, end_date: plusDays(start, 3),
    rooms: 2, rate_cents: 15000, release_date: plusDays(WATCHED, 1),
  });
  assert.equal(block.status, 200, JSON.stringify(block.json));
  const booked = await api('POST', '/v1/reservations', CHANNEL, {
    hotel_id: HOTEL, room_type_id: ROOM_TYPE, start_date: start, end_date: plusDays(start, 1),
    block_code: 'ACME', guest: { name: 'Eva Sousa', email: 'eva@example.com' },
  });
  assert.equal(booked.status, 201, JSON.stringify(booked.json));
  const page = await newPage();
  await signIn(page, ADMIN);
  await page.getByRole('button', { name: 'Sign out' }).waitFor({ timeout: WAIT });
  await openCalendar(page);
  const band = page.locator('tr.block-band[data-block="ACME"]');
  await band.waitFor({ timeout: WAIT });
  const pickup = (night) => band.locator(`td[data-night="${night}"]`).textContent();
  await eventually(async () => assert.equal(await pickup(start), '1/2'));
  assert.equal(await pickup(plusDays(start, 1)), '0/2');
  assert.equal(await band.locator('td.in-block').count(), 3);
  assert.match(await band.locator('th').textContent(), /Block ACME/);
  // The room type's cell says what the block sets aside beside what is held and sold.
  assert.match(await cell(page, plusDays(start, 1)).textContent(), /B2/);
  await shot(page, '13b-block-band');
  await page.context().close();
});

test('a wrong password cannot sign in, and the page keeps no secret', async () => {
  const page = await newPage();
  await signIn(page, ADMIN, 'not the password at all');
  await page.getByRole('alert').filter({ hasText: /e-mail or the password is wrong/ }).waitFor({ timeout: WAIT });
  assert.equal(await page.getByRole('button', { name: 'Sign out' }).count(), 0);
  assert.equal(await page.evaluate(() => sessionStorage.length + localStorage.length), 0);
  // The session cookie, once set, is out of the page's reach (HttpOnly).
  await signIn(page, ADMIN);
  await page.getByRole('button', { name: 'Sign out' }).waitFor({ timeout: WAIT });
  assert.equal(await page.evaluate(() => document.cookie), '');
  await shot(page, '13-wrong-password');
  await page.context().close();
});

test('each view passes an accessibility check (axe: no serious or critical violation)', async () => {
  // The checker is injected as a script, which the page's Content-Security-Policy
  // forbids: this context alone lets it in.
  const page = await newPage({ width: 1280, height: 800 }, { bypassCSP: true });
  await signIn(page, ADMIN);
  await page.getByRole('button', { name: 'Sign out' }).waitFor({ timeout: WAIT });
  const views = [
    ['calendar', `#/calendar/${HOTEL}?month=${MONTH}`, `td[data-night="${WATCHED}"]`],
    ['reservations', '#/reservations', 'input[type="email"]'],
    ['reservation', `#/reservations/${RESERVATION}`, '.status[data-status]'],
    ['health', '#/health', 'svg[role="img"]'],
  ];
  const found = [];
  for (const [name, hash, ready] of views) {
    await page.goto(`${BASE}/console/${hash}`);
    await page.locator(ready).first().waitFor({ timeout: WAIT });
    if (name === 'calendar') {
      await cell(page, WATCHED).click();
      await page.getByRole('region', { name: 'Edit selection' }).waitFor({ timeout: WAIT });
    }
    await page.addScriptTag({ content: axeSource });
    const violations = await page.evaluate(async () => {
      const result = await window.axe.run(document, { resultTypes: ['violations'] });
      return result.violations
        .filter((v) => v.impact === 'serious' || v.impact === 'critical')
        .map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')}`);
    });
    found.push(...violations.map((v) => `${name}: ${v}`));
  }
  await page.context().close();
  assert.deepEqual(found, []);
});

test("the page's own parsers: money typed by staff, the metrics text, the nights of a month", async () => {
  // Imported in the page itself (its modules are served from /console/), so they are
  // checked as the browser runs them.
  const page = await newPage();
  await page.goto(`${BASE}/console/`);
  const got = await page.evaluate(async () => {
    const util = await import('./util.js');
    const health = await import('./health.js');
    const metrics = health.parseMetrics([
      '# HELP projection_lag_seconds How far behind',
      '# TYPE projection_lag_seconds gauge',
      'projection_lag_seconds{projection="occupancy"} 1.5',
      'outbox_failed{kind="email"} 2',
      'holds_overdue 0',
      'weird line without a value',
    ].join('\n'));
    return {
      money: ['180', '180.5', '180,50', '0.07', '-1', '1.234', 'abc', ''].map((t) => util.parseMoney(t)),
      whole: ['12', ' 3 ', '1.5', '-2', ''].map((t) => util.parseIntStrict(t)),
      rates: [18000, 14550, 7, null].map((c) => util.fmtRate(c)),
      // Whole yen, three-digit dinars: amounts are integers of each currency's minor unit.
      digits: ['EUR', 'JPY', 'BHD'].map((c) => util.minorDigits(c)),
      yen: [util.parseMoney('18000', 0), util.parseMoney('180.5', 0), util.fmtRate(18000, 0)],
      dinars: [util.parseMoney('1.5', 3), util.fmtRate(1500, 3)],
      shown: [util.fmtMoney(48050, 'CHF'), util.fmtMoney(48050, 'JPY'), util.fmtMoney(48050)]
        .map((t) => t.replace(/\u00a0/g, ' ')),
      nights: util.nightsBetween('2027-02-27', '2027-03-02'),
      leap: util.addDays('2028-02-28', 1),
      dates: ['2028-02-29', '2027-02-29', '2027-02-30', '2027-13-01', '2027-1-01', ''].map((t) => util.isDate(t)),
      changes: ['', '45', '+2', '-3', '−3', '+10%', '-12.5%', '-5', 'abc', '+', '4.5'].map((t) => util.parseChange(t)),
      moneyChanges: ['180.50', '-5', '+10%'].map((t) => util.parseChange(t, true)),
      applied: [[{ kind: 'add', value: 2 }, 5], [{ kind: 'pct', value: -10 }, 18000], [{ kind: 'pct', value: 10 }, null],
        [{ kind: 'set', value: 6 }, null], [{ kind: 'keep' }, 7]].map(([c, b]) => util.applyChange(c, b)),
      references: ['01a2418a-0000-7000-8000-0000075bcd15', '01a2418a-0000-7000-8000-00ffffffffff', 'nope']
        .map((t) => util.referenceOf(t)),
      metrics,
    };
  });
  await page.context().close();
  assert.deepEqual(got.money, [18000, 18050, 18050, 7, NaN, NaN, NaN, NaN]);
  assert.deepEqual(got.whole, [12, 3, NaN, NaN, NaN]);
  assert.deepEqual(got.rates, ['180', '145.50', '0.07', '']);
  assert.deepEqual(got.digits, [2, 0, 3]);
  assert.deepEqual(got.yen, [18000, NaN, '18000']);
  assert.deepEqual(got.dinars, [1500, '1.500']);
  assert.deepEqual(got.shown, ['CHF 480.50', '¥48,050', '480.50']);
  assert.deepEqual(got.nights, ['2027-02-27', '2027-02-28', '2027-03-01']);
  assert.equal(got.leap, '2028-02-29');
  assert.deepEqual(got.dates, [true, false, false, false, false, false]);
  assert.deepEqual(got.changes, [{ kind: 'keep' }, { kind: 'set', value: 45 }, { kind: 'add', value: 2 },
    { kind: 'add', value: -3 }, { kind: 'add', value: -3 }, { kind: 'pct', value: 10 }, { kind: 'pct', value: -12.5 },
    { kind: 'add', value: -5 }, null, null, null]);
  assert.deepEqual(got.moneyChanges, [{ kind: 'set', value: 18050 }, { kind: 'add', value: -500 }, { kind: 'pct', value: 10 }]);
  assert.deepEqual(got.applied, [7, 16200, null, 6, 7]);
  // The same references the server prints for these ids (its own unit test).
  assert.deepEqual(got.references, ['003NQK8N', 'ZZZZZZZZ', null]);
  assert.deepEqual(got.metrics, [
    { name: 'projection_lag_seconds', labels: { projection: 'occupancy' }, value: 1.5 },
    { name: 'outbox_failed', labels: { kind: 'email' }, value: 2 },
    { name: 'holds_overdue', labels: {}, value: 0 },
  ]);
});

test('a console left two hours without input signs itself out; input keeps it signed in', async () => {
  // The page runs on Playwright's clock: at the real pace, until the test jumps it on.
  // fastForward fires each timer due within the jump once, at its end (the idle check,
  // the calendar's 2 s poll); runFor would fire every one (1,800 polls an hour).
  const answers = [];
  const page = await newPage(undefined, {}, answers);
  await page.clock.install();
  // The console's sign-out starts with a DELETE of the session, sent within the timer
  // that decides it: counted here, it shows one was not started (its page change
  // follows the server's answer, after the jump).
  await page.addInitScript(() => {
    const fetch = window.fetch;
    window.sessionsEnded = 0;
    window.fetch = (resource, init) => {
      if (init?.method === 'DELETE' && String(resource).endsWith('/v1/sessions/current')) window.sessionsEnded += 1;
      return fetch.call(window, resource, init);
    };
  });
  const sessionsEnded = () => page.evaluate(() => window.sessionsEnded);
  const signOutButton = page.getByRole('button', { name: 'Sign out' });
  await signIn(page, ADMIN);
  await signOutButton.waitFor({ timeout: WAIT });
  const session = (await page.context().cookies()).find((c) => c.name === 'session');
  assert.ok(session, 'the sign-in set the session cookie');
  await openCalendar(page);

  // An hour and a half of polling and no input, a key pressed, and another hour: two
  // and a half hours signed in, but an hour since the last input.
  await page.clock.fastForward('01:30:00');
  assert.equal(await sessionsEnded(), 0, 'signed out after an hour and a half');
  await page.keyboard.press('Shift');
  await page.clock.fastForward('01:00:00');

  assert.equal(await sessionsEnded(), 0, 'signed out an hour after a key was pressed');
  assert.ok(await signOutButton.isVisible(), 'still signed in');
  assert.ok(await cell(page, WATCHED).isVisible(), 'the calendar is still shown');

  // Two hours and a minute after that key, with the calendar polling throughout.
  await page.clock.fastForward('01:01:00');

  const notice = page.locator('.signin-messages [role="status"]');
  await notice.filter({ hasText: 'Signed out after two hours without use.' }).waitFor({ timeout: WAIT });
  assert.equal(await notice.textContent(), 'Signed out after two hours without use.');
  assert.ok(await page.getByRole('heading', { name: 'Sign in' }).isVisible());
  assert.equal(await signOutButton.count(), 0);
  assert.equal(await sessionsEnded(), 1);
  await shot(page, '13c-idle-sign-out');
  // Ended on the server, not only forgotten by the page: its cookie opens nothing.
  const me = await fetch(`${BASE}/v1/me`, { headers: { Cookie: `session=${session.value}` } });
  assert.equal(me.status, 401);
  await page.context().close();
  // A poll the jump fired beside the sign-out may reach the server after it.
  assert.deepEqual(answers.filter((a) => !/^401 GET \/v1\/hotels\/\d+\/(calendar|occupancy|pickup)$/.test(a)), []);
});

// Run by the Rust test a second time, alone, once it has rewritten one audit row.
const tampered = process.env.TAMPERED_POSITION;
test('an audit over a tampered history shows FAILED and the first bad position', { skip: !tampered && 'run after the history is tampered with' }, async () => {
  const page = await newPage();
  await signIn(page, AUDITOR);
  await page.getByRole('button', { name: 'Sign out' }).waitFor({ timeout: WAIT });
  await page.goto(`${BASE}/console/#/health`);
  await page.getByRole('button', { name: 'Run audit verify' }).click();
  const verdict = page.locator('.verdict[data-ok]');
  await verdict.waitFor({ timeout: 60_000 });
  assert.equal(await verdict.getAttribute('data-ok'), 'false');
  assert.match(await verdict.textContent(), new RegExp(`FAILED.*first bad position ${tampered}\\b`));
  assert.ok((await page.locator('ul.problems li').count()) > 0, 'the problems are listed');
  await shot(page, '14-tampered-audit');
  await page.context().close();
  assert.deepEqual(problems, []);
});

test('no page logged an error, and the only refusals were the ones provoked', () => {
  assert.deepEqual(problems, []);
  // The inventory cut below what is held (staff), and the wrong password.
  assert.deepEqual(refusals, [`409 PUT /v1/hotels/${HOTEL}/ari`, '401 POST /v1/sessions']);
});
