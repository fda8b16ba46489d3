/**
 * Loading a proxied turn: which messages of a request are new, and the context sent upstream
 * (degrading to the request alone when the store is down). The decision to degrade is made here,
 * logged and reported.
 */
import { isThreadkeepError } from "../../core/errors.js";
import type { PreloadedTurn } from "../../core/memory/memory.js";
import { isHiddenCarrier } from "../../core/items/index.js";
import { toChatMessage } from "../../core/messages.js";
import {
  afterLastAnswer,
  type ClientMode,
  type ReconcilePlan,
  readRequest,
  readStoredView,
  sameMessage,
  viewFromWindow,
} from "../../core/reconcile.js";
import type { ChatMessage, MessageInput, Session } from "../../core/types.js";
import { ragQueryOf } from "../front-ends/rag.js";
import { secondsSince } from "../metrics.js";
import type { TurnDeps } from "./lease.js";
import { inSpan } from "../../core/tracing.js";

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
 * Splits a request's messages: the system and developer messages, and the conversation that is read
 * against the stored line; `newTurn` is what is stored when the store cannot be read.
 */
export function splitMessages(messages: ChatMessage[]): SplitMessages {
  const system = messages.filter(isSystem);
  const conversation = messages.filter((m) => !isSystem(m));
  return { system, conversation, newTurn: afterLastAnswer(conversation) };
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
  /** How the request was read: what it stores, appended or replacing a tail kept as a branch. */
  reconciled?: ReconcilePlan;
  /** What the client should hear about the context, e.g. `history-omitted` (older turns left out without a summary). */
  warnings?: string[];
}

/** A leading reasoning block as models write it inline (Open WebUI's default reasoning tags). */
const REASONING_BLOCK = /^\s*<(think|thinking|reason|reasoning|thought|Thought)>[\s\S]*?<\/\1>\s*/;

/**
 * A stored message and the one a request carries in its place are the same turn; a user message Open
 * WebUI rewrote with its RAG template is stored as sent, and the next request carries the person's own
 * words for it.
 */
function sameAsSent(stored: ChatMessage, sent: ChatMessage): boolean {
  if (sameMessage(stored, sent)) return true;
  // Open WebUI shows (and re-sends) a reasoning model's answer without its leading <think> block.
  if (stored.role === "assistant" && sent.role === "assistant" && typeof stored.content === "string") {
    const answer = stored.content.replace(REASONING_BLOCK, "");
    return answer !== stored.content && sameMessage({ ...stored, content: answer }, sent);
  }
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
  // A planned turn that is read (a Responses request on a named session) splits its input as a chat
  // request's messages are split: its system and developer items are sent, never stored or compared.
  const split =
    planned && !planned.read ? undefined : splitMessages((planned ? planned.toStore : request) as ChatMessage[]);
  const system = [...(planned?.system ?? []), ...(split?.system ?? [])];
  const start = performance.now();
  try {
    const read = await inSpan(
      "threadkeep.store.read",
      { attributes: { "threadkeep.preloaded": preloaded !== undefined } },
      async () => {
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
        if (split) {
          const conversation = split.conversation;
          const reading = { metadata: session?.metadata, client: options.client, same: sameAsSent };
          // The window read with the lease answers most requests; a whole history, or a request that may
          // be a regenerate or an edit, is compared with the stored line read from its start.
          const window = preloaded
            ? viewFromWindow(preloaded.messages, preloaded.messages.length < preloaded.last, session)
            : undefined;
          if (!session) reconciled = readRequest(conversation, { tail: [] }, reading);
          else if (window) reconciled = readRequest(conversation, window, reading);
          if (!reconciled)
            reconciled = readRequest(
              conversation,
              await readStoredView(await deps.memory.store(), session!, conversation.length),
              reading,
            )!;
          deps.metrics.readings.inc({ reading: reconciled.reading });
        }
        return { created, session, reconciled };
      },
    );
    const { created, session, reconciled } = read;
    const toStore = reconciled ? reconciled.toStore : planned!.toStore;
    const context = await inSpan("threadkeep.context", {}, () =>
      deps.memory.buildContext(sessionId, {
        upToSeq: reconciled?.upToSeq,
        historyStartsAt: reconciled?.historyStartsAt,
        userId,
        system,
        // Items a chat model cannot read (reasoning) are stored, never sent.
        input: toStore.filter((m) => !isHiddenCarrier(m)).map(toChatMessage),
        model,
        session,
        preloaded,
      }),
    );
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
    const toStore = split ? split.newTurn : planned!.toStore;
    // threadkeep's own fields never reach the model, on this path either.
    const messages = planned
      ? [...system, ...toStore.map(toChatMessage)]
      : (request as ChatMessage[]).map(toChatMessage);
    return { messages, toStore, created: false, contextAvailable: false };
  } finally {
    deps.metrics.storeLoadSeconds.observe(secondsSince(start));
  }
}
