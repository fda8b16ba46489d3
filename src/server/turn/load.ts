/**
 * The steps of one proxied turn that do not touch HTTP: which messages of a request are new, loading
 * the context (degrading to the request alone when the store is down), and committing the turn
 * (degrading to "not saved"). The decisions to degrade are made here, logged and reported.
 */
import type { FastifyBaseLogger } from "fastify";
import { isOutcomeUnknown, isStoreRefusal, isThreadkeepError, ThreadkeepError } from "../../core/errors.js";
import type { Memory, PreloadedTurn } from "../../core/memory.js";
import { isHiddenCarrier } from "../../core/items/index.js";
import { toChatMessage } from "../../core/messages.js";
import { type ClientMode, type ReconcilePlan, readRequest, readStoredView, sameMessage, viewFromWindow } from "../../core/reconcile.js";
import type { ChatMessage, MessageInput, Session } from "../../core/types.js";
import { ragQueryOf } from "../front-ends/rag.js";
import type { ServerMetrics } from "../metrics.js";
import { secondsSince } from "../metrics.js";

/** What a turn needs from the server. */
export interface TurnDeps {
  memory: Memory;
  metrics: ServerMetrics;
  log: FastifyBaseLogger;
}

/** A request's messages, sorted by what threadkeep does with them. */
export interface SplitMessages {
  /** System and developer messages: sent first, never stored (the client sends them every time). */
  system: ChatMessage[];
  /** Every other message, in order: the client's view of the conversation. */
  conversation: ChatMessage[];
  /** The messages after the request's last assistant message: the new turn. */
  newTurn: ChatMessage[];
}

const isSystem = (m: ChatMessage) => m.role === "system" || m.role === "developer";

/**
 * Splits a request's messages. A thin client that sends one message and a client that re-sends the
 * whole history (OpenWebUI) get the same new turn: what follows the last assistant message.
 */
export function splitMessages(messages: ChatMessage[]): SplitMessages {
  const system = messages.filter(isSystem);
  const conversation = messages.filter((m) => !isSystem(m));
  const lastAssistant = conversation.findLastIndex((m) => m.role === "assistant");
  return { system, conversation, newTurn: conversation.slice(lastAssistant + 1) };
}

/**
 * A turn whose new messages the dialect already knows (a Responses request: its input is new, its
 * instructions are for this turn only), instead of a chat request's list to split.
 */
export interface PlannedTurn {
  /** Sent first, never stored. */
  system: ChatMessage[];
  /** The turn's new messages, stored with the reply (their metadata is never sent). */
  toStore: MessageInput[];
  /**
   * `toStore` is what the client knows of the conversation, not only what is new (a Responses
   * request on a session named by its header): it is read against the stored line as a chat
   * request is, and only what is new is stored.
   */
  read?: boolean;
}

/** The context a turn sends upstream, and what it will store. */
export interface LoadedTurn {
  /** The `messages` of the upstream request. */
  messages: ChatMessage[];
  /** What to store before the reply. */
  toStore: ChatMessage[];
  /** The session did not exist before this turn; its first append creates it, so a failed turn leaves none. */
  created: boolean;
  /** False when the store was unreachable and the turn goes on without history. */
  contextAvailable: boolean;
  /** A message was cut to fit the token budget (`input-truncated`). */
  truncated?: boolean;
  /** The session record, resolved once for the whole turn (absent for a new session or a store that is down). */
  session?: Session;
  /** How a whole-history request is stored: appended, or replacing a tail kept as a branch. */
  reconciled?: ReconcilePlan;
  /** What the client should hear about the context, e.g. `history-omitted` (older turns left out without a summary). */
  warnings?: string[];
}

/**
 * A stored message and the one a request carries in its place are the same turn; a user message Open
 * WebUI rewrote with its RAG template is stored as sent, and the next request carries the person's own
 * words for it.
 */
function sameAsSent(stored: ChatMessage, sent: ChatMessage): boolean {
  if (sameMessage(stored, sent)) return true;
  if (stored.role !== "user" || sent.role !== "user" || typeof stored.content !== "string") return false;
  const words = ragQueryOf(stored.content);
  return words !== undefined && sameMessage({ role: "user", content: words }, sent);
}

/** What {@link loadTurn} loads a turn for. */
export interface LoadTurnOptions {
  sessionId: string;
  userId: string;
  /** A chat request's messages (read against the stored line), or a dialect's planned turn. */
  request: ChatMessage[] | PlannedTurn;
  model?: string;
  /** What was read with the turn's lease. */
  preloaded?: PreloadedTurn;
  /** How the client declared it sends history (see `core/reconcile.ts`). */
  client?: ClientMode;
}

/**
 * Loads the session's context for a request. A chat request is read against the stored line
 * (`core/reconcile.ts`: a new session adopts it; a thin turn, a tool loop's follow-up or a whole
 * history store only what is new; a regenerate or an edit, on evidence, replaces a tail kept as a
 * branch); a {@link PlannedTurn} stores its own. Another owner's session throws `session_not_found`
 * before anything is read. A store that is down yields the request's own messages and
 * `contextAvailable: false`.
 */
export async function loadTurn(deps: TurnDeps, options: LoadTurnOptions): Promise<LoadedTurn> {
  const { sessionId, userId, request, model, preloaded } = options;
  const planned = Array.isArray(request) ? undefined : request;
  const split = planned ? undefined : splitMessages(request as ChatMessage[]);
  const system = planned?.system ?? split?.system ?? [];
  const start = performance.now();
  try {
    let created = false;
    let session: Session | undefined;
    if (preloaded) {
      // Read with the lease (another owner's session was refused there).
      session = preloaded.session ?? undefined;
      created = !session;
    } else {
      try {
        // Throws session_not_found for another owner's session as for a missing one; buildContext
        // below tells them apart again, refusing the former and reading the latter as empty.
        session = await deps.memory.getSession(sessionId, { userId });
      } catch (error) {
        if (!isThreadkeepError(error, "session_not_found")) throw error;
        created = true;
      }
    }
    let reconciled: ReconcilePlan | undefined;
    const conversation = split?.conversation ?? (planned?.read ? (planned.toStore as ChatMessage[]) : undefined);
    if (conversation) {
      const reading = { metadata: session?.metadata, client: options.client, same: sameAsSent };
      // The window read with the lease answers most requests; a whole history, or a request that may
      // be a regenerate or an edit, is compared with the stored line read from its start.
      const window = preloaded ? viewFromWindow(preloaded.messages, preloaded.messages.length < preloaded.last, session) : undefined;
      if (!session) reconciled = readRequest(conversation, { tail: [] }, reading);
      else if (window) reconciled = readRequest(conversation, window, reading);
      if (!reconciled) reconciled = readRequest(conversation, await readStoredView(await deps.memory.store(), session!, conversation.length), reading)!;
    }
    const toStore = reconciled ? reconciled.toStore : planned!.toStore;
    const context = await deps.memory.buildContext(sessionId, {
      upToSeq: reconciled?.upToSeq,
      historyStartsAt: reconciled?.historyStartsAt,
      userId,
      system,
      // Items a chat model cannot read (reasoning) are stored, never sent.
      input: toStore.filter((m) => !isHiddenCarrier(m)).map(toChatMessage),
      model,
      session,
      preloaded,
    });
    return {
      messages: context.messages,
      toStore,
      created,
      contextAvailable: true,
      truncated: context.omitted.truncated > 0,
      session,
      reconciled,
      warnings: context.warnings,
    };
  } catch (error) {
    // A store that is down, or a session whose stored data cannot be read, costs the history of this
    // turn, not the turn: answer from the request alone and say so.
    if (!isThreadkeepError(error, "store_unavailable") && !isThreadkeepError(error, "store_corrupt")) throw error;
    deps.log.warn(
      { err: error, sessionId },
      "store unavailable or session data unreadable while loading context; answering without history",
    );
    deps.metrics.error("context_unavailable");
    const toStore = planned ? planned.toStore : split!.newTurn;
    // threadkeep's own fields never reach the model, on this path either.
    const messages = planned ? [...system, ...toStore.map(toChatMessage)] : (request as ChatMessage[]).map(toChatMessage);
    return { messages, toStore, created: false, contextAvailable: false };
  } finally {
    deps.metrics.storeLoadSeconds.observe(secondsSince(start));
  }
}

/**
 * How a commit ended: stored; `not-saved` (refused, or the store was down before the write); or
 * `save-unconfirmed` (the write was sent but its answer lost: it may have been stored).
 */
export type CommitResult = "saved" | "not-saved" | "save-unconfirmed";

/** What a commit knows of its turn. */
export interface CommitContext {
  /** The session record resolved this turn (saves a read). */
  session?: Session;
  /** From an `Idempotency-Key`: a retry stores the turn at most once. */
  operationId?: string;
  /** How a whole-history request is stored. */
  reconciled?: ReconcilePlan;
  /** The commit is the turn's last store call: it may release the lease in the same round trip. */
  last?: boolean;
}

/**
 * Stores a turn in one append; with `operationId` (from an `Idempotency-Key`) a retry stores it at
 * most once. Failures are logged and counted, and reported in the result, never thrown.
 */
export async function commitTurn(
  deps: TurnDeps,
  sessionId: string,
  userId: string,
  messages: MessageInput[],
  fence: number | undefined,
  context: CommitContext = {},
): Promise<CommitResult> {
  const { session, operationId, reconciled } = context;
  const start = performance.now();
  try {
    // A metadata write follows a reconciled first turn: the lease is released after it, as usual.
    const releaseLease = context.last && !reconciled?.metadata;
    const options = { userId, fence, session, operationId, branch: reconciled?.branch, releaseLease };
    if (reconciled?.replaceAfter !== undefined) await deps.memory.replaceAfter(sessionId, reconciled.replaceAfter, messages, options);
    else await deps.memory.addMessages(sessionId, messages, options);
    if (reconciled?.metadata) await deps.memory.updateSessionMetadata(sessionId, reconciled.metadata, { userId });
    return "saved";
  } catch (error) {
    // An attempt of this idempotent request on another process committed already: stored once.
    if (operationId && isThreadkeepError(error, "operation_conflict")) return "saved";
    // The reply is already paid for: the client still gets it, told honestly what became of it.
    if (isOutcomeUnknown(error)) {
      deps.log.warn({ err: error, sessionId }, "saving the turn got no answer; it may or may not be stored");
      deps.metrics.error("save_unconfirmed");
      return "save-unconfirmed";
    }
    deps.log.warn({ err: error, sessionId }, "could not save the turn; the reply is returned unsaved");
    deps.metrics.error("not_saved");
    return "not-saved";
  } finally {
    deps.metrics.commitSeconds.observe(secondsSince(start));
  }
}

/**
 * Runs `fn` holding the session's turn lease, so turns of one session run in arrival order. When the
 * lease cannot be taken because the store is down, the turn still runs (unordered), as it does for
 * loading and saving; when the store refuses the lease statement (not an outage: its database needs
 * fixing) the turn fails with `store_misconfigured` (503). With `preloadFor` (the caller's user id) the turn's context is read with the
 * lease, in one round trip where the store allows, and handed to `fn`.
 */
export async function withTurnLease<T>(
  deps: TurnDeps,
  sessionId: string,
  fn: (fence: number | undefined, preloaded?: PreloadedTurn) => Promise<T>,
  preloadFor?: string,
): Promise<T> {
  let entered = false;
  const run = (options: { preload?: boolean; userId?: string }) =>
    deps.memory.runTurn(
      sessionId,
      (lease, preloaded) => {
        entered = true;
        return fn(lease.fence, preloaded);
      },
      options,
    );
  try {
    if (preloadFor === undefined) return await run({});
    try {
      return await run({ preload: true, userId: preloadFor });
    } catch (error) {
      // Stored data that cannot be read costs the turn its history, not its place in line: take the
      // lease alone, and let loading the context degrade as it does for every unreadable read.
      if (entered || !isThreadkeepError(error, "store_corrupt")) throw error;
      return await run({});
    }
  } catch (error) {
    if (entered) throw error;
    // An outage costs the turn its order; a database that refuses the lease statement (a missing
    // column, a permission) would cost every turn its order, silently: fail the turn instead (503,
    // logged with the SQL error and counted by the error handler), before any model call.
    if (isStoreRefusal(error)) {
      throw new ThreadkeepError("store_misconfigured", `The turn could not take its lease: ${error.message}. The store's database needs fixing.`, { cause: error });
    }
    if (!isThreadkeepError(error, "store_unavailable")) throw error;
    deps.log.warn(
      { err: error, sessionId },
      "store unavailable while taking the turn lease; running the turn without it",
    );
    return fn(undefined);
  }
}

/** Fields of an upstream reply worth keeping; e.g. `reasoning_content` is left out, as some APIs refuse it back. */
const KEPT_FIELDS = ["name", "refusal", "function_call", "audio"] as const;

/** The assistant message to store from an upstream reply (null when it has none). */
export function replyMessage(
  message: unknown,
  extra: { model?: string; finishReason?: string | null } = {},
): MessageInput | null {
  if (!message || typeof message !== "object") return null;
  const source = message as Record<string, unknown>;
  const content = source.content;
  const stored: MessageInput = {
    role: "assistant",
    content:
      typeof content === "string" || Array.isArray(content) ? (content as MessageInput["content"]) : null,
  };
  if (Array.isArray(source.tool_calls) && source.tool_calls.length > 0)
    stored.tool_calls = source.tool_calls as MessageInput["tool_calls"];
  for (const field of KEPT_FIELDS) {
    if (source[field] !== undefined && source[field] !== null)
      (stored as Record<string, unknown>)[field] = source[field];
  }
  if (stored.content === null && !stored.tool_calls) stored.content = "";
  const metadata: Record<string, unknown> = {};
  if (extra.model) metadata.model = extra.model;
  if (extra.finishReason) metadata.finishReason = extra.finishReason;
  if (Object.keys(metadata).length > 0) stored.metadata = metadata;
  return stored;
}
