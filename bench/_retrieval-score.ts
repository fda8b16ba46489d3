/**
 * How the retrieval benchmark scores a search: the turns a result shows, in rank order (a hit's
 * neighbouring turns count too, so k counts turns, not hits), and per question whether an answer turn
 * is among the first 5 turns, how many of its answer turns are among the first 10, and whether the
 * search returned anything at all.
 */
import { formatMicros, percentile } from "./_harness.js";

/** The turns a question is scored at. */
export const AT_FIRST = 5;
/** The depth at which the share of answer turns found is counted (and the `limit` asked for). */
export const AT_DEPTH = 10;

/** A turn's key in the scoring: its session and seq. */
export const turnKey = (sessionId: string, seq: number): string => `${sessionId}#${seq}`;

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null;

/** The seq and (when given) session of a neighbour entry: a message, `{ seq }`, or `{ message: { seq } }`. */
function neighbourRef(entry: unknown, sessionId: string): { sessionId: string; seq: number } | undefined {
  if (!isRecord(entry)) return undefined;
  const inner = isRecord(entry.message) ? entry.message : entry;
  const seq = inner.seq ?? entry.seq;
  if (typeof seq !== "number") return undefined;
  const session = entry.sessionId ?? inner.sessionId;
  return { sessionId: typeof session === "string" ? session : sessionId, seq };
}

/** The neighbouring turns a hit carries, under `neighbours`, `neighbors` or `context`: a list, or `{ before, after }`. */
function neighboursOf(hit: Record<string, unknown>): unknown[] {
  for (const field of ["neighbours", "neighbors", "context"]) {
    const value = hit[field];
    if (Array.isArray(value)) return value;
    if (isRecord(value)) return [value.before, value.after].flatMap((part) => (Array.isArray(part) ? part : []));
  }
  return [];
}

/**
 * The turns a search result shows, in rank order, each once: a hit's own turn together with the
 * neighbouring turns it carries (in conversation order, so a hit with one turn before and one after
 * shows three turns), then the next hit's. A turn an earlier hit already showed is not counted again.
 */
export function turnsOfHits(hits: readonly unknown[]): string[] {
  const seen = new Set<string>();
  const turns: string[] = [];
  for (const hit of hits) {
    if (!isRecord(hit) || typeof hit.sessionId !== "string" || typeof hit.seq !== "number") continue;
    const own = { sessionId: hit.sessionId, seq: hit.seq };
    const group = [own, ...neighboursOf(hit).flatMap((e) => neighbourRef(e, own.sessionId) ?? [])];
    // Conversation order within the hit; a neighbour from another session keeps its listed place.
    group.sort((a, b) => (a.sessionId === b.sessionId ? a.seq - b.seq : 0));
    for (const ref of group) {
      const key = turnKey(ref.sessionId, ref.seq);
      if (seen.has(key)) continue;
      seen.add(key);
      turns.push(key);
    }
  }
  return turns;
}

/** One question's score. */
export interface QuestionScore {
  /** An answer turn is among the first {@link AT_FIRST} turns. */
  atFirst: boolean;
  /** Answer turns among the first {@link AT_DEPTH} turns. */
  found: number;
  /** Answer turns the question has. */
  evidence: number;
  /** The search returned no turn at all. */
  empty: boolean;
}

/** Scores the turns a search showed (in order, from {@link turnsOfHits}) against a question's answer turns. */
export function scoreQuestion(turns: readonly string[], evidence: ReadonlySet<string>): QuestionScore {
  return {
    atFirst: turns.slice(0, AT_FIRST).some((t) => evidence.has(t)),
    found: turns.slice(0, AT_DEPTH).filter((t) => evidence.has(t)).length,
    evidence: evidence.size,
    empty: turns.length === 0,
  };
}

/** The figures of one search variant over every question. */
export interface TallySummary {
  questions: number;
  /** Share of questions with an answer turn among the first 5 turns. */
  atFirst: number;
  /**
   * Share of a question's answer turns among its first 10 turns, averaged over the questions (each
   * question weighs the same, however many answer turns it has).
   */
  found: number;
  /** Share of questions whose search returned nothing. */
  empty: number;
  /** Questions the search refused, by `HTTP status code` (e.g. `400 not_supported`). */
  errors: Map<string, number>;
  /** Per-query latency, µs. */
  p50: number;
  p90: number;
}

/** Adds up the questions of one search variant (a mode, or the BM25 floor). */
export class Tally {
  #questions = 0;
  #atFirst = 0;
  /** Sum over questions of found / evidence. */
  #found = 0;
  #empty = 0;
  readonly #errors = new Map<string, number>();
  readonly #latencies: number[] = [];

  /** Records one question's score and how long its search took (µs). */
  add(score: QuestionScore, micros: number): void {
    this.#questions++;
    if (score.atFirst) this.#atFirst++;
    if (score.empty) this.#empty++;
    if (score.evidence > 0) this.#found += score.found / score.evidence;
    this.#latencies.push(micros);
  }

  /** Records a question whose search failed (it scores nothing: no hit, nothing found). */
  addError(reason: string, evidence: number, micros: number): void {
    this.add({ atFirst: false, found: 0, evidence, empty: true }, micros);
    this.#errors.set(reason, (this.#errors.get(reason) ?? 0) + 1);
  }

  summary(): TallySummary {
    const share = (n: number, of: number) => (of > 0 ? n / of : Number.NaN);
    const sorted = [...this.#latencies].sort((a, b) => a - b);
    return {
      questions: this.#questions,
      atFirst: share(this.#atFirst, this.#questions),
      found: share(this.#found, this.#questions),
      empty: share(this.#empty, this.#questions),
      errors: new Map(this.#errors),
      p50: percentile(sorted, 50),
      p90: percentile(sorted, 90),
    };
  }
}

/** A share for a table cell: `55.2%`. */
export const formatShare = (share: number): string => (Number.isFinite(share) ? `${(share * 100).toFixed(1)}%` : "–");

/** True when the search refused every question (its shares mean nothing). */
export const refusedAll = (summary: TallySummary): boolean =>
  summary.questions > 0 && [...summary.errors.values()].reduce((a, b) => a + b, 0) === summary.questions;

/** The table row of a summary: questions, at 5, found in 10, no hit, errors, p50, p90. */
export function summaryCells(summary: TallySummary): string[] {
  const errors = [...summary.errors].map(([reason, n]) => `${reason} × ${n}`).join(", ");
  const figures = refusedAll(summary)
    ? ["", "", ""]
    : [formatShare(summary.atFirst), formatShare(summary.found), formatShare(summary.empty)];
  return [String(summary.questions), ...figures, errors || "–", formatMicros(summary.p50), formatMicros(summary.p90)];
}
