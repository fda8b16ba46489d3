/**
 * How a client sends history: the whole conversation on every request (Open WebUI, LibreChat, the
 * AI SDK's useChat) or only the new turn (a thin client that lets threadkeep keep the history).
 */
import { ThreadkeepError } from "../../core/errors.js";
import type { ClientMode } from "../../core/reconcile.js";
import { filledHeader } from "./session-headers.js";

/** How a client sends history (the reading's own {@link ClientMode}). */
export type ClientHint = ClientMode;

/**
 * The header a client declares how it sends history in, per connection (e.g. an Open WebUI custom
 * header or a LibreChat endpoint's `headers:`): `whole-history` or `thin`.
 */
export const CLIENT_HEADER = "x-threadkeep-client";

/**
 * How the client of a request sends history: as it declares in `X-Threadkeep-Client`, else
 * `whole-history` for an Open WebUI chat (it names the chat in `X-OpenWebUI-Chat-Id` when it forwards
 * its headers), else unknown. Open WebUI's user headers alone do not count: a gateway may forward them
 * for clients of its own.
 * @throws ThreadkeepError `invalid_request` for an `X-Threadkeep-Client` that is neither value.
 */
export function clientHintOf(headers: Record<string, string | string[] | undefined>): ClientHint | undefined {
  const declared = filledHeader(headers[CLIENT_HEADER])?.toLowerCase();
  if (declared === "whole-history" || declared === "thin") return declared;
  if (declared !== undefined) {
    throw new ThreadkeepError(
      "invalid_request",
      `X-Threadkeep-Client must be whole-history or thin, got ${JSON.stringify(declared.slice(0, 40))}`,
    );
  }
  // Header names arrive lower-cased (node's http parser).
  if (filledHeader(headers["x-openwebui-chat-id"]) !== undefined) return "whole-history";
  return undefined;
}
