// The console's only way to the server: the same /v1/admin API any client uses, with the key from
// this tab's session storage. Errors arrive as ApiError carrying the API's {error: {code, message}}.
/* global fetch, sessionStorage, URLSearchParams */

const KEY_NAME = 'hookline.console.key';

/**
 * The key lives in sessionStorage only: never localStorage (it would outlive the tab) and never a
 * cookie (it would ride along on requests the page did not make).
 */
export const session = {
  get: () => sessionStorage.getItem(KEY_NAME),
  set: (key) => sessionStorage.setItem(KEY_NAME, key),
  clear: () => sessionStorage.removeItem(KEY_NAME),
};

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

// Set by app.js: a 401 in the middle of a session means the key was revoked, which signs the tab out.
let onUnauthorized = () => {};
export function whenUnauthorized(handler) {
  onUnauthorized = handler;
}

/** `?a=1&b=2` from an object, leaving out empty values; '' when nothing is left. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') search.set(name, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : '';
}

/**
 * Calls the API and answers the parsed JSON. `key` overrides the stored key (used to try a key at
 * sign-in before keeping it); `quiet401` keeps that trial from signing the tab out.
 */
export async function api(path, { method = 'GET', body, key = session.get(), quiet401 = false } = {}) {
  const headers = { accept: 'application/json' };
  if (key) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store',
      credentials: 'omit',
    });
  } catch {
    throw new ApiError(0, 'network_error', 'the hookline server could not be reached');
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = data && typeof data === 'object' ? data.error : null;
    const failure = new ApiError(
      response.status,
      typeof error?.code === 'string' ? error.code : `http_${response.status}`,
      typeof error?.message === 'string' ? error.message : response.statusText || 'request failed',
    );
    if (response.status === 401 && !quiet401) onUnauthorized(failure);
    throw failure;
  }
  return data;
}
