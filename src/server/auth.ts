import { createHash, timingSafeEqual } from "node:crypto";
import { ThreadkeepError } from "../core/errors.js";

/** Maps an `Authorization` header to the user id it proves. @throws ThreadkeepError `invalid_api_key` */
export type Authenticator = (authorization: string | undefined) => string;

const digest = (text: string) => createHash("sha256").update(text).digest();

/**
 * Builds the authenticator for a set of threadkeep API keys (key → user id). With no keys every
 * caller is `defaultUserId` and any `Authorization` header is ignored (OpenAI clients always send one).
 * Keys are compared in constant time, over every configured key, so timing tells nothing about them.
 */
export function createAuthenticator(apiKeys: ReadonlyMap<string, string>, defaultUserId = "default"): Authenticator {
  if (apiKeys.size === 0) return () => defaultUserId;
  const entries = [...apiKeys].map(([key, user]) => ({ hash: digest(key), user }));
  return (authorization) => {
    const match = /^Bearer\s+(.+)$/i.exec(authorization?.trim() ?? "");
    if (!match) {
      throw new ThreadkeepError("invalid_api_key", "Missing API key: send Authorization: Bearer <threadkeep API key>");
    }
    const offered = digest(match[1].trim());
    let user: string | undefined;
    for (const entry of entries) {
      if (timingSafeEqual(entry.hash, offered) && user === undefined) user = entry.user;
    }
    if (user === undefined) throw new ThreadkeepError("invalid_api_key", "Invalid API key");
    return user;
  };
}

/**
 * Builds the check of operator keys: true when the `Authorization` header carries one of `operatorKeys`
 * (each also one of the API keys). Constant time over every operator key, as {@link createAuthenticator}.
 */
export function createOperatorCheck(operatorKeys: Iterable<string>): (authorization: string | undefined) => boolean {
  const hashes = [...new Set(operatorKeys)].map(digest);
  if (hashes.length === 0) return () => false;
  return (authorization) => {
    const match = /^Bearer\s+(.+)$/i.exec(authorization?.trim() ?? "");
    if (!match) return false;
    const offered = digest(match[1].trim());
    let found = false;
    for (const hash of hashes) found = timingSafeEqual(hash, offered) || found;
    return found;
  };
}

/** Normalises the `apiKeys` option: a map, a `{ key: user }` object, or `key1:alice,key2:bob`. */
export function toApiKeyMap(
  keys: ReadonlyMap<string, string> | Record<string, string> | undefined,
): Map<string, string> {
  if (!keys) return new Map();
  if (keys instanceof Map) return new Map(keys);
  return new Map(Object.entries(keys));
}

/** True for addresses only this machine can reach (`127.0.0.0/8`, `::1`, `localhost`). */
export function isLoopbackHost(host: string): boolean {
  const h = host
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, "");
  return h === "localhost" || h === "::1" || /^127(\.\d{1,3}){3}$/.test(h) || h === "::ffff:127.0.0.1";
}
