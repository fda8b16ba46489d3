/**
 * What of a session's past the model gets to know: with summaries on, the window reaches back to the
 * latest summary (so nothing between the summary and the window goes missing while the next summary
 * is due), and what is left out with no summary covering it is counted, so it can be reported.
 */
import type { Message, Summary } from "../types.js";
import { latestSummary } from "./compaction.js";
import type { AssembledContext } from "./types.js";

/** The warning a context (and the server's X-Threadkeep-Warning header) carries when older turns were left out without a summary. */
export const HISTORY_OMITTED = "history-omitted";

/**
 * The window to assemble with when summaries are on: every loaded message after the latest summary,
 * at least `window` and at most `window + reach` of them.
 */
export function windowAfterSummary(
  history: readonly Message[],
  summaries: readonly Summary[],
  window: number,
  reach: number,
): number {
  const coveredTo = latestSummary(summaries)?.toSeq ?? 0;
  let unsummarized = 0;
  for (const m of history) if (m.seq > coveredTo) unsummarized++;
  return Math.min(window + reach, Math.max(window, unsummarized));
}

/**
 * Stored messages older than the window that neither the context nor an included summary covers: the
 * model knows nothing of them. Counted: those loaded but left out for the window, and those never
 * loaded (before the oldest loaded seq: older than the window, or dropped by the cap) after the
 * newest included summary. Messages left out for the budget are reported as such, not here.
 */
export function unsummarizedGap(
  context: AssembledContext,
  summaries: readonly Summary[],
  firstLoadedSeq: number | undefined,
  startSeq = 1,
): number {
  if (firstLoadedSeq === undefined) return 0;
  const included = new Set(context.includedSummaryIds);
  let coveredTo = 0;
  for (const s of summaries) if (included.has(s.id)) coveredTo = Math.max(coveredTo, s.toSeq);
  const leftOut = (context.omitted.seqs?.window ?? []).filter((seq) => seq > coveredTo).length;
  // Seqs before `startSeq` are not this line's history (a branch that starts later), so not missing.
  return leftOut + Math.max(0, firstLoadedSeq - Math.max(coveredTo + 1, startSeq));
}

/** Marks a context whose older turns were left out without a summary (`omitted.unsummarized`, `warnings`). */
export function noteCoverage(
  context: AssembledContext,
  summaries: readonly Summary[],
  firstLoadedSeq: number | undefined,
  startSeq = 1,
): AssembledContext {
  const gap = unsummarizedGap(context, summaries, firstLoadedSeq, startSeq);
  context.omitted.unsummarized = gap;
  if (gap > 0) context.warnings = [...(context.warnings ?? []), HISTORY_OMITTED];
  return context;
}
