/**
 * Conversation and response ids that name their session, so no table maps one to the other:
 * `conv_<hex>` is the session (a UUID's 32 hex digits, or the two UUIDs of `user_{uuid}_conv_{uuid}`),
 * `resp_<hex><16 hex>` is a response stored in that session. Ownership is checked where the session
 * is read, as for every session id.
 */
import { ThreadkeepError } from "../errors.js";
import { parseSessionId } from "../ids.js";
import { randomHex } from "./random-hex.js";

const UUID_HEX = /^[0-9a-f]{32}$/;
const NONCE_HEX = 16;

function uuidOf(hex: string): string {
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

function sessionToken(sessionId: string): string {
  const id = parseSessionId(sessionId);
  return id.replace(/^user_|_conv_/g, "").replace(/-/g, "");
}

function sessionOfToken(token: string): string | null {
  if (token.length === 32 && UUID_HEX.test(token)) return uuidOf(token);
  if (token.length === 64 && UUID_HEX.test(token.slice(0, 32)) && UUID_HEX.test(token.slice(32))) {
    return `user_${uuidOf(token.slice(0, 32))}_conv_${uuidOf(token.slice(32))}`;
  }
  return null;
}

/** The conversation id of a session: `conv_` + its hex digits. */
export function conversationIdOf(sessionId: string): string {
  return `conv_${sessionToken(sessionId)}`;
}

/**
 * The session a conversation id names. Accepts a plain session id too, so a session made by the
 * chat completions API can be continued as a conversation.
 * @throws ThreadkeepError `invalid_request` (param `param`) for anything else.
 */
export function sessionOfConversation(conversationId: unknown, param = "conversation"): string {
  const raw = typeof conversationId === "string" ? conversationId.toLowerCase() : "";
  const session = raw.startsWith("conv_") ? sessionOfToken(raw.slice(5)) : null;
  if (session) return session;
  try {
    return parseSessionId(conversationId);
  } catch {
    const shown =
      typeof conversationId === "string" ? JSON.stringify(conversationId.slice(0, 100)) : typeof conversationId;
    throw new ThreadkeepError(
      "invalid_request",
      `Invalid conversation id ${shown}: expected conv_… as returned by threadkeep`,
      {
        details: { field: param },
      },
    );
  }
}

/** A new response id in a session. */
export function newResponseId(sessionId: string): string {
  return `resp_${sessionToken(sessionId)}${randomHex(NONCE_HEX / 2)}`;
}

/** The session a response id names, or null when it is not one of threadkeep's. */
export function sessionOfResponse(responseId: unknown): string | null {
  if (typeof responseId !== "string" || !responseId.startsWith("resp_")) return null;
  const hex = responseId.slice(5).toLowerCase();
  if (!/^[0-9a-f]+$/.test(hex)) return null;
  return sessionOfToken(hex.slice(0, -NONCE_HEX));
}
