import type { ChatMessage, Message, Session, SessionState, Summary } from "../types.js";
import type { MemoriesInContext } from "./user-memories.js";
import type { EncodingName } from "./tokens.js";

/**
 * How the next context should be shaped, stored per session (in its state under `preferences`)
 * and applied on the next assembly, then cleared unless `sticky`.
 */
export interface ContextPreferences {
  /** Recent messages to include instead of the configured window (1..1000). */
  maxRecentMessages?: number;
  /** Bring this seq range (inclusive, at most 200 messages) into context, e.g. an older turn found by search. */
  focusRange?: { fromSeq: number; toSeq: number };
  /** Include summaries of older turns. @default true */
  includeSummaries?: boolean;
  /** Messages (by seq, at most 50) included while they are stored, with their tool call or results. */
  pinnedSeqs?: number[];
  /** Keep these preferences after the next assembly. @default false */
  sticky?: boolean;
  /** Recall the older messages most related to this topic (instead of to the user's last message). */
  recallTopic?: string;
  /** `user`: recall from the owner's other sessions too; `session`: this session only. Overrides the server's `recall.scope`. */
  recallScope?: "session" | "user";
  /** Include the user's memories (what is known about them from all their sessions). @default true */
  memories?: boolean;
  /** Memories (by id, at most 50) to include first, within the memory share of the budget. */
  memoryIds?: string[];
}

/** Everything the assembler needs, already loaded. */
export interface ContextInput {
  /** System (or developer) messages to put first: the application's or the request's. Never dropped. */
  system: ChatMessage[];
  /** Stored history, oldest first: at least the window, plus any focused or pinned messages. */
  history: Message[];
  /** Summaries of older turns. */
  summaries: Summary[];
  /** Session state, rendered as a short system note when it has something to say. */
  state?: SessionState;
  /** The new messages of this turn (not yet stored). */
  input: ChatMessage[];
  /** Most recent stored messages to include. */
  window: number;
  /** Token budget for the whole request (system + summaries + history + input). */
  tokenBudget: number;
  /** Model name; picks the tokenizer encoding. */
  model?: string;
  /** Count with this encoding instead of the one the model name picks. */
  encoding?: EncodingName;
  preferences?: ContextPreferences;
  /** The state note to use instead of rendering `state` (null: none). */
  stateNote?: string | null;
  /** The time pending confirmations are checked against, in ms since the epoch. @default Date.now() */
  now?: number;
}

/** Why stored messages were left out, by count. */
export interface OmittedReasons {
  /** Older than the message window. */
  window: number;
  /** Inside the window but past the token budget. */
  budget: number;
  /** Tool results without their call, or a call without all its results. */
  toolPairs: number;
}

/** The stored messages left out, by seq, per reason. */
export interface OmittedSeqs {
  window: number[];
  budget: number[];
  toolPairs: number[];
}

/** Tokens of each part of an assembled context. */
export interface ContextPartTokens {
  /** The system (and developer) messages given to the assembly. */
  system: number;
  /** The one system message of summaries. */
  summary: number;
  /** The state note. */
  stateNote: number;
  /** Stored history (window, focused and pinned messages). */
  history: number;
  /** The new input of this turn. */
  input: number;
  /** Tokens every reply is primed with. */
  priming: number;
}

/**
 * A message sent cut to fit the budget (with a marker where its text stops): a stored one by `seq`,
 * or one of the request's by its index in `input` or `system`.
 */
export interface TruncatedMessage {
  seq?: number;
  input?: number;
  system?: number;
  /** Its tokens whole (an estimate for a text far past the budget). */
  tokens: number;
  /** Its tokens as sent. */
  sentTokens: number;
}

/** What the assembler produced, and what it left out. */
export interface AssembledContext {
  /** The request's `messages`, ready to send. */
  messages: ChatMessage[];
  /** Token count of `messages`. */
  tokens: number;
  /** Stored messages included, by seq. */
  includedSeqs: number[];
  /** Summaries included, by id. */
  includedSummaryIds: number[];
  omitted: {
    /** Stored messages loaded but left out (window, budget, or broken tool pairs). */
    messages: number;
    /** Tokens of those messages. */
    tokens: number;
    /** Summaries left out (for budget or preference; not older rolling summaries the sent one contains). */
    summaries: number;
    /** Messages shortened with a truncation marker because one alone exceeded the budget. */
    truncated: number;
    /** Which messages were shortened (present when `truncated` > 0). */
    truncatedMessages?: TruncatedMessage[];
    /** The stored messages left out, by reason (they add up to `messages`). */
    reasons?: OmittedReasons;
    /** Tokens of the summaries left out. */
    summaryTokens?: number;
    /** Input tool results dropped because no call in the request answers to them. */
    input?: number;
    /** The stored messages left out, by seq, per reason (what `reasons` counts). */
    seqs?: OmittedSeqs;
    /** Stored messages sent shortened with a truncation marker, by seq. */
    truncatedSeqs?: number[];
    /**
     * Older stored messages (by seq) that neither the context nor an included summary covers: the
     * model knows nothing of them. Set by `Memory.buildContext`.
     */
    unsummarized?: number;
  };
  /** Tokens of each part of `messages`; with the reply priming they add up to `tokens`. */
  parts?: ContextPartTokens;
  /** `history-omitted` when older turns were left out without a summary. */
  warnings?: string[];
  /**
   * Older messages brought back by relevance, with their score and the query; those of the owner's
   * other sessions (quoted in a system note) also say which session, its title, when and who.
   */
  recalled?: RecalledMessage[];
  /** The budget the context was assembled within. */
  tokenBudget?: number;
  /** The message window applied (the setting, or the preferences' `maxRecentMessages`). */
  window?: number;
  /** The tokenizer encoding used for counting. */
  encoding?: EncodingName;
  /** The user's memories in the context: which were included and why (with memories on and some stored). */
  memories?: MemoriesInContext;
  /** The state note included (also in `messages`), if any. */
  stateNote?: string;
}

/** What a turn read with its lease: pass it to `buildContext({ preloaded })`. */
export interface PreloadedTurn {
  userId: string;
  /** The owner's session when the lease was granted; null when there was none (or it had expired). */
  session: Session | null;
  /** The newest `last` messages, oldest first. */
  messages: Message[];
  /** How many newest messages were asked for (fewer came back when the session has fewer). */
  last: number;
  summaries: Summary[];
  state: SessionState;
}

/** A message brought back into the context, and why. */
export interface RecalledMessage {
  seq: number;
  /** Cosine similarity to the query (by meaning), or the share of its words the message holds (by words). */
  score: number;
  /** What it was found for: the user's message, or the requested topic. */
  query: string;
  /** Set when the message is from another of the owner's sessions (scope `user`). */
  sessionId?: string;
  /** That session's title (its metadata `title`), if it has one. */
  title?: string;
  /** When the message was stored (ms since the epoch): recalled from another session only. */
  createdAt?: number;
  /** Its role: recalled from another session only. */
  role?: string;
  /** Its hit's place in the search ranking (1 is best): recalled from another session only. */
  rank?: number;
  /** The query's content words it holds: recalled from another session only. */
  matched?: string[];
  /** Set when it was quoted as a neighbour of the hit at this seq, not matched itself. */
  neighbourOf?: number;
  /** The words of the query naming a time it was said in (it was preferred for them). */
  when?: string;
}
