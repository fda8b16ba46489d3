import { ThreadkeepError } from "../errors.js";
import { toChatMessage } from "../messages.js";
import { readConversation, renderConversationNote } from "../state/conversation.js";
import type { ChatMessage, Message, Summary } from "../types.js";
import { renderSummaries, selectSummaries } from "./summarize.js";
import { encodingForModel, REPLY_PRIMING_TOKENS, TokenCounter } from "./tokens.js";
import { groupToolUnits, sendable, type ToolUnit, unitCompletedByInput, validInput } from "./tool-units.js";
import { type Counted, fitByTruncating, truncateMessage } from "./truncate.js";
import type {
  AssembledContext,
  ContextInput,
  ContextPreferences,
  OmittedReasons,
  OmittedSeqs,
  TruncatedMessage,
} from "./types.js";

/** The newest window message is cut to fit, rather than left out, only if at least this many tokens remain. */
const MIN_CUT_TOKENS = 64;

function checkLimits(input: ContextInput): void {
  if (!Number.isSafeInteger(input.window) || input.window < 0) {
    throw new ThreadkeepError("invalid_request", `window must be a whole number >= 0, got ${input.window}`, {
      details: { field: "window" },
    });
  }
  if (!Number.isSafeInteger(input.tokenBudget) || input.tokenBudget <= 0) {
    throw new ThreadkeepError(
      "invalid_request",
      `tokenBudget must be a positive whole number, got ${input.tokenBudget}`,
      {
        details: { field: "tokenBudget" },
      },
    );
  }
}

/** History by ascending seq without duplicates (callers merge window, focus and pinned reads). */
function inSeqOrder(history: readonly Message[]): Message[] {
  for (let i = 1; i < history.length; i++) {
    if (history[i].seq <= history[i - 1].seq) {
      return [...new Map(history.map((m) => [m.seq, m])).values()].sort((a, b) => a.seq - b.seq);
    }
  }
  return history as Message[];
}

/** Where each message of `subsequence` (in order, the same objects) stands in `list`. */
function positionsIn(list: readonly ChatMessage[], subsequence: readonly ChatMessage[]): number[] {
  const positions: number[] = [];
  let at = 0;
  for (const message of subsequence) {
    while (list[at] !== message) at++;
    positions.push(at++);
  }
  return positions;
}

/** Units holding a pinned seq or a seq of the focus range, newest first. */
function requestedUnits(units: readonly ToolUnit[], preferences: ContextPreferences): number[] {
  const pins = new Set(preferences.pinnedSeqs ?? []);
  const range = preferences.focusRange;
  if (pins.size === 0 && !range) return [];
  const wanted: number[] = [];
  for (let i = units.length - 1; i >= 0; i--) {
    const hit = units[i].messages.some(
      (m) => pins.has(m.seq) || (range && m.seq >= range.fromSeq && m.seq <= range.toSeq),
    );
    if (hit) wanted.push(i);
  }
  return wanted;
}

/**
 * Builds the messages of the next request within the message window and the token budget:
 * system messages, one system message of summaries, the state note, history (requested, then the
 * recent window, newest first, until window or budget runs out) and the new input.
 *
 * Never produces an invalid request: a tool call and its results enter or leave together, stray
 * tool results are left out, system messages and input are never dropped (only cut with a marker
 * when they alone exceed the budget), and what was left out is reported.
 */
export function assembleContext(input: ContextInput): AssembledContext {
  checkLimits(input);
  const counter = new TokenCounter(input.encoding ?? encodingForModel(input.model), { limit: input.tokenBudget });
  const preferences = input.preferences ?? {};
  const window = preferences.maxRecentMessages ?? input.window;
  const history = inSeqOrder(input.history);
  const units = groupToolUnits(history);
  const unitMessages = units.map((u) => sendable(u, toChatMessage));
  const unitTokens = unitMessages.map((messages) => messages.reduce((sum, m) => sum + counter.message(m), 0));
  const selected = new Map<number, ChatMessage[] | null>();
  let truncated = 0;
  const truncatedSeqs: number[] = [];

  // System messages, the input, and the stored tool call whose results come with the input must all go.
  // threadkeep's own fields (metadata, incomplete) never reach the model, the new turn's included.
  const requestInput = input.input.map(toChatMessage);
  const carried = unitCompletedByInput(units, requestInput);
  if (carried) selected.set(units.length - 1, null);
  const { kept, dropped: droppedInput } = validInput(requestInput, carried);
  const count = (message: ChatMessage): Counted => ({ message, tokens: counter.message(message) });
  const mandatory = [...input.system.map(toChatMessage), ...kept].map(count);
  const before = mandatory.map((e) => e.tokens);
  const carriedTokens = carried ? unitTokens[units.length - 1] : 0;
  const available = input.tokenBudget - REPLY_PRIMING_TOKENS - carriedTokens;
  const keptAt = positionsIn(requestInput, kept);
  const cut: TruncatedMessage[] = fitByTruncating(mandatory, available, counter).map((i) => ({
    ...(i < input.system.length ? { system: i } : { input: keptAt[i - input.system.length] }),
    tokens: before[i],
    sentTokens: mandatory[i].tokens,
  }));
  truncated += cut.length;
  const system = mandatory.slice(0, input.system.length);
  const newInput = mandatory.slice(input.system.length);
  let remaining = available - mandatory.reduce((sum, e) => sum + e.tokens, 0);
  const take = (counted: Counted | null): Counted | null => {
    if (!counted || counted.tokens > remaining) return null;
    remaining -= counted.tokens;
    return counted;
  };

  const now = input.now ?? Date.now();
  const noteText =
    input.stateNote !== undefined
      ? input.stateNote
      : input.state
        ? renderConversationNote(readConversation(input.state.data), now)
        : null;
  const note = take(noteText ? count({ role: "system", content: noteText }) : null);

  for (const i of requestedUnits(units, preferences)) {
    if (!selected.has(i) && units[i].valid && unitTokens[i] <= remaining) {
      selected.set(i, null);
      remaining -= unitTokens[i];
    }
  }

  // Summaries of what the window does not show; the oldest summaries go first when space is short.
  const windowStartSeq =
    history.length === 0 || window === 0 ? Number.POSITIVE_INFINITY : history[Math.max(0, history.length - window)].seq;
  // Summaries the sent one contains, or whose messages the window shows, are not missing if left out.
  const relevant = selectSummaries(input.summaries).filter((s) => s.fromSeq < windowStartSeq);
  let summaries: Summary[] = [];
  let summaryMessage: Counted | null = null;
  if (preferences.includeSummaries !== false) {
    summaries = relevant;
    while (summaries.length > 0 && !summaryMessage) {
      summaryMessage = take(count({ role: "system", content: renderSummaries(summaries) }));
      if (!summaryMessage) summaries = summaries.slice(1);
    }
  }

  // The recent window, newest first, stopping at the first unit that does not fit (no gaps).
  const inWindow = new Set<number>();
  let slots = window;
  let budgetSpent = false;
  let fromWindow = 0;
  for (let i = units.length - 1; i >= 0 && units[i].messages.length <= slots; i--) {
    const unit = units[i];
    slots -= unit.messages.length;
    inWindow.add(i);
    if (selected.has(i) || !unit.valid || budgetSpent) continue;
    if (unitTokens[i] <= remaining) {
      selected.set(i, null);
      remaining -= unitTokens[i];
      fromWindow++;
      continue;
    }
    budgetSpent = true;
    // A newest message larger than what is left is cut rather than lost.
    if (fromWindow === 0 && !carried && unit.messages.length === 1 && remaining >= MIN_CUT_TOKENS) {
      const shortened = truncateMessage(toChatMessage(unit.messages[0]), remaining, counter);
      if (shortened) {
        selected.set(i, [shortened.message]);
        remaining -= shortened.tokens;
        truncated++;
        truncatedSeqs.push(unit.messages[0].seq);
        cut.push({ seq: unit.messages[0].seq, tokens: unitTokens[i], sentTokens: shortened.tokens });
      }
    }
  }

  const reasons: OmittedReasons = { window: 0, budget: 0, toolPairs: 0 };
  const omittedSeqs: OmittedSeqs = { window: [], budget: [], toolPairs: [] };
  let omittedMessages = 0;
  let omittedTokens = 0;
  units.forEach((unit, i) => {
    if (selected.has(i)) return;
    omittedMessages += unit.messages.length;
    omittedTokens += unitTokens[i];
    const reason = !unit.valid ? "toolPairs" : inWindow.has(i) ? "budget" : "window";
    reasons[reason] += unit.messages.length;
    for (const m of unit.messages) omittedSeqs[reason].push(m.seq);
  });

  const messages: ChatMessage[] = system.map((e) => e.message);
  if (summaryMessage) messages.push(summaryMessage.message);
  if (note) messages.push(note.message);
  const includedSeqs: number[] = [];
  for (const i of [...selected.keys()].sort((a, b) => a - b)) {
    messages.push(...(selected.get(i) ?? unitMessages[i]));
    for (const m of units[i].messages) includedSeqs.push(m.seq);
  }
  for (const e of newInput) messages.push(e.message);

  const includedSummaryIds = summaryMessage ? summaries.map((s) => s.id) : [];
  const tokens = input.tokenBudget - remaining;
  const sum = (entries: readonly Counted[]) => entries.reduce((total, e) => total + e.tokens, 0);
  const parts = {
    system: sum(system),
    summary: summaryMessage?.tokens ?? 0,
    stateNote: note?.tokens ?? 0,
    history: 0,
    input: sum(newInput),
    priming: REPLY_PRIMING_TOKENS,
  };
  // History is what the rest leaves of the total: cut messages and a carried tool call included.
  parts.history = tokens - parts.system - parts.summary - parts.stateNote - parts.input - parts.priming;
  const leftOutSummaries = relevant.filter((s) => !includedSummaryIds.includes(s.id));
  return {
    messages,
    tokens,
    includedSeqs: includedSeqs.sort((a, b) => a - b),
    includedSummaryIds,
    omitted: {
      messages: omittedMessages,
      tokens: omittedTokens,
      summaries: leftOutSummaries.length,
      truncated,
      ...(cut.length > 0 ? { truncatedMessages: cut } : {}),
      reasons,
      summaryTokens: leftOutSummaries.reduce((sum, s) => sum + counter.text(s.content), 0),
      input: droppedInput,
      seqs: omittedSeqs,
      truncatedSeqs,
    },
    parts,
    tokenBudget: input.tokenBudget,
    window,
    encoding: counter.encoding,
    ...(note ? { stateNote: noteText as string } : {}),
  };
}
