// The console's morning, in Debian's Chromium, as the people who open it: a revenue
// manager reads the hotel's numbers under the calendar (checked against the API), sees
// a hold arrive in the pickup, changes a rate and finds her name in the night's
// history, and exports the range as CSV; an admin asks what a larger overbooking
// allowance would have sold of the demand turned away; a front desk checks a guest in
// from the arrivals list; an admin adds a colleague. Every page passes the
// accessibility check at 1440 and 390 pixels wide, and no page logs an error.
//
// Run by `cargo test` (tests/console/morning.rs), which starts the server, makes the
// hotel and the staff accounts and passes them here in the environment. Screenshots of
// each page go to $SCREENSHOTS.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
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
const ADMIN_TOKEN = env('ADMIN_TOKEN');
const CHANNEL = env('CHANNEL_TOKEN');
const HOTEL = Number(env('HOTEL_ID'));
const KING = Number(env('KING_ID'));
const TIMEZONE = env('TIMEZONE');
const PASSWORD = env('STAFF_PASSWORD');
const SHOTS = env('SCREENSHOTS');
const DOWNLOADS = env('DOWNLOADS');
const WAIT = 20_000;

const REVENUE = 'mia@hotel.example';
const FRONT_DESK = 'eva@hotel.example';
const ADMIN = 'ana@hotel.example';

let browser;
const problems = [];
const refusals = [];

/** The hotel's today, as its clock reads it. */
const TODAY = new Intl.DateTimeFormat('en-CA', { timeZone: TIMEZONE, year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date());

function plusDays(date, n) {
  const d = new Date(`${date}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + n);
  return d.toISOString().slice(0, 10);
}

async function api(method, url, token, body) {
  const headers = { Authorization: `Bearer ${token}` };
  if (method !== 'GET') headers['Idempotency-Key'] = `e2e-${randomUUID()}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(`${BASE}${url}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, json: text ? JSON.parse(text) : null };
}

/** A stay booked and paid through the channel; its id. */
async function booked(start, end, rooms, guest, confirm = true) {
  const held = await api('POST', '/v1/reservations', CHANNEL, {
    hotel_id: HOTEL, room_type_id: KING, start_date: start, end_date: end, rooms, guest,
  });
  assert.equal(held.status, 201, JSON.stringify(held.json));
  if (confirm) {
    const paid = await api('POST', `/v1/reservations/${held.json.reservation_id}/confirm`, CHANNEL, { payment_token: 'tok_ok' });
    assert.equal(paid.status, 200, JSON.stringify(paid.json));
  }
  return held.json;
}

async function eventually(check) {
  const deadline = Date.now() + WAIT;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
  }
}

async function newPage(viewport = { width: 1440, height: 900 }, options = {}) {
  const context = await browser.newContext({ viewport, acceptDownloads: true, ...options });
  const page = await context.newPage();
  page.on('console', (message) => {
    const refusal = /^Failed to load resource: the server responded with a status of 4\d\d/;
    if ((message.type() === 'error' || message.type() === 'warning') && !refusal.test(message.text())) {
      problems.push(`console ${message.type()}: ${message.text()}`);
    }
  });
  page.on('response', (response) => {
    if (response.status() >= 400) refusals.push(`${response.status()} ${response.request().method()} ${new URL(response.url()).pathname}`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  return page;
}

async function shot(page, name) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: false });
}

async function signIn(page, email) {
  await page.goto(`${BASE}/console/`);
  await page.fill('input[name="email"]', email);
  await page.fill('input[name="password"]', PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor({ timeout: WAIT });
}

/** Clicks an export button and reads the CSV it downloads. */
async function exported(page, button) {
  const [download] = await Promise.all([page.waitForEvent('download', { timeout: WAIT }), button.click()]);
  const file = path.join(DOWNLOADS, download.suggestedFilename());
  await download.saveAs(file);
  const text = await readFile(file, 'utf8');
  return { name: download.suggestedFilename(), lines: text.trimEnd().split('\r\n') };
}

/** Serious and critical accessibility violations on the page (its context must bypass
 * the CSP for the checker's script). */
async function axeViolations(page) {
  await page.addScriptTag({ content: axeSource });
  return page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return result.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')}`);
  });
}

const cell = (page, night, roomType = KING) => page.locator(`td.cell[data-night="${night}"][data-room-type="${roomType}"]`);
const total = (page, key, night) => page.locator(`tfoot td[data-total="${key}"][data-night="${night}"]`);

before(async () => {
  browser = await chromium.launch({
    executablePath: env('CHROMIUM_PATH'),
    args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update'],
  });
});

after(async () => {
  await browser?.close();
});

test('a revenue manager reads the numbers, sees a hold in the pickup, and finds her rate change in the history', async () => {
  const sold = plusDays(TODAY, 3);
  const watched = plusDays(TODAY, 10);
  const repriced = plusDays(TODAY, 12);
  await booked(sold, plusDays(sold, 2), 2, { name: 'Ines Duarte', email: 'ines@example.com' });

  const page = await newPage();
  await signIn(page, REVENUE);
  // The calendar opens at the hotel's today, marked, with 31 nights.
  await cell(page, TODAY).waitFor({ timeout: WAIT });
  assert.equal(await page.locator('thead th.today').getAttribute('data-night'), TODAY);
  assert.equal(await page.locator('thead th.day').count(), 31);

  // The hotel's numbers under the room types are the occupancy report's, night by night.
  const report = await eventually(async () => {
    const reply = await api('GET', `/v1/hotels/${HOTEL}/occupancy?start_date=${sold}&end_date=${plusDays(sold, 1)}`, ADMIN_TOKEN);
    assert.equal(reply.json.hotel.nights[0].confirmed, 2, JSON.stringify(reply.json.hotel));
    return reply.json.hotel.nights[0];
  });
  await eventually(async () => assert.equal(await total(page, 'sold', sold).getAttribute('data-value'), String(report.confirmed)));
  assert.equal(await total(page, 'revenue', sold).getAttribute('data-value'), String(report.revenue_cents));
  assert.equal(await total(page, 'adr', sold).getAttribute('data-value'), String(report.adr_cents));
  assert.equal(await total(page, 'revpar', sold).getAttribute('data-value'), String(report.revpar_cents));
  assert.equal((await total(page, 'sold', sold).textContent()).trim(), `${report.confirmed}/${report.total_rooms}`);
  assert.equal((await total(page, 'adr', TODAY).textContent()).trim(), '—', 'nothing sold: no ADR, not zero');
  await shot(page, 'm01-calendar-numbers');

  // Pickup on the grid: a hold made now shows in the last 24 hours of its night.
  await page.getByLabel('Show pickup').check();
  await eventually(async () => assert.equal(await total(page, 'pickup-day', watched).getAttribute('data-value'), '0/0'));
  await booked(watched, plusDays(watched, 1), 1, { name: 'Hugo Pires', email: 'hugo@example.com' }, false);
  await eventually(async () => assert.equal(await total(page, 'pickup-day', watched).getAttribute('data-value'), '1/0'));
  assert.equal((await total(page, 'pickup-day', watched).textContent()).trim(), '+1 −0');
  await shot(page, 'm02-pickup');

  // A rate change from the calendar, then the night's history names her.
  await cell(page, repriced).click();
  const panel = page.getByRole('region', { name: 'Edit selection' });
  await panel.getByLabel('Base rate').fill('234');
  await panel.getByRole('button', { name: 'Preview changes' }).click();
  await panel.getByRole('button', { name: 'Save 1 night' }).click();
  await eventually(async () => {
    const night = await api('GET', `/v1/hotels/${HOTEL}/calendar?start_date=${repriced}&end_date=${plusDays(repriced, 1)}`, ADMIN_TOKEN);
    assert.equal(night.json.room_types.find((rt) => rt.room_type_id === KING).nights[0].rate_cents, 23_400);
  });
  await page.keyboard.press('Escape');
  await cell(page, repriced).click();
  await page.getByRole('button', { name: 'History of the focused night' }).click();
  const history = page.locator('.history-table');
  await history.waitFor({ timeout: WAIT });
  const change = history.locator('tbody tr').filter({ hasText: 'Mia Sousa' });
  await change.first().waitFor({ timeout: WAIT });
  assert.match(await change.first().textContent(), /234/);
  await page.locator('.night-history').scrollIntoViewIfNeeded();
  await shot(page, 'm03-night-history');

  // The range as CSV, read back (once the page shows the new rate): the repriced night,
  // and the hotel's numbers.
  await eventually(async () => assert.equal(await cell(page, repriced).getAttribute('data-rate'), '23400'));
  const csv = await exported(page, page.getByRole('button', { name: 'Export CSV' }));
  assert.match(csv.name, /^calendar-\d+-\d{4}-\d{2}-\d{2}-\d{4}-\d{2}-\d{2}\.csv$/);
  assert.equal(csv.lines[0], 'date,room_type_id,room_type,total_rooms,overbooking_allowance,remaining,held,confirmed,blocked,rate_cents,currency,restrictions');
  const line = csv.lines.find((l) => l.startsWith(`${repriced},${KING},`));
  assert.ok(line, csv.lines.slice(0, 3).join('\n'));
  assert.equal(line.split(',')[9], '23400', line);
  const hotelLine = csv.lines.find((l) => l.startsWith(`${sold},13,`));
  assert.ok(hotelLine, 'the hotel line of the sold night');
  assert.equal(hotelLine.split(',')[2], '2', hotelLine);

  // Longer views: 90 nights.
  await page.selectOption('#cal-nights', '90');
  await eventually(async () => assert.equal(await page.locator('thead th.day').count(), 90));

  // A hold the hotel cannot take (six kings of five) is turned away.
  const turnedAway = plusDays(TODAY, 20);
  const refused = await api('POST', '/v1/reservations', CHANNEL, {
    hotel_id: HOTEL, room_type_id: KING, start_date: turnedAway, end_date: plusDays(turnedAway, 1), rooms: 6,
    guest: { name: 'Rita Gomes', email: 'rita@example.com' },
  });
  assert.equal(refused.status, 409, JSON.stringify(refused.json));

  // The pickup page: its table says what the API says, and the turnaway shows.
  await page.getByRole('link', { name: 'Pickup & year' }).click();
  const turned = page.locator(`[data-section="turnaways"] tr[data-night="${turnedAway}"] [data-field="requests"]`);
  await eventually(async () => {
    if (!(await turned.count())) await page.getByRole('button', { name: 'Refresh' }).click();
    assert.equal((await turned.textContent({ timeout: 500 })).trim(), '1');
  });
  assert.equal((await page.locator(`[data-section="turnaways"] tr[data-night="${turnedAway}"] [data-field="sold_out"]`).textContent()).trim(), '1');
  // A night sold out is not a group's block full: that column says 0.
  assert.equal((await page.locator(`[data-section="turnaways"] tr[data-night="${turnedAway}"] [data-field="block_exhausted"]`).textContent()).trim(), '0');
  const pickupCell = page.locator(`[data-section="pickup-table"] tr[data-night="${watched}"] [data-field="booked_last_day"]`);
  const watchedIn14 = watched < plusDays(TODAY, 14);
  if (watchedIn14) {
    await eventually(async () => assert.equal((await pickupCell.textContent()).trim(), '1'));
  }
  await page.locator('[data-section="year"] [data-night]').first().waitFor({ timeout: WAIT });
  // The what-if is for admins and auditors: a revenue manager does not get the form.
  assert.equal(await page.locator('[data-section="what-if"]').count(), 0);
  await shot(page, 'm04-pickup-and-year');
  const pickupCsv = await exported(page, page.locator('[data-section="pickup-table"]').getByRole('button', { name: /Export CSV/ }));
  const watchedLine = pickupCsv.lines.find((l) => l.startsWith(`${watched},`));
  assert.ok(watchedLine, pickupCsv.lines.slice(0, 3).join('\n'));
  await page.context().close();
});

test('an admin asks what a larger allowance would have sold of the demand turned away', async () => {
  // The six kings refused on a night of five (the first test) reach the turnaway log
  // moments after the refusal: the what-if replays that log, so wait for it.
  const turnedAway = plusDays(TODAY, 20);
  await eventually(async () => {
    const log = await api('GET', `/v1/hotels/${HOTEL}/turnaways?from=${turnedAway}&to=${plusDays(turnedAway, 1)}`, ADMIN_TOKEN);
    assert.equal(log.status, 200, JSON.stringify(log.json));
    assert.equal(log.json.nights[0]?.by_reason.sold_out, 1, JSON.stringify(log.json));
  });
  const last = plusDays(TODAY, 31);
  /** The what-if as the API answers it (a bearer token, not the page). */
  const asked = (body) => api('POST', '/v1/analytics/what-if', ADMIN_TOKEN, { hotel_id: HOTEL, room_type_id: KING, from: TODAY, to: last, ...body });

  const page = await newPage({ width: 1440, height: 900 }, { bypassCSP: true });
  await signIn(page, ADMIN);
  await page.goto(`${BASE}/console/#/insights/${HOTEL}`);
  const card = page.locator('[data-section="what-if"]');
  const form = card.locator('form[data-what-if]');
  const result = card.locator('[data-what-if-result]');
  const submit = form.getByRole('button', { name: 'Replay' });
  // It opens at the hotel's today and the next 31 nights.
  await eventually(async () => assert.equal(await submit.isEnabled(), true));
  assert.equal(await form.getByLabel('From (first night)').inputValue(), TODAY);
  assert.equal(await form.getByLabel('To (night after the last)').inputValue(), last);
  await form.getByLabel('Room type').selectOption(String(KING));
  const allowance = form.locator('input[name="overbooking_allowance"]');
  const fieldError = (name) => form.locator(`[data-field-error="${name}"]`);

  // Refusals: the API's message shows by the field it names, and no figure shows.
  const seen = refusals.length;
  const backwards = await asked({ to: plusDays(TODAY, -1), policy: { overbooking_allowance: 2 } });
  assert.equal(backwards.status, 422, JSON.stringify(backwards.json));
  assert.equal(backwards.json.field, 'to');
  await form.getByLabel('To (night after the last)').fill(plusDays(TODAY, -1));
  await allowance.fill('2');
  await submit.click();
  await eventually(async () => assert.equal((await fieldError('to').textContent()).trim(), backwards.json.message));
  assert.equal(await form.getByLabel('To (night after the last)').getAttribute('aria-invalid'), 'true');
  assert.equal((await result.textContent()).trim(), '');
  const negative = await asked({ policy: { overbooking_allowance: -1 } });
  assert.equal(negative.status, 422, JSON.stringify(negative.json));
  assert.equal(negative.json.field, 'policy.overbooking_allowance');
  await form.getByLabel('To (night after the last)').fill(last);
  await allowance.fill('-1');
  await submit.click();
  await eventually(async () => assert.equal((await fieldError('policy.overbooking_allowance').textContent()).trim(), negative.json.message));
  assert.equal(await fieldError('to').isHidden(), true, 'the error of the last try is gone');
  // The page asked twice and was refused twice, as it should: not a refusal to report.
  assert.deepEqual(refusals.splice(seen), ['422 POST /v1/analytics/what-if', '422 POST /v1/analytics/what-if']);

  // A walk risk replays the allowance the no-show report suggests for it.
  await form.getByLabel('Walk risk', { exact: true }).check();
  await form.locator('input[name="suggested_risk"]').fill('0.05');
  await submit.click();
  await eventually(async () => assert.match(await result.locator('.wi-assumptions').textContent({ timeout: 500 }), /^Walk risk 5 %: suggested allowance \d+ · /));
  assert.equal(await fieldError('policy.overbooking_allowance').isHidden(), true);

  // Two more kings than in force (none), with a walk cost of 250.00: the six turned away
  // as sold out would have been sold, one of them beyond the physical rooms.
  await form.getByLabel('Allowance', { exact: true }).check();
  await allowance.fill('2');
  await form.getByLabel(/^Walk cost per guest/).fill('250');
  await submit.click();
  const expected = await asked({ policy: { overbooking_allowance: 2 }, walk_cost_cents: 25_000 });
  assert.equal(expected.status, 200, JSON.stringify(expected.json));
  const figure = (key, col) => result.locator(`tr[data-figure="${key}"] td[data-col="${col}"]`);
  // (The walk risk's answer stays on screen until this one comes.)
  await eventually(async () => assert.match(await result.locator('.wi-assumptions').textContent({ timeout: 500 }), /^Allowance replayed: 2 · /));
  assert.equal(await result.locator('.wi-assumptions').getAttribute('data-allowance'), '2');
  const sold = { in_force: Number(await figure('room_nights_sold', 'in_force').getAttribute('data-value')),
    what_if: Number(await figure('room_nights_sold', 'what_if').getAttribute('data-value')) };
  assert.ok(sold.what_if > sold.in_force, JSON.stringify(sold));
  assert.equal(sold.what_if - sold.in_force, 6, 'the six kings turned away');
  for (const key of ['room_nights_sold', 'revenue_cents', 'walks_expected', 'walks_worst', 'walk_cost_cents', 'net_revenue_cents']) {
    for (const col of ['in_force', 'what_if']) {
      assert.equal(await figure(key, col).getAttribute('data-value'), String(expected.json[col][key]), `${key} ${col}`);
    }
  }
  assert.equal(await figure('room_nights_sold', 'difference').textContent(), '+6');
  // Screen readers hear the headline (the tables are not a live region).
  await eventually(async () => assert.match(await page.locator('#announcer').textContent(), new RegExp(`: ${sold.what_if} room-nights sold against ${sold.in_force} in force \\(\\+6\\)`)));
  assert.equal(await figure('walks_worst', 'what_if').textContent(), '1');
  const line = await result.locator('.wi-assumptions').textContent();
  assert.match(line, /^Allowance replayed: 2 · /);
  assert.ok(line.includes(`${expected.json.replayed.turnaways} turnaway`), line);
  if (expected.json.assumptions.no_show_rate == null) assert.ok(line.includes('unknown — every guest expected to come'), line);
  // Night by night, in a table of its own that scrolls.
  assert.equal(await result.locator('table.wi-nights tbody tr').count(), 31);
  const night = result.locator(`table.wi-nights tr[data-night="${turnedAway}"]`);
  assert.equal(await night.locator('[data-col="in_force"]').getAttribute('data-value'), '0');
  assert.equal(await night.locator('[data-col="what_if"]').getAttribute('data-value'), '6');
  assert.equal(await night.locator('[data-col="walks_worst"]').getAttribute('data-value'), '1');
  await card.evaluate((el) => {
    el.scrollIntoView({ block: 'start' });
    window.scrollBy(0, -56); // under the sticky top bar
  });
  await shot(page, 'm04-what-if');

  // The answer passes the accessibility check, and fits a phone.
  const found = (await axeViolations(page)).map((v) => `at 1440px: ${v}`);
  await page.setViewportSize({ width: 390, height: 844 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  if (overflow > 0) found.push(`at 390px: the page runs ${overflow}px off the screen`);
  found.push(...(await axeViolations(page)).map((v) => `at 390px: ${v}`));
  assert.deepEqual(found, []);
  await page.context().close();
});

test('the front desk checks a guest in from the arrivals list', async () => {
  const arriving = await booked(TODAY, plusDays(TODAY, 2), 1, { name: 'Lúcia Marques', email: 'lucia.marques@example.com' });
  await booked(TODAY, plusDays(TODAY, 1), 1, { name: 'Pedro Alves', email: 'pedro@example.org' });
  const page = await newPage();
  await signIn(page, FRONT_DESK);
  // A front desk changes no inventory: no Staff page, and the calendar is read-only.
  assert.equal(await page.getByRole('link', { name: 'Staff' }).count(), 0);
  await page.getByRole('link', { name: 'Front desk' }).click();
  const arrivals = page.locator('[data-list="arrivals"]');
  const row = arrivals.locator(`tr[data-reservation="${arriving.reservation_id}"]`);
  await eventually(async () => {
    await page.getByRole('button', { name: 'Refresh' }).first().click();
    await row.waitFor({ timeout: 1_000 });
  });
  // Search by part of an e-mail leaves only her.
  await page.fill('input[name="guest"]', 'marques@');
  await eventually(async () => assert.equal(await arrivals.locator('tbody tr[data-reservation]').count(), 1));
  await shot(page, 'm05-front-desk');
  await row.locator('.act-check-in').click();
  await eventually(async () => assert.equal(await row.getAttribute('data-status'), 'checked_in'));
  const after = await api('GET', `/v1/reservations/${arriving.reservation_id}`, ADMIN_TOKEN);
  assert.equal(after.json.status, 'checked_in');
  // Its list as CSV, read back.
  const csv = await exported(page, page.getByRole('button', { name: /Export CSV/ }).first());
  assert.ok(csv.lines.some((l) => l.includes(arriving.reservation_id)), csv.lines.join('\n'));
  await page.context().close();
});

test('an admin adds a colleague, who can then sign in', async () => {
  const page = await newPage();
  await signIn(page, ADMIN);
  await page.getByRole('link', { name: 'Staff' }).click();
  await page.getByLabel('E-mail').fill('leo@hotel.example');
  await page.getByLabel('Name').fill('Leo Matos');
  await page.getByLabel('Role').selectOption('front_desk');
  await page.getByLabel(/^Password/).fill('a fresh pass phrase');
  await page.getByRole('button', { name: 'Add staff member' }).click();
  await page.locator('tr[data-staff]').filter({ hasText: 'Leo Matos' }).waitFor({ timeout: WAIT });
  await shot(page, 'm06-staff');
  // A reservation search, exported and read back.
  // (The search reads the read side, which follows the check-in a moment later.)
  await page.goto(`${BASE}/console/#/reservations?hotel_id=${HOTEL}&status=checked_in`);
  await eventually(async () => {
    await page.getByRole('button', { name: 'Search' }).click();
    await page.locator('table.reservations-table tbody tr').first().waitFor({ timeout: 1_000 });
  });
  const csv = await exported(page, page.getByRole('button', { name: 'Export CSV' }));
  assert.equal(csv.lines[0].split(',')[0], 'reference');
  assert.equal(csv.lines.length, 2, csv.lines.join('\n'));
  assert.match(csv.lines[1], /Lúcia Marques,lucia\.marques@example\.com,/);
  await page.context().close();
  const leo = await newPage();
  await leo.goto(`${BASE}/console/`);
  await leo.fill('input[name="email"]', 'leo@hotel.example');
  await leo.fill('input[name="password"]', 'a fresh pass phrase');
  await leo.getByRole('button', { name: 'Sign in' }).click();
  await leo.getByText('Leo Matos (front desk)').waitFor({ timeout: WAIT });
  await leo.context().close();
});

test('every page passes the accessibility check at 1440 and 390 pixels wide', async () => {
  const found = [];
  for (const [width, height, suffix] of [[1440, 900, ''], [390, 844, '-390']]) {
    const page = await newPage({ width, height }, { bypassCSP: true });
    await signIn(page, ADMIN);
    const views = [
      ['calendar', `#/calendar/${HOTEL}`, 'tfoot td[data-total="sold"][data-value]:not([data-value=""])'],
      ['front-desk', `#/today/${HOTEL}`, '[data-list="arrivals"] tr[data-reservation]'],
      ['pickup', `#/insights/${HOTEL}`, '[data-section="year"] [data-night]'],
      ['staff', '#/staff', 'tr[data-staff]'],
    ];
    for (const [name, hash, ready] of views) {
      await page.goto(`${BASE}/console/${hash}`);
      await page.locator(ready).first().waitFor({ timeout: WAIT });
      if (suffix) await shot(page, `m07-${name}${suffix}`);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      if (overflow > 0) found.push(`${name} at ${width}px: the page runs ${overflow}px off the screen`);
      const violations = await axeViolations(page);
      found.push(...violations.map((v) => `${name} at ${width}px: ${v}`));
    }
    await page.context().close();
  }
  assert.deepEqual(found, []);
});

test('no page logged an error, and nothing was refused', () => {
  assert.deepEqual(problems, []);
  assert.deepEqual(refusals, []);
});
