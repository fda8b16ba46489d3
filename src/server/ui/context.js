// @ts-check
/**
 * The context view: what the next turn sends, part by part, with a token bar against the budget,
 * and which stored messages it leaves out and why. Window and budget can be changed to preview
 * another shape; the preview reads the context endpoint and stores nothing.
 */
import { badge, contentText, h, seqRanges } from "./dom.js";

/** The parts of a context, in the order they are sent. */
const PARTS = /** @type {const} */ ([
  ["system", "System"],
  ["summary", "Summary"],
  ["stateNote", "State note"],
  ["recalled", "Recalled"],
  ["history", "Window"],
  ["input", "New input"],
  ["priming", "Reply priming"],
]);

/** The system note of messages recalled from the user's other sessions (core/context/recall-user.ts). */
const OTHERS_OPEN = "<recalled-messages>";

/** @param {any} message */
function isOthersNote(message) {
  return message?.role === "system" && typeof message.content === "string" && message.content.includes(OTHERS_OPEN);
}

/**
 * Says where the note's messages come from: each session's title (or id) and date.
 * @param {any} recalled
 */
function othersLabel(recalled) {
  const from = (Array.isArray(recalled) ? recalled : []).filter((/** @type {any} */ r) => r.sessionId);
  /** @type {Map<string, string>} */
  const sources = new Map();
  for (const r of from) {
    const date = typeof r.createdAt === "number" ? new Date(r.createdAt).toISOString().slice(0, 10) : "";
    sources.set(r.sessionId, `${r.title ?? r.sessionId.slice(0, 8)}${date ? ` (${date})` : ""}`);
  }
  return `recalled from other sessions (${from.length} message${from.length === 1 ? "" : "s"}): ${[...sources.values()].join(", ")}`;
}

/**
 * Why each message quoted from another session was chosen: its place in the search ranking, the share
 * of the question's words it holds and which, the day it was said (and the time the question named,
 * when that preferred it), or the hit it was quoted beside.
 * @param {any} recalled
 * @returns {string[]}
 */
export function othersReasons(recalled) {
  return (Array.isArray(recalled) ? recalled : [])
    .filter((/** @type {any} */ r) => r.sessionId)
    .map((/** @type {any} */ r) => {
      const date = typeof r.createdAt === "number" ? new Date(r.createdAt).toISOString().slice(0, 10) : "undated";
      const source = `${r.title ?? r.sessionId.slice(0, 8)} #${r.seq} ${r.role ?? ""}`.trim();
      const why =
        typeof r.neighbourOf === "number"
          ? `beside hit #${r.neighbourOf}`
          : `rank ${r.rank ?? "?"}, score ${typeof r.score === "number" ? r.score.toFixed(2) : "?"}`;
      const matched = Array.isArray(r.matched) && r.matched.length > 0 ? `, matched: ${r.matched.join(", ")}` : "";
      const when = r.when ? `, said in the time asked about (“${r.when}”)` : "";
      return `${source} · ${date} · ${why}${matched}${when}`;
    });
}

/**
 * Labels each sent message with its part: system first, then the summary, the state note, recalled
 * messages and the window (by seq).
 * @param {any} ctx
 * @returns {{ part: string, label: string, message: any, reasons?: string[] }[]}
 */
function labelled(ctx) {
  /** @type {any[]} */
  const messages = ctx.messages ?? [];
  /** @type {number[]} */
  const seqs = ctx.includedSeqs ?? [];
  /** @type {Map<number, { score?: number, query?: string }>} */
  const recalled = new Map((Array.isArray(ctx.recalled) ? ctx.recalled : []).map((/** @type {any} */ r) => [r.seq, r]));
  const leading = messages.length - seqs.length;
  const summaryAt = (ctx.includedSummaryIds ?? []).length > 0 ? leading - (ctx.stateNote ? 2 : 1) : -1;
  const noteAt = ctx.stateNote ? leading - 1 : -1;
  return messages.map((message, i) => {
    if (i === summaryAt)
      return {
        part: "summary",
        label: `summaries ${(ctx.includedSummaryIds ?? []).map((/** @type {number} */ id) => `#${id}`).join(", ")}`,
        message,
      };
    if (i === noteAt) return { part: "stateNote", label: "state note", message };
    if (i < leading && isOthersNote(message))
      return { part: "recalled", label: othersLabel(ctx.recalled), message, reasons: othersReasons(ctx.recalled) };
    if (i < leading) return { part: "system", label: message.role, message };
    const seq = seqs[i - leading];
    const why = recalled.get(seq);
    if (!why) return { part: "history", label: `#${seq} ${message.role}`, message, seq };
    const score = typeof why.score === "number" ? ` ${why.score.toFixed(2)}` : "";
    return {
      part: "recalled",
      label: `#${seq} ${message.role} · recalled${score}${why.query ? ` for “${why.query}”` : ""}`,
      message,
      seq,
    };
  });
}

/**
 * @param {Record<string, number>} parts
 * @param {number} budget
 * @param {number} total
 */
function tokenBars(parts, budget, total) {
  const scale = Math.max(budget, total, 1);
  const pct = (/** @type {number} */ n) => `${Math.min(100, (n / scale) * 100).toFixed(2)}%`;
  // The parts every context can have are always listed (an empty one says so); the others when used.
  const present = PARTS.filter(([key]) => (parts[key] ?? 0) > 0 || (key !== "input" && key in parts));
  return h(
    "section",
    { class: "tokens", "aria-label": "Tokens per part against the budget" },
    h(
      "div",
      { class: "stack", role: "img", "aria-label": `${total} of ${budget} tokens` },
      present.map(([key, label]) =>
        h("span", {
          class: `seg part-${key}`,
          title: `${label}: ${parts[key] ?? 0} tokens`,
          "data-width": pct(parts[key] ?? 0),
        }),
      ),
    ),
    h(
      "p",
      { class: "total" },
      `${total.toLocaleString()} of ${budget.toLocaleString()} tokens (${Math.round((total / Math.max(budget, 1)) * 100)}%)`,
    ),
    h(
      "table",
      { class: "parts" },
      h(
        "tbody",
        null,
        present.map(([key, label]) =>
          h(
            "tr",
            { "data-part": key },
            h("th", { scope: "row" }, h("span", { class: `swatch part-${key}` }), label),
            h("td", { class: "bar" }, h("span", { class: `fill part-${key}`, "data-width": pct(parts[key] ?? 0) })),
            h("td", { class: "num" }, (parts[key] ?? 0).toLocaleString()),
          ),
        ),
      ),
    ),
  );
}

/**
 * Sizes the bars. Widths are set through CSSOM, which the page's Content-Security-Policy allows
 * (inline style attributes it does not).
 * @param {HTMLElement} root
 */
export function sizeBars(root) {
  for (const el of root.querySelectorAll("[data-width]")) {
    if (el instanceof HTMLElement) el.style.width = el.dataset.width ?? "0";
  }
}

/**
 * What was left out, by reason, with links to the transcript.
 * @param {any} ctx
 * @param {number[]} storedSeqs every stored seq of the session
 * @param {any[]} summaries
 */
function leftOut(ctx, storedSeqs, summaries) {
  const seqs = ctx.omitted?.seqs ?? { window: [], budget: [], toolPairs: [] };
  const included = new Set(ctx.includedSeqs ?? []);
  const accounted = new Set([...seqs.window, ...seqs.budget, ...seqs.toolPairs]);
  // Messages older than what the window loaded were never read for this context.
  const older = storedSeqs.filter((s) => !included.has(s) && !accounted.has(s));
  const includedSummaries = summaries.filter((s) => (ctx.includedSummaryIds ?? []).includes(s.id));
  const covered = (/** @type {number} */ seq) => includedSummaries.find((s) => seq >= s.fromSeq && seq <= s.toSeq);
  const outside = [...older, ...seqs.window];
  const rows = [
    ["window", "older than the message window", outside.filter((s) => !covered(s))],
    ["summarised", "older than the window; the summary sent stands for them", outside.filter((s) => covered(s))],
    ["budget", "inside the window but past the token budget", seqs.budget],
    ["toolPairs", "orphaned tool result, or a tool call without all its results", seqs.toolPairs],
    ["truncated", "sent, but cut to fit the budget", ctx.omitted?.truncatedSeqs ?? []],
  ].filter(([, , list]) => list.length > 0);
  const unsummarized = Number(ctx.omitted?.unsummarized ?? 0);
  const warning =
    unsummarized > 0
      ? h(
          "p",
          { class: "warning", "data-warning": "history-omitted" },
          `${unsummarized} older message${unsummarized === 1 ? " is" : "s are"} covered neither by the context nor by a summary: the model knows nothing of ${unsummarized === 1 ? "it" : "them"}.`,
        )
      : null;
  const summaryNote =
    ctx.omitted?.summaries > 0
      ? `${ctx.omitted.summaries} summar${ctx.omitted.summaries === 1 ? "y" : "ies"} left out for the budget`
      : null;
  return h(
    "section",
    { class: "left-out", "aria-label": "Left out" },
    h("h3", null, "Left out"),
    warning,
    rows.length === 0 && !summaryNote
      ? h("p", { class: "empty" }, "Nothing: every stored message is in the context.")
      : null,
    h(
      "ul",
      null,
      rows.map(([reason, text, list]) =>
        h(
          "li",
          { "data-reason": reason },
          badge(String(list.length)),
          " ",
          h("strong", null, text),
          ": ",
          seqRanges(list).flatMap(([from, to], i) => [
            i > 0 ? ", " : null,
            h("a", { href: `#${from}`, "data-seq-link": from }, from === to ? `#${from}` : `#${from}–#${to}`),
          ]),
        ),
      ),
      summaryNote ? h("li", { "data-reason": "summaries" }, summaryNote) : null,
    ),
  );
}

/**
 * Renders a context.
 * @param {any} ctx the context endpoint's answer
 * @param {{ storedSeqs: number[], summaries: any[] }} session
 */
export function renderContext(ctx, session) {
  const budget = Number(ctx.tokenBudget ?? 0);
  const parts = { ...(ctx.parts ?? {}) };
  const items = labelled(ctx);
  if (!ctx.parts) parts.history = ctx.tokens;
  if (items.some((i) => i.part === "recalled") && parts.recalled === undefined) parts.recalled = 0;
  return h(
    "div",
    { class: "context" },
    tokenBars(parts, budget, Number(ctx.tokens ?? 0)),
    leftOut(ctx, session.storedSeqs, session.summaries),
    h("h3", null, `Sent to the model (${items.length} message${items.length === 1 ? "" : "s"})`),
    h(
      "ol",
      { class: "sent" },
      items.map((item) =>
        h(
          "li",
          { class: `sent-msg part-${item.part}`, "data-part": item.part },
          h("div", { class: "label" }, h("span", { class: `swatch part-${item.part}` }), item.label),
          item.reasons?.length
            ? h(
                "ul",
                { class: "recall-reasons", "aria-label": "Why each was recalled" },
                item.reasons.map((r) => h("li", null, r)),
              )
            : null,
          h(
            "div",
            { class: "content" },
            contentText(item.message.content) ||
              (item.message.tool_calls
                ? `tool calls: ${item.message.tool_calls.map((/** @type {any} */ c) => c?.function?.name).join(", ")}`
                : ""),
          ),
        ),
      ),
    ),
  );
}
