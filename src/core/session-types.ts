/**
 * What a session holds: messages as OpenAI chat messages plus bookkeeping, the session record,
 * summaries, versioned state, and the branches that keep superseded messages.
 */

/** Roles of an OpenAI chat message (`developer` is the newer name some models use for `system`). */
export type Role = "system" | "developer" | "user" | "assistant" | "tool";

/** The roles threadkeep accepts, in a form usable at run time. */
export const ROLES: readonly Role[] = ["system", "developer", "user", "assistant", "tool"];

/** A tool call made by an assistant message, exactly as in the OpenAI chat API. */
export interface ToolCall {
  id: string;
  type: "function" | (string & {});
  function: { name: string; arguments: string };
  [extra: string]: unknown;
}

/** One part of a multi-part content array (`{ type: "text", text }`, `{ type: "image_url", … }`, …). */
export interface ContentPart {
  type: string;
  text?: string;
  [extra: string]: unknown;
}

/** Message content: a string, an array of parts, or null (an assistant message with only tool calls). */
export type MessageContent = string | ContentPart[] | null;

/**
 * A chat message as the OpenAI chat API knows it. Fields threadkeep does not interpret
 * (`refusal`, `audio`, …) are kept verbatim so a message round-trips losslessly.
 */
export interface ChatMessage {
  role: Role;
  content: MessageContent;
  name?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  [extra: string]: unknown;
}

/** A message to append: a chat message plus optional threadkeep metadata. */
export interface MessageInput extends ChatMessage {
  /** Free-form application data stored with the message; never sent to a model. */
  metadata?: Record<string, unknown>;
  /** True when the message was cut short (e.g. a client disconnected mid-stream). */
  incomplete?: boolean;
}

/** A stored message. */
export interface Message extends MessageInput {
  /**
   * Position in its session: contiguous, starting at 1, assigned by the store on append. Seqs of
   * messages removed from the tail (pop, truncate, undo) are given again to the next append; the cap
   * removes from the head, so the seqs of capped messages are never reused.
   */
  seq: number;
  /** When the store accepted the message, in milliseconds since the epoch. */
  createdAt: number;
}

/** A conversation thread. */
export interface Session {
  id: string;
  /** The owner. A session of another owner is "not found" for every operation. */
  userId: string;
  /** Milliseconds since the epoch. */
  createdAt: number;
  /** Milliseconds since the epoch; moved on every append and touch. Expiry is measured from here. */
  lastActivityAt: number;
  metadata: Record<string, unknown>;
}

/** What is needed to create a session. */
export interface SessionInput {
  id: string;
  userId: string;
  metadata?: Record<string, unknown>;
  /** Defaults to now. */
  createdAt?: number;
  /** Defaults to `createdAt`. */
  lastActivityAt?: number;
}

/** A summary of the message range `fromSeq..toSeq` (inclusive) of one session. */
export interface Summary {
  /** Assigned by the store, increasing per session. */
  id: number;
  fromSeq: number;
  toSeq: number;
  content: string;
  createdAt: number;
  metadata?: Record<string, unknown>;
}

/** What is needed to save a summary. */
export interface SummaryInput {
  fromSeq: number;
  toSeq: number;
  content: string;
  createdAt?: number;
  metadata?: Record<string, unknown>;
  /**
   * The `createdAt` of the session the summary was made from, as read before making it. A store with
   * `capabilities.guardedSummaries` saves the summary only while the stored session still has this
   * `createdAt`, checked in the save's own atomic step, and otherwise throws `session_not_found`: the
   * session was deleted (and perhaps created again under its id) meanwhile, so the summary covers
   * messages of a session that is gone. Not stored with the summary. A session deleted and created
   * again within the same millisecond is not told apart. Stores without the capability ignore it.
   */
  sessionCreatedAt?: number;
}

/** Small JSON object kept per session, changed only by compare-and-set on `version`. */
export interface SessionState {
  /** 0 for a session whose state was never written. */
  version: number;
  data: Record<string, unknown>;
}

/** Why a branch split from the line it hangs on. */
export type BranchReason = "regenerate" | "edit" | "fork";

/** The branch reasons, in a form usable at run time. */
export const BRANCH_REASONS: readonly BranchReason[] = ["regenerate", "edit", "fork"];

/**
 * Messages that once followed `atSeq` and were superseded (a regenerate, an edit, a fork): kept, never
 * deleted by the change that superseded them. Switching to a branch swaps it with what follows `atSeq`.
 */
export interface Branch {
  /** Assigned by the store, increasing per session from 1. */
  id: number;
  /** The seq after which the branch split: its first message had seq `atSeq + 1`. */
  atSeq: number;
  /**
   * Null when the branch splits from the main line; otherwise the branch whose messages it splits
   * from (it was superseded together with them, and comes back with them on a switch).
   */
  parentId: number | null;
  reason: BranchReason;
  /** When the branch was made, in milliseconds since the epoch. */
  createdAt: number;
  metadata?: Record<string, unknown>;
  /** The superseded messages, oldest first, with the seqs and times they had. */
  messages: Message[];
}

/** A branch to keep, as {@link ReplaceOptions.branch}. */
export interface BranchInput {
  reason: BranchReason;
  metadata?: Record<string, unknown>;
}

/** A whole branch record to store as it is (imports and migration). */
export type BranchRecord = Omit<Branch, "id"> & { id?: number };
