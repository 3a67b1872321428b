// Entry point: sign-in, the shell (top bar, nav, live region) and the hash router.

import { api, session, setUnauthorizedHandler, errorText, ApiError } from './api.js';
import { h, field } from './util.js';
import { mountCalendar } from './calendar.js';
import { mountReservationSearch, mountReservation } from './reservations.js';
import { mountHealth } from './health.js';

const APP_NAME = 'Reservations console';
const STAFF_ROLES = new Set(['admin', 'auditor']);
const CHANNEL_REFUSED = 'This console is for hotel staff and auditors: a channel token cannot sign in.';

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
};

function routeKey(route) {
  const [first, second] = route.seg;
  if (first === 'calendar') return 'calendar';
  if (first === 'reservations') return second ? 'reservation' : 'reservations';
  if (first === 'health') return 'health';
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
  const token = h('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false' });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  const messages = h('div', { class: 'signin-messages' });
  const showError = (text) => messages.replaceChildren(h('p', { role: 'alert', class: 'error' }, text));
  if (notice) messages.append(h('p', { role: 'status', class: 'notice' }, notice));
  if (error) showError(error);

  const form = h('form', { class: 'signin-form', 'aria-labelledby': 'signin-title', novalidate: true },
    h('h1', { id: 'signin-title', tabindex: '-1' }, 'Sign in'),
    h('p', { class: 'hint' }, 'Sign in with your staff or auditor API token. The token is kept for this tab only.'),
    field('API token', token),
    submit,
    messages,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const value = token.value.trim();
    if (!value) {
      showError('Enter your API token.');
      token.focus();
      return;
    }
    submit.disabled = true;
    messages.replaceChildren(h('p', { role: 'status', class: 'notice' }, 'Signing in…'));
    try {
      const who = await api('/v1/me', { token: value, signOutOn401: false });
      if (who?.role === 'channel') {
        showError(CHANNEL_REFUSED);
      } else if (!STAFF_ROLES.has(who?.role)) {
        showError(`This console is for hotel staff and auditors: a ${who?.role ?? 'unknown'} token cannot sign in.`);
      } else {
        session.token = value;
        signedIn(who);
        return;
      }
    } catch (e) {
      showError(e instanceof ApiError && e.status === 401 ? 'Unknown token.' : errorText(e));
    }
    submit.disabled = false;
    token.focus();
    token.select();
  });

  root.replaceChildren(
    h('header', { class: 'topbar' }, h('span', { class: 'brand' }, APP_NAME)),
    h('main', { id: 'main', class: 'signin' }, form),
  );
  token.focus();
}

function signedIn(who) {
  me = { name: String(who.name ?? ''), role: who.role };
  hotelsPromise = null;
  buildShell();
  if (!location.hash || routeKey(parseHash()) === null) {
    history.replaceState(null, '', '#/calendar');
  }
  onRoute(true);
}

function signOut(notice) {
  if (!me) return;
  session.clear();
  hotelsPromise = null;
  showSignIn({ notice });
}

setUnauthorizedHandler(() => signOut('Your session ended (the server answered 401): sign in again.'));

// ---------------------------------------------------------------------------
// The shell.

function buildShell() {
  const links = {
    calendar: h('a', { href: '#/calendar' }, 'Calendar'),
    reservations: h('a', { href: '#/reservations' }, 'Reservations'),
    health: h('a', { href: '#/health' }, 'Health'),
  };
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
      h('span', { class: 'who', dataset: { role: me.role } }, `${me.name} (${me.role})`),
      signOutButton),
  );
  root.replaceChildren(skip, header, main, announcer);
  shell = { main, links, announcer };
}

// ---------------------------------------------------------------------------
// Start.

async function boot() {
  window.addEventListener('hashchange', () => onRoute(false));
  const token = session.token;
  if (!token) {
    showSignIn();
    return;
  }
  root.replaceChildren(h('main', { id: 'main', class: 'loading' }, h('p', { role: 'status' }, 'Loading…')));
  try {
    const who = await api('/v1/me', { signOutOn401: false });
    if (!STAFF_ROLES.has(who?.role)) {
      session.clear();
      showSignIn({ error: who?.role === 'channel' ? CHANNEL_REFUSED : undefined });
      return;
    }
    signedIn(who);
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      session.clear();
      showSignIn({ notice: 'Your session ended: sign in again.' });
    } else {
      showSignIn({ error: `Could not check the saved token: ${errorText(e)}` });
    }
  }
}

boot();
