import { randomUUID } from "node:crypto";
import { InvalidSessionIdError } from "./errors.js";

const UUID = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
const UUID_RE = new RegExp(`^${UUID}$`);
const SCOPED_RE = new RegExp(`^user_${UUID}_conv_${UUID}$`);

/** Longest accepted session id (`user_{uuid}_conv_{uuid}` is 83 characters). */
export const MAX_SESSION_ID_LENGTH = 83;

/** A new random session id (UUID v4). */
export function newSessionId(): string {
  return randomUUID();
}

/** True for a canonical UUID (any version) or `user_{uuid}_conv_{uuid}`. */
export function isValidSessionId(id: unknown): id is string {
  return typeof id === "string" && id.length <= MAX_SESSION_ID_LENGTH && (UUID_RE.test(id) || SCOPED_RE.test(id));
}

/**
 * Validates a session id and returns its canonical (lower-case) form.
 * @throws InvalidSessionIdError with code `invalid_session_id`.
 */
export function parseSessionId(id: unknown): string {
  if (!isValidSessionId(id)) {
    const shown = typeof id === "string" ? JSON.stringify(id.slice(0, 100)) : typeof id;
    throw new InvalidSessionIdError(`Invalid session id ${shown}: expected a UUID or user_{uuid}_conv_{uuid}`);
  }
  return id.toLowerCase();
}

/**
 * Builds a user-scoped, deterministic session id `user_{userUuid}_conv_{conversationUuid}`.
 * @throws InvalidSessionIdError when either part is not a UUID.
 */
export function scopedSessionId(userUuid: string, conversationUuid: string): string {
  return parseSessionId(`user_${userUuid}_conv_${conversationUuid}`);
}
