import { contentText } from "../messages.js";
import type { ChatMessage } from "../types.js";
import type { TokenCounter } from "./tokens.js";

/** A message with its token count. */
export interface Counted {
  message: ChatMessage;
  tokens: number;
}

/** What a message shortened to fit says where its text stops. */
export function truncationMarker(leftOut: number): string {
  return `\n[… truncated by threadkeep: ${leftOut} tokens left out]`;
}

function hasText(message: ChatMessage): boolean {
  return typeof message.content === "string" ? message.content.length > 0 : contentText(message.content).length > 0;
}

/**
 * The message cut to at most `maxTokens` tokens, its text ending with a marker; null when the
 * message has no text to cut or cannot get that small (tool calls and overhead are never cut).
 * Non-text parts of a multi-part content are left out of the cut message.
 */
export function truncateMessage(message: ChatMessage, maxTokens: number, counter: TokenCounter): Counted | null {
  if (!hasText(message)) return null;
  const text = contentText(message.content);
  const textTokens = counter.text(text);
  const overhead = counter.message({ ...message, content: "" });
  let keep = maxTokens - overhead - counter.text(truncationMarker(textTokens));
  // Re-encoding a cut text can differ by a token or two at the seam; shrink until it fits.
  for (let attempt = 0; attempt < 4; attempt++) {
    const head = counter.head(text, Math.max(0, keep));
    const content = head + truncationMarker(head === text ? 0 : Math.max(0, textTokens - keep));
    // Counted from the chunks the whole text already counted: a huge cut costs only its seam.
    counter.textSharing(content, text, head.length);
    const cut = { ...message, content };
    const tokens = counter.message(cut);
    if (tokens <= maxTokens) return { message: cut, tokens };
    if (keep <= 0) return null;
    keep -= tokens - maxTokens;
  }
  return null;
}

/** The message with its text replaced by the marker alone: as small as cutting gets. */
function markerOnly(message: ChatMessage, counter: TokenCounter): Counted | null {
  if (!hasText(message)) return null;
  const cut = {
    ...message,
    content: truncationMarker(counter.text(contentText(message.content))).trimStart(),
  };
  return { message: cut, tokens: counter.message(cut) };
}

/**
 * Shortens the largest messages until the list fits `available` tokens (or nothing more can be cut).
 * Changes `entries` in place. @returns the indexes of the messages shortened.
 */
export function fitByTruncating(entries: Counted[], available: number, counter: TokenCounter): number[] {
  let total = entries.reduce((sum, e) => sum + e.tokens, 0);
  if (total <= available) return [];
  // Largest first, each cut once: one sort, not a scan per cut (a body may carry many thousand messages).
  const order = entries.map((_, i) => i).sort((a, b) => entries[b].tokens - entries[a].tokens || a - b);
  const shortened: number[] = [];
  for (const i of order) {
    if (total <= available) break;
    const entry = entries[i];
    const target = Math.max(0, entry.tokens - (total - available));
    // Cut to the target when possible, else as far as it goes, and let the next largest give the rest.
    const best = truncateMessage(entry.message, target, counter) ?? markerOnly(entry.message, counter);
    if (!best || best.tokens >= entry.tokens) continue;
    total += best.tokens - entry.tokens;
    entries[i] = best;
    shortened.push(i);
  }
  return shortened.sort((a, b) => a - b);
}
