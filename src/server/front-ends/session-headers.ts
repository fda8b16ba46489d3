/**
 * Which conversation a request belongs to, read from the headers a front-end sends: `X-Session-ID`
 * (threadkeep's own), `X-OpenWebUI-Chat-Id` (Open WebUI with `ENABLE_FORWARD_USER_INFO_HEADERS=true`,
 * `backend/open_webui/routers/openai.py` `get_headers_and_cookies`), `X-Conversation-Id` (LibreChat's
 * documented `headers: { X-Conversation-Id: '{{LIBRECHAT_BODY_CONVERSATIONID}}' }`). The first header
 * in the order that holds a value decides; a temporary chat (`local:…`) is recognised before any id
 * is validated.
 */
import { createHash } from "node:crypto";
import { InvalidSessionIdError, ThreadkeepError } from "../../core/errors.js";
import { isValidSessionId, newSessionId, parseSessionId } from "../../core/ids.js";

/** threadkeep's own session header, answered on every turn. */
const SESSION_HEADER = "x-session-id";

/** The headers read for the session id, in order. */
export const DEFAULT_SESSION_HEADERS: readonly string[] = [SESSION_HEADER, "x-openwebui-chat-id", "x-conversation-id"];

/**
 * Namespace of the UUID v5 ids derived from a front-end's chat ids that are not UUIDs. Fixed and
 * tenant-free, so a chat id maps to the same session id on every threadkeep instance.
 */
export const FRONT_END_ID_NAMESPACE = "4f1d6a4e-6c1b-5b8e-9a57-7468726b6565";

/** Longest front-end chat id accepted (longer ones are refused, not hashed). */
export const MAX_FRONT_END_ID_LENGTH = 512;

/** Where a request goes. */
export type SessionTarget =
  /** A session: named by a header (`given`), or new. `header` is the header that named it. */
  | { kind: "session"; id: string; given: boolean; header?: string }
  /** A temporary chat: answered, never stored. */
  | { kind: "temporary"; header: string };

/**
 * True for a value a front-end meant to fill but did not: an unresolved template such as Open WebUI's
 * `{{CHAT_ID}}` or LibreChat's `{{LIBRECHAT_BODY_CONVERSATIONID}}` (LibreChat leaves a placeholder it
 * cannot resolve as it is: `packages/api/src/utils/env.ts` `resolveHeaders`), or an unset `${VAR}`.
 */
export function isUnresolvedTemplate(value: string): boolean {
  return /\{\{[^}]*\}\}|\$\{[^}]*\}/.test(value);
}

/** A header's value, trimmed, or undefined when it holds none: absent, empty, or an unresolved template. */
export function filledHeader(value: string | string[] | undefined): string | undefined {
  const first = Array.isArray(value) ? value[0] : value;
  const trimmed = first?.trim();
  return !trimmed || isUnresolvedTemplate(trimmed) ? undefined : trimmed;
}

/**
 * A header's value as an id, or undefined when it holds none ({@link filledHeader}), or LibreChat's
 * placeholder for a conversation not created yet (`new`, `Constants.NEW_CONVO`).
 */
export function headerId(value: string | string[] | undefined): string | undefined {
  const filled = filledHeader(value);
  return filled === "new" ? undefined : filled;
}

/** True for the id of an Open WebUI temporary chat: `local:<socket id>` (`src/lib/components/chat/Chat.svelte`). */
export function isTemporaryChatId(id: string): boolean {
  return id.startsWith("local:");
}

/** RFC 4122 §4.3 name-based UUID (version 5, SHA-1) of `name` in `namespace`. */
export function uuidV5(name: string, namespace: string): string {
  const hash = createHash("sha1")
    .update(Buffer.from(namespace.replace(/-/g, ""), "hex"))
    .update(name, "utf8")
    .digest();
  hash[6] = (hash[6] & 0x0f) | 0x50;
  hash[8] = (hash[8] & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/**
 * The session id for a front-end's chat id: the id itself when it is a threadkeep session id (Open
 * WebUI's chat ids and LibreChat's conversation ids are UUID v4), otherwise a UUID v5 of it in
 * {@link FRONT_END_ID_NAMESPACE}.
 * @throws InvalidSessionIdError for an id longer than {@link MAX_FRONT_END_ID_LENGTH}.
 */
export function sessionIdForChat(chatId: string): string {
  const id: string = chatId;
  if (isValidSessionId(id)) return id.toLowerCase();
  if (chatId.length > MAX_FRONT_END_ID_LENGTH) {
    throw new InvalidSessionIdError(
      `Chat id of ${chatId.length} characters: at most ${MAX_FRONT_END_ID_LENGTH} are accepted`,
    );
  }
  return uuidV5(chatId, FRONT_END_ID_NAMESPACE);
}

/**
 * Where a request goes, from its headers read in `order` (lower-case names). `X-Session-ID` must
 * hold a threadkeep session id; another header may hold any chat id (see {@link sessionIdForChat}).
 * @throws InvalidSessionIdError `invalid_session_id` for a malformed `X-Session-ID` or an over-long chat id.
 */
export function sessionTargetOf(
  headers: Record<string, string | string[] | undefined>,
  order: readonly string[] = DEFAULT_SESSION_HEADERS,
): SessionTarget {
  for (const header of order) {
    const id = headerId(headers[header]);
    if (id === undefined) continue;
    if (isTemporaryChatId(id)) return { kind: "temporary", header };
    return {
      kind: "session",
      id: header === SESSION_HEADER ? parseSessionId(id) : sessionIdForChat(id),
      given: true,
      header,
    };
  }
  return { kind: "session", id: newSessionId(), given: false };
}

/**
 * Parses a `--session-headers` list (`a,b,c`) into lower-case header names; an empty list yields the defaults.
 * @throws ThreadkeepError `invalid_request` for a name that is not an HTTP header name.
 */
export function parseSessionHeaders(text: string | undefined): string[] {
  const names = (text ?? "")
    .split(",")
    .map((name) => name.trim().toLowerCase())
    .filter(Boolean);
  for (const name of names) {
    if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(name)) {
      throw new ThreadkeepError(
        "invalid_request",
        `Invalid session header name ${JSON.stringify(name.slice(0, 60))}: expected a header name such as x-session-id`,
      );
    }
  }
  return names.length > 0 ? [...new Set(names)] : [...DEFAULT_SESSION_HEADERS];
}
