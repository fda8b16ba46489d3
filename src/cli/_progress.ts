/**
 * Progress of a long copy: a redrawn bar on a terminal, a plain line every few seconds otherwise
 * (so a log file shows the run without carriage-return noise).
 */
import type { Output } from "./_format.js";

/** What has been done so far. */
export interface ProgressCounts {
  sessions: number;
  messages: number;
}

/** Options of {@link createProgress}. */
export interface ProgressOptions {
  output: Output;
  /** Sessions to do; the bar and the ETA are measured against it. */
  total: number;
  /** Printed first, e.g. `migrate`. */
  label: string;
  /** Terminal bar: redraw at most this often; plain lines: one per this many ms. @default 100 on a terminal, 2000 otherwise */
  intervalMs?: number;
  /** @default Date.now */
  now?: () => number;
}

/** A progress display. */
export interface Progress {
  /** Records the counts and redraws when it is time. */
  update(done: ProgressCounts): void;
  /** Draws the final state and ends the line. */
  finish(): void;
}

/** "850ms", "42s", "3m05s", "1h02m", "7d", "2d03h". */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return "?";
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
  const hours = Math.floor((s % 86_400) / 3600);
  return `${Math.floor(s / 86_400)}d${hours > 0 ? `${String(hours).padStart(2, "0")}h` : ""}`;
}

const BAR_WIDTH = 24;

/** Creates a progress display for `total` sessions. */
export function createProgress(options: ProgressOptions): Progress {
  const now = options.now ?? Date.now;
  const tty = options.output.isTTY === true;
  const interval = options.intervalMs ?? (tty ? 100 : 2000);
  const start = now();
  let last = 0;
  let done: ProgressCounts = { sessions: 0, messages: 0 };

  const describe = () => {
    const elapsed = Math.max(1, now() - start);
    const rate = (done.sessions * 1000) / elapsed;
    const messageRate = (done.messages * 1000) / elapsed;
    const left = options.total - done.sessions;
    const eta = left <= 0 ? "0s" : rate > 0 ? formatDuration((left / rate) * 1000) : "?";
    const pct = options.total > 0 ? Math.floor((done.sessions / options.total) * 100) : 100;
    return { rate, messageRate, eta, pct };
  };

  const draw = (final: boolean) => {
    const { rate, messageRate, eta, pct } = describe();
    const counts = `${done.sessions}/${options.total} sessions · ${done.messages} messages · ${Math.round(rate)} sessions/s, ${Math.round(messageRate)} messages/s`;
    if (tty) {
      const filled = Math.round((BAR_WIDTH * pct) / 100);
      const bar = `[${"#".repeat(filled)}${"-".repeat(BAR_WIDTH - filled)}]`;
      options.output.write(
        `\r\u001b[2K${options.label} ${bar} ${String(pct).padStart(3)}% ${counts} · ETA ${eta}${final ? "\n" : ""}`,
      );
    } else {
      options.output.write(`${options.label}: ${counts} (${pct}%), ETA ${eta}\n`);
    }
  };

  return {
    update(counts) {
      done = { ...counts };
      const t = now();
      if (t - last >= interval) {
        last = t;
        draw(false);
      }
    },
    finish() {
      draw(true);
    },
  };
}
