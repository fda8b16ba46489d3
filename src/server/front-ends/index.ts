/**
 * What chat front-ends (Open WebUI, LibreChat) send besides a chat turn, and how threadkeep reads
 * it: which header names the chat, temporary chats, background tasks (side requests), how a client
 * sends history, and Open WebUI's retrieval rewrite of a message.
 */
export { type ClientHint, CLIENT_HEADER, clientHintOf } from "./client-hint.js";
export { PASS_THROUGH_HEADER, type PassThrough, passThrough } from "./pass-through.js";
export { RAG_TEMPLATE_OPENING, ragQueryOf } from "./rag.js";
export {
  DEFAULT_SESSION_HEADERS,
  FRONT_END_ID_NAMESPACE,
  parseSessionHeaders,
  type SessionTarget,
  sessionIdForChat,
  sessionTargetOf,
} from "./session-headers.js";
export { type SideRequestKind, sideRequestOf, TASK_HEADER } from "./side-requests.js";
