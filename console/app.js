// Entry point: sign-in, the shell (top bar, nav, live region) and the hash router.

import { api, session, setUnauthorizedHandler, errorText, ApiError } from './api.js';
import { h, field } from './util.js';
import { mountCalendar } from './calendar.js';
import { mountReservationSearch, mountReservation } from './reservations.js';
import { mountHealth } from './health.js';
import { mountFrontDesk } from './frontdesk.js';
import { mountInsights } from './insights.js';
import { mountStaff } from './staff.js';

const APP_NAME = 'Reservations console';
const STAFF_ROLES = new Set(['admin', 'revenue', 'front_desk', 'auditor']);
const ROLE_NAMES = { admin: 'admin', revenue: 'revenue', front_desk: 'front desk', auditor: 'auditor' };

const root = document.getElementById('app');

let me = null; // {name, role} once signed in
let view = null; // the mounted view: {update?(route): boolean, destroy()}
let viewKey = null;
let hotelsPromise = null;
let shell = null; // {main, nav links, announcer}

/** What every view gets. */
const ctx = {
  get me() {
    return me;
  },
  get isAdmin() {
    return me?.role === 'admin';
  },
  /** What the signed-in role may do: the same rules the API applies. */
  get can() {
    const role = me?.role;
    return {
      /** Inventory, rates, restrictions, blocks. */
      sell: role === 'admin' || role === 'revenue',
      /** Check-in, check-out, no-show, cancellation, date changes. */
      workStays: role === 'admin' || role === 'front_desk',
      /** Guests' names, e-mails and messages. */
      seeGuests: role === 'admin' || role === 'front_desk',
      /** Staff accounts, the outbox. */
      admin: role === 'admin',
    };
  },
  api,
  /** The route the address bar names now (its `hashchange` may not have run yet). */
  route() {
    return parseHash();
  },
  /** The hotels (fetched once per sign-in; `refresh` asks again). */
  hotels(refresh = false) {
    if (!hotelsPromise || refresh) {
      const p = api('/v1/hotels').then((body) => (Array.isArray(body?.hotels) ? body.hotels : []));
      hotelsPromise = p;
      p.catch(() => {
        if (hotelsPromise === p) hotelsPromise = null;
      });
    }
    return hotelsPromise;
  },
  /** Say something to screen-reader users (polite). */
  announce(text) {
    if (!shell) return;
    shell.announcer.textContent = '';
    // A fresh text node after clearing is announced even when the text repeats.
    setTimeout(() => {
      if (shell) shell.announcer.textContent = text;
    }, 50);
  },
  setTitle(title) {
    document.title = title ? `${title} · ${APP_NAME}` : APP_NAME;
  },
};

// ---------------------------------------------------------------------------
// Routes: `#/calendar`, `#/calendar/<hotel>?month=YYYY-MM`, `#/reservations[?...]`,
// `#/reservations/<id>`, `#/health`.

export function parseHash(hash = location.hash) {
  const text = hash.replace(/^#/, '');
  const q = text.indexOf('?');
  const path = q >= 0 ? text.slice(0, q) : text;
  const query = new URLSearchParams(q >= 0 ? text.slice(q + 1) : '');
  const seg = path.split('/').filter(Boolean).map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  return { seg, query, hash: `#${text}` };
}

const ROUTES = {
  calendar: { nav: 'calendar', mount: mountCalendar },
  reservations: { nav: 'reservations', mount: mountReservationSearch },
  reservation: { nav: 'reservations', mount: mountReservation },
  health: { nav: 'health', mount: mountHealth },
  today: { nav: 'today', mount: mountFrontDesk },
  insights: { nav: 'insights', mount: mountInsights },
  staff: { nav: 'staff', mount: mountStaff },
};

function routeKey(route) {
  const [first, second] = route.seg;
  if (first === 'calendar') return 'calendar';
  if (first === 'reservations') return second ? 'reservation' : 'reservations';
  if (first === 'health') return 'health';
  if (first === 'today') return 'today';
  if (first === 'insights') return 'insights';
  if (first === 'staff') return 'staff';
  return null;
}

function onRoute(initial = false) {
  if (!me || !shell) return;
  const route = parseHash();
  const key = routeKey(route);
  if (!key) {
    location.replace('#/calendar');
    return;
  }
  for (const [name, link] of Object.entries(shell.links)) {
    if (name === ROUTES[key].nav) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  if (view && viewKey === key && view.update && view.update(route)) return;
  destroyView();
  shell.main.replaceChildren();
  viewKey = key;
  try {
    view = ROUTES[key].mount(shell.main, ctx, route);
  } catch (e) {
    view = null;
    shell.main.append(h('p', { role: 'alert', class: 'error' }, errorText(e)));
  }
  if (!initial) {
    // Move focus to the new page's heading, as a page load would.
    const heading = shell.main.querySelector('h1');
    if (heading) heading.focus({ preventScroll: false });
  }
}

function destroyView() {
  if (view) {
    try {
      view.destroy();
    } catch {
      // a view failing to clean up must not block the next one
    }
  }
  view = null;
  viewKey = null;
}

// ---------------------------------------------------------------------------
// Sign-in and sign-out.

function showSignIn({ notice, error } = {}) {
  destroyView();
  shell = null;
  me = null;
  ctx.setTitle('Sign in');
  const email = h('input', { id: 'email', name: 'email', type: 'email', autocomplete: 'username', required: true, spellcheck: 'false' });
  const password = h('input', { id: 'password', name: 'password', type: 'password', autocomplete: 'current-password', required: true });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  const messages = h('div', { class: 'signin-messages' });
  const showError = (text) => messages.replaceChildren(h('p', { role: 'alert', class: 'error' }, text));
  if (notice) messages.append(h('p', { role: 'status', class: 'notice' }, notice));
  if (error) showError(error);

  const form = h('form', { class: 'signin-form', 'aria-labelledby': 'signin-title', novalidate: true },
    h('h1', { id: 'signin-title', tabindex: '-1' }, 'Sign in'),
    h('p', { class: 'hint' }, 'Sign in with your staff e-mail and password. Five wrong passwords lock the account for 15 minutes.'),
    field('E-mail', email),
    field('Password', password),
    submit,
    messages,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!email.value.trim() || !password.value) {
      showError('Enter your e-mail and password.');
      (email.value.trim() ? password : email).focus();
      return;
    }
    submit.disabled = true;
    messages.replaceChildren(h('p', { role: 'status', class: 'notice' }, 'Signing in…'));
    try {
      const opened = await api('/v1/sessions', { method: 'POST', body: { email: email.value.trim(), password: password.value }, signOutOn401: false });
      session.csrf = opened?.csrf_token ?? null;
      signedIn(opened.staff);
      return;
    } catch (e) {
      if (e instanceof ApiError && e.code === 'account_locked') {
        const until = e.details?.locked_until ? new Date(e.details.locked_until).toLocaleTimeString() : 'later';
        showError(`Too many wrong passwords: the account is locked until ${until}.`);
      } else if (e instanceof ApiError && e.status === 401) {
        showError('The e-mail or the password is wrong.');
      } else {
        showError(errorText(e));
      }
    }
    submit.disabled = false;
    password.value = '';
    password.focus();
  });

  root.replaceChildren(
    h('header', { class: 'topbar' }, h('span', { class: 'brand' }, APP_NAME)),
    h('main', { id: 'main', class: 'signin' }, form),
  );
  email.focus();
}

function signedIn(who) {
  me = { name: String(who.name ?? ''), role: who.role, staff_id: who.staff_id ?? null };
  hotelsPromise = null;
  buildShell();
  if (!location.hash || routeKey(parseHash()) === null) {
    history.replaceState(null, '', '#/calendar');
  }
  onRoute(true);
}

/** Ends the session: on the server first (its cookie signs nothing in after), then here. */
async function signOut(notice, { revoke = true } = {}) {
  if (!me) return;
  if (revoke) {
    try {
      await api('/v1/sessions/current', { method: 'DELETE', signOutOn401: false });
    } catch {
      // already ended, or unreachable: the page forgets it either way
    }
  }
  session.clear();
  hotelsPromise = null;
  showSignIn({ notice });
}

setUnauthorizedHandler(() => signOut('Your session ended: sign in again.', { revoke: false }));

// The calendar polls every 2 s, which keeps a session alive on the server: a screen
// nobody has touched for two hours (a shared front-desk computer) signs itself out.
const IDLE_MS = 2 * 60 * 60 * 1000;
let lastInput = Date.now();
for (const type of ['keydown', 'pointerdown', 'wheel', 'touchstart']) {
  window.addEventListener(type, () => {
    lastInput = Date.now();
  }, { passive: true, capture: true });
}
setInterval(() => {
  if (me && Date.now() - lastInput > IDLE_MS) signOut('Signed out after two hours without use.');
}, 60_000);

// ---------------------------------------------------------------------------
// The shell.

function buildShell() {
  const links = {
    calendar: h('a', { href: '#/calendar' }, 'Calendar'),
    today: h('a', { href: '#/today' }, 'Front desk'),
    insights: h('a', { href: '#/insights' }, 'Pickup & year'),
    reservations: h('a', { href: '#/reservations' }, 'Reservations'),
    health: h('a', { href: '#/health' }, 'Health'),
  };
  if (ctx.can.admin) links.staff = h('a', { href: '#/staff' }, 'Staff');
  const main = h('main', { id: 'main', tabindex: '-1' });
  const announcer = h('div', { class: 'sr-only', 'aria-live': 'polite', id: 'announcer' });
  const skip = h('a', { class: 'skip-link', href: '#main' }, 'Skip to content');
  skip.addEventListener('click', (event) => {
    event.preventDefault();
    main.focus();
  });
  const signOutButton = h('button', { type: 'button', class: 'signout' }, 'Sign out');
  signOutButton.addEventListener('click', () => signOut('Signed out.'));
  const header = h('header', { class: 'topbar' },
    h('span', { class: 'brand' }, APP_NAME),
    h('nav', { 'aria-label': 'Main' },
      h('ul', null, Object.values(links).map((a) => h('li', null, a)))),
    h('div', { class: 'user' },
      h('span', { class: 'who', dataset: { role: me.role } }, `${me.name} (${ROLE_NAMES[me.role] ?? me.role})`),
      signOutButton),
  );
  root.replaceChildren(skip, header, main, announcer);
  shell = { main, links, announcer };
}

// ---------------------------------------------------------------------------
// Start.

async function boot() {
  window.addEventListener('hashchange', () => onRoute(false));
  root.replaceChildren(h('main', { id: 'main', class: 'loading' }, h('p', { role: 'status' }, 'Loading…')));
  try {
    // A reload keeps the cookie: ask whether it is a live session, and take its CSRF
    // token back (no session: 204, and the sign-in page).
    const current = await api('/v1/sessions/current', { signOutOn401: false });
    if (!current?.staff || !STAFF_ROLES.has(current.staff.role)) {
      showSignIn();
      return;
    }
    session.csrf = current.csrf_token;
    signedIn(current.staff);
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) showSignIn();
    else showSignIn({ error: `Could not reach the server: ${errorText(e)}` });
  }
}

boot();
