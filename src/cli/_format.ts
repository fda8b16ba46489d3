/**
 * Terminal output shared by the CLI commands: colour only on a terminal, aligned tables there and
 * tab-separated rows for pipes, short relative times and one-line excerpts.
 */
import { contentText } from "../core/messages.js";
import type { ChatMessage } from "../core/types.js";

/** A writable the CLI prints to (`process.stdout`, or a PassThrough in tests). */
export type Output = NodeJS.WritableStream & { isTTY?: boolean; columns?: number };

/** ANSI styles, or identity functions when colour is off. */
export interface Paint {
  enabled: boolean;
  dim(text: string): string;
  bold(text: string): string;
  cyan(text: string): string;
  green(text: string): string;
  yellow(text: string): string;
  red(text: string): string;
}

/** Colour for `output`: only on a terminal, and never with `NO_COLOR` set (no-color.org). */
export function paintFor(output: Output, env: NodeJS.ProcessEnv = process.env): Paint {
  const enabled = output.isTTY === true && !env.NO_COLOR && env.TERM !== "dumb";
  const style = (open: number, close: number) => (text: string) =>
    enabled ? `\u001b[${open}m${text}\u001b[${close}m` : text;
  return {
    enabled,
    dim: style(2, 22),
    bold: style(1, 22),
    cyan: style(36, 39),
    green: style(32, 39),
    yellow: style(33, 39),
    red: style(31, 39),
  };
}

/** The first line of a message's text, cut to `max` characters. */
export function oneLine(content: ChatMessage["content"] | string, max = 60): string {
  const text = (typeof content === "string" ? content : contentText(content)).trim();
  const first = text.split(/\r?\n/)[0] ?? "";
  const more = first.length > max || text.includes("\n");
  return more ? `${first.slice(0, Math.max(0, max - 1))}…` : first;
}

/** "12s ago", "5m ago", "3h ago", "2d ago"; an ISO date past 30 days. */
export function ago(at: number, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - at) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ago`;
  if (s < 30 * 86_400) return `${Math.floor(s / 86_400)}d ago`;
  return new Date(at).toISOString().slice(0, 10);
}

/**
 * Rows under a header: padded columns when `aligned` (a terminal), tab-separated otherwise (for
 * `cut`/`awk`). Cells are plain text; the header is bold when colour is on.
 */
export function table(header: string[], rows: string[][], aligned: boolean, paint?: Paint): string {
  if (!aligned) return `${[header, ...rows].map((r) => r.join("\t")).join("\n")}\n`;
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i])))
      .join("  ")
      .trimEnd();
  const head = line(header);
  return `${[paint ? paint.bold(head) : head, ...rows.map(line)].join("\n")}\n`;
}

/** Writes text, waiting when the stream asks to (large exports to a pipe). */
export function write(output: NodeJS.WritableStream, text: string): Promise<void> | void {
  if (output.write(text)) return;
  return new Promise((resolve) => output.once("drain", resolve));
}
