// @ts-check
/**
 * The page's only way to the server: the public /v1 API, with the key the user typed (kept in this
 * tab's sessionStorage, never in localStorage or a cookie), and, when an operator key opened one of
 * its tenant's end users, that user's name in X-Threadkeep-User.
 */

const KEY_STORAGE = "threadkeep.apiKey";
const USER_STORAGE = "threadkeep.user";

/** An error answer of the API: its status and the OpenAI-style error body. */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {{ message?: string, code?: string | null }} error
   */
  constructor(status, error) {
    super(error.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = error.code ?? null;
  }
}

/** @type {(() => Promise<string | null>) | null} */
let askForKey = null;

/**
 * Sets how the page asks for a key when the server says one is needed.
 * @param {() => Promise<string | null>} ask resolves with the key, or null when the user gives up
 */
export function onKeyNeeded(ask) {
  askForKey = ask;
}

export function hasKey() {
  return sessionStorage.getItem(KEY_STORAGE) !== null;
}

export function forgetKey() {
  sessionStorage.removeItem(KEY_STORAGE);
  sessionStorage.removeItem(USER_STORAGE);
}

/** The end user an operator key opened, or null for the key's own user. */
export function openedUser() {
  return sessionStorage.getItem(USER_STORAGE);
}

/**
 * Acts as an end user of the key's tenant from now on (an operator key only), or as the key's own user.
 * @param {string | null} name
 */
export function openUser(name) {
  if (name) sessionStorage.setItem(USER_STORAGE, name);
  else sessionStorage.removeItem(USER_STORAGE);
}

/**
 * Calls the API.
 * @param {string} path
 * @param {{ method?: string, body?: unknown }} [options]
 * @returns {Promise<Response>}
 */
export async function request(path, options = {}) {
  for (;;) {
    /** @type {Record<string, string>} */
    const headers = {};
    const key = sessionStorage.getItem(KEY_STORAGE);
    if (key) headers.authorization = `Bearer ${key}`;
    const user = openedUser();
    if (user) headers["x-threadkeep-user"] = user;
    if (options.body !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(path, {
      method: options.method ?? "GET",
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      cache: "no-store",
    });
    if (response.ok) return response;
    /** @type {{ error?: { message?: string, code?: string | null } }} */
    const body = await response.json().catch(() => ({}));
    const error = new ApiError(response.status, body.error ?? {});
    if (error.code !== "invalid_api_key" || !askForKey) throw error;
    forgetKey();
    const given = await askForKey();
    if (!given) throw error;
    sessionStorage.setItem(KEY_STORAGE, given);
  }
}

/**
 * Calls the API and reads the JSON answer.
 * @param {string} path
 * @param {{ method?: string, body?: unknown }} [options]
 * @returns {Promise<any>}
 */
export async function api(path, options) {
  return (await request(path, options)).json();
}

/**
 * The same, but a route the server does not have (an older server) reads as null.
 * @param {string} path
 * @returns {Promise<any>}
 */
export async function optional(path) {
  try {
    return await api(path);
  } catch (error) {
    if (error instanceof ApiError && error.status === 404 && error.code === "not_found") return null;
    throw error;
  }
}

/** @param {string} id */
export const sessionPath = (id) => `/v1/sessions/${encodeURIComponent(id)}`;
