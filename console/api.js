// The one way the console talks to the server: same origin, bearer token, JSON, and
// every failure turned into an `ApiError` the views can show.

import { h } from './util.js';

const TOKEN_KEY = 'console.token';

/** The token lives in sessionStorage only: it is kept for the tab, not beyond. */
export const session = {
  get token() {
    try {
      return sessionStorage.getItem(TOKEN_KEY);
    } catch {
      return null;
    }
  },
  set token(value) {
    try {
      sessionStorage.setItem(TOKEN_KEY, value);
    } catch {
      // storage refused (private mode): the console then works until a reload
    }
  },
  clear() {
    try {
      sessionStorage.removeItem(TOKEN_KEY);
    } catch {
      // nothing stored
    }
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
 * Call the API. Options: `method`, `body` (sent as JSON), `headers`, `token` (instead of
 * the session's), `text` (return the body as text), `signal`, `signOutOn401` (default
 * true). Resolves with the parsed body (null when empty); rejects with an ApiError.
 */
export async function api(path, options = {}) {
  const { method = 'GET', body, headers = {}, token, text = false, signal, signOutOn401 = true } = options;
  const sent = { Accept: text ? 'text/plain' : 'application/json', ...headers };
  const bearer = token ?? session.token;
  if (bearer) sent.Authorization = `Bearer ${bearer}`;
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
    if (response.status === 401 && signOutOn401) onUnauthorized(error);
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
