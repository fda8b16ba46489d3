import { contentText } from "../messages.js";
import type { Message, Summary } from "../types.js";

/** What a {@link Summarizer} is asked to summarise. */
export interface SummarizeRequest {
  sessionId: string;
  /** The messages to fold in, oldest first. */
  messages: Message[];
  /** The session's latest summary; the new summary replaces it, so it must keep what still matters. */
  previous?: Summary;
  signal?: AbortSignal;
}

/** Turns a range of messages (and the summary so far) into a short summary text. */
export interface Summarizer {
  summarize(request: SummarizeRequest): Promise<string>;
}

/** Options of {@link formatTranscript}. */
export interface TranscriptOptions {
  /** Longer message texts are cut to this many characters. @default 2000 */
  maxCharsPerMessage?: number;
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)} […]`;
}

/** A plain-text transcript of messages for a summarising model: `[seq] role: text`, tool calls spelled out. */
export function formatTranscript(messages: readonly Message[], options: TranscriptOptions = {}): string {
  const max = options.maxCharsPerMessage ?? 2000;
  const lines: string[] = [];
  for (const message of messages) {
    const text = clip(contentText(message.content), max);
    const who = message.name ? `${message.role} (${message.name})` : message.role;
    if (message.role === "tool") {
      lines.push(`[${message.seq}] tool result ${message.tool_call_id}: ${text}`);
      continue;
    }
    if (text) lines.push(`[${message.seq}] ${who}: ${text}`);
    for (const call of message.tool_calls ?? []) {
      lines.push(
        `[${message.seq}] ${who} called ${call.function.name}(${clip(call.function.arguments, max)}) as ${call.id}`,
      );
    }
  }
  return lines.join("\n");
}

/**
 * The summaries worth sending: a rolling summary contains the ones before it, so any summary whose
 * range lies inside a kept one is left out. Oldest first.
 */
export function selectSummaries(summaries: readonly Summary[]): Summary[] {
  const widestFirst = [...summaries].sort((a, b) => b.toSeq - a.toSeq || a.fromSeq - b.fromSeq || b.id - a.id);
  const kept: Summary[] = [];
  for (const summary of widestFirst) {
    if (kept.some((k) => k.fromSeq <= summary.fromSeq && k.toSeq >= summary.toSeq)) continue;
    kept.push(summary);
  }
  return kept.sort((a, b) => a.fromSeq - b.fromSeq);
}

/** The one system message text that carries summaries into a context. */
export function renderSummaries(summaries: readonly Summary[]): string {
  if (summaries.length === 1) {
    const [s] = summaries;
    return `Summary of the earlier conversation (messages ${s.fromSeq}–${s.toSeq}):\n${s.content}`;
  }
  const parts = summaries.map((s) => `Messages ${s.fromSeq}–${s.toSeq}:\n${s.content}`);
  return `Summaries of the earlier conversation:\n\n${parts.join("\n\n")}`;
}
