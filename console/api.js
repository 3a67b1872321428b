// The one way the console talks to the server: same origin, the staff session's cookie
// (HttpOnly: no script here ever sees it), JSON, and every failure turned into an
// `ApiError` the views can show. Every write carries the session's CSRF token, which the
// server checks against the cookie's session: a page on another site cannot send it.

import { h } from './util.js';

/** The session's CSRF token: kept in memory only (a reload asks `/v1/me` again). */
export const session = {
  csrf: null,
  clear() {
    this.csrf = null;
  },
};

/** An API failure: `code` and `message` from the `{"error", "message", ...}` body. */
export class ApiError extends Error {
  constructor(status, code, message, details = {}) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

let onUnauthorized = () => {};

/** What to do when any call answers 401 (the app signs out). */
export function setUnauthorizedHandler(fn) {
  onUnauthorized = fn;
}

/**
 * Call the API. Options: `method`, `body` (sent as JSON), `headers`, `text` (return the
 * body as text), `signal`, `signOutOn401` (default true). Resolves with the parsed body
 * (null when empty); rejects with an ApiError.
 */
export async function api(path, options = {}) {
  const { method = 'GET', body, headers = {}, text = false, signal, signOutOn401 = true } = options;
  const sent = { Accept: text ? 'text/plain' : 'application/json', ...headers };
  if (method !== 'GET' && method !== 'HEAD' && session.csrf) sent['X-CSRF-Token'] = session.csrf;
  let payload;
  if (body !== undefined) {
    sent['Content-Type'] = 'application/json';
    payload = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, { method, headers: sent, body: payload, signal, cache: 'no-store', credentials: 'same-origin' });
  } catch (e) {
    if (e?.name === 'AbortError') throw new ApiError(0, 'aborted', 'the request was cancelled');
    throw new ApiError(0, 'network_error', 'the server could not be reached');
  }
  let raw = '';
  try {
    raw = await response.text();
  } catch {
    raw = '';
  }
  if (!response.ok) {
    let parsed = null;
    try {
      parsed = raw ? JSON.parse(raw) : null;
    } catch {
      parsed = null;
    }
    let error;
    if (parsed && typeof parsed === 'object' && typeof parsed.error === 'string') {
      const { error: code, message, ...details } = parsed;
      error = new ApiError(response.status, code, typeof message === 'string' ? message : '', details);
    } else {
      error = new ApiError(response.status, `http_${response.status}`, response.statusText || 'the request failed');
    }
    // 401: the session ended. csrf_failed: the browser's session is no longer the one
    // this page signed in with (another tab signed in as someone else): start again.
    if ((response.status === 401 || error.code === 'csrf_failed') && signOutOn401) onUnauthorized(error);
    throw error;
  }
  if (text) return raw;
  if (!raw) return null;
  try {
    return JSON.parse(raw);
  } catch {
    throw new ApiError(response.status, 'bad_response', 'the server answered something that is not JSON');
  }
}

/** An error as people read it: `code: message (night 2027-06-02)`. */
export function errorText(error) {
  if (error instanceof ApiError) {
    let text = error.message ? `${error.code}: ${error.message}` : error.code;
    const night = error.details?.night;
    if (night) text += ` (night ${night})`;
    return text;
  }
  return `error: ${error?.message ?? String(error)}`;
}

/** A `role="alert"` paragraph for an error, optionally prefixed (`Could not load: ...`). */
export function errorAlert(error, prefix) {
  return h('p', { role: 'alert', class: 'error' }, prefix ? `${prefix} ${errorText(error)}` : errorText(error));
}

/**
 * The box a view shows when the hotels cannot be loaded: the error and a "Try again"
 * that asks the server afresh, then runs `retry` (the view's own load).
 */
export function hotelsError(ctx, error, retry) {
  const button = h('button', { type: 'button' }, 'Try again');
  button.addEventListener('click', () => {
    ctx.hotels(true).catch(() => {});
    retry();
  });
  return h('div', { class: 'error-box' }, errorAlert(error, 'Could not load the hotels:'), button);
}
