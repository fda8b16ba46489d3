// @ts-check
/**
 * The transcript: stored messages by seq, tool calls folded together with their results, summaries
 * where they stand in the history, incomplete and truncated messages marked, and the session's
 * branches at the seq where they split.
 */
import { badge, contentText, formatTime, h } from "./dom.js";

/**
 * @typedef {{ seq: number, role: string, content: unknown, createdAt: number, tool_calls?: any[],
 *   tool_call_id?: string, name?: string, incomplete?: boolean, metadata?: Record<string, any> }} Message
 * @typedef {{ id: number, fromSeq: number, toSeq: number, content: string, createdAt: number }} Summary
 * @typedef {{ id: number | string, atSeq: number, parentId?: number | null, reason?: string,
 *   messages?: Message[], messageCount?: number, createdAt?: number }} Branch
 */

/** The marker the context engine leaves in a message it cut to fit. */
const CUT_MARKER = /\[… truncated by threadkeep[^\]]*\]\s*$/;

/** @param {Message} message */
function isTruncated(message) {
  const meta = message.metadata ?? {};
  return meta.truncated === true || meta.inputTruncated === true || CUT_MARKER.test(contentText(message.content));
}

/** @param {string} args */
function prettyJson(args) {
  try {
    return JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    return args;
  }
}

/**
 * Which tool results answer which call: a result folds into the call it answers when that call came
 * before it; a result nothing asked for stays on its own, marked.
 * @param {Message[]} messages
 */
function foldToolResults(messages) {
  /** @type {Map<string, Message>} */
  const calls = new Map();
  /** @type {Map<string, Message[]>} */
  const results = new Map();
  /** @type {Set<number>} */
  const folded = new Set();
  for (const m of messages) {
    if (m.role === "assistant" && Array.isArray(m.tool_calls))
      for (const call of m.tool_calls) calls.set(String(call?.id), m);
    if (m.role === "tool" && m.tool_call_id !== undefined && calls.has(m.tool_call_id)) {
      results.set(m.tool_call_id, [...(results.get(m.tool_call_id) ?? []), m]);
      folded.add(m.seq);
    }
  }
  return { results, folded };
}

/**
 * @param {any} call
 * @param {Message[]} answers
 */
function toolCall(call, answers) {
  const name = String(call?.function?.name ?? call?.type ?? "tool");
  const args = String(call?.function?.arguments ?? "");
  const first = answers[0];
  return h(
    "details",
    { class: "tool", "data-call": String(call?.id ?? "") },
    h(
      "summary",
      null,
      h("span", { class: "tool-name" }, `⚙ ${name}`),
      " ",
      h("code", { class: "tool-args" }, args.length > 80 ? `${args.slice(0, 79)}…` : args),
      " ",
      first ? badge(`result #${first.seq}`, "ok") : badge("no result", "warn"),
    ),
    h(
      "div",
      { class: "tool-part" },
      h("div", { class: "label" }, `call ${call?.id ?? ""}`),
      h("pre", null, prettyJson(args)),
    ),
    answers.map((answer) =>
      h(
        "div",
        { class: "tool-part result", "data-seq": answer.seq },
        h("div", { class: "label" }, `result #${answer.seq} · ${formatTime(answer.createdAt)}`),
        h("pre", null, contentText(answer.content)),
      ),
    ),
  );
}

/**
 * @param {Message} m
 * @param {Map<string, Message[]>} results
 * @param {((seq: number) => void) | null} onFork null for messages that are not on the main line
 */
function message(m, results, onFork) {
  const meta = m.metadata ?? {};
  const text = contentText(m.content);
  const orphan = m.role === "tool";
  return h(
    "article",
    { class: `msg role-${m.role.replace(/[^a-z]/g, "")}`, "data-seq": m.seq, tabindex: "-1" },
    h(
      "header",
      null,
      h("a", { href: `#${m.seq}`, class: "seq", title: "Link to this message" }, `#${m.seq}`),
      h("span", { class: "role" }, m.role),
      m.name ? h("span", { class: "name" }, m.name) : null,
      h("time", { datetime: new Date(m.createdAt).toISOString() }, formatTime(m.createdAt)),
      typeof meta.model === "string" ? h("span", { class: "model" }, meta.model) : null,
      m.incomplete ? badge("incomplete", "warn") : null,
      isTruncated(m) ? badge("truncated", "warn") : null,
      orphan ? badge("tool result without its call", "warn") : null,
      onFork
        ? h(
            "button",
            {
              type: "button",
              class: "link fork",
              onclick: () => onFork(m.seq),
              title: `Fork a new session from messages #1–#${m.seq}`,
            },
            "fork here",
          )
        : null,
    ),
    text ? h("div", { class: "content" }, text) : null,
    (m.tool_calls ?? []).map((call) => toolCall(call, results.get(String(call?.id)) ?? [])),
  );
}

/** @param {Summary} s */
function summaryBlock(s) {
  return h(
    "aside",
    { class: "summary", "data-summary": s.id },
    h("div", { class: "label" }, `Summary #${s.id} of messages #${s.fromSeq}–#${s.toSeq} · ${formatTime(s.createdAt)}`),
    h("div", { class: "content" }, s.content),
  );
}

/**
 * A branch where it split: opening it reads its messages; "switch to it" makes it the main line.
 * @param {Branch} b
 * @param {{ onLoad: (b: Branch) => Promise<Message[]>, onSwitch: (b: Branch) => void }} actions
 */
function branchBar(b, actions) {
  const count = b.messageCount ?? b.messages?.length;
  const body = h("div", { class: "branch-messages" });
  const details = h(
    "details",
    { class: "branch", "data-branch": String(b.id) },
    h(
      "summary",
      null,
      h("span", null, `⎇ branch ${b.id} after #${b.atSeq}`),
      " ",
      b.reason ? badge(b.reason) : null,
      b.parentId ? h("span", { class: "meta" }, ` inside branch ${b.parentId}`) : null,
      count !== undefined ? h("span", { class: "meta" }, ` · ${count} message${count === 1 ? "" : "s"}`) : null,
      b.createdAt ? h("span", { class: "meta" }, ` · ${formatTime(b.createdAt)}`) : null,
      " ",
      b.parentId
        ? null
        : h(
            "button",
            {
              type: "button",
              class: "link",
              "data-action": "switch-branch",
              onclick: (/** @type {Event} */ e) => (e.preventDefault(), actions.onSwitch(b)),
            },
            "switch to it",
          ),
    ),
    body,
  );
  details.addEventListener("toggle", () => {
    if (!details.open || body.childElementCount > 0) return;
    actions.onLoad(b).then(
      (messages) => {
        const { results, folded } = foldToolResults(messages);
        body.replaceChildren(...messages.filter((m) => !folded.has(m.seq)).map((m) => message(m, results, null)));
      },
      (error) => body.replaceChildren(h("p", { class: "error" }, String(error?.message ?? error))),
    );
  });
  return details;
}

/**
 * Renders a transcript.
 * @param {{ messages: Message[], summaries: Summary[], branches: Branch[] | null,
 *   onFork: (seq: number) => void, onLoadBranch: (b: Branch) => Promise<Message[]>, onSwitchBranch: (b: Branch) => void }} data
 */
export function renderTranscript(data) {
  const { results, folded } = foldToolResults(data.messages);
  const summaries = [...data.summaries].sort((a, b) => a.toSeq - b.toSeq);
  const branches = [...(data.branches ?? [])].sort((a, b) => a.atSeq - b.atSeq);
  /** @type {Node[]} */
  const out = [];
  const branchActions = { onLoad: data.onLoadBranch, onSwitch: data.onSwitchBranch };
  const flushBefore = (/** @type {number} */ seq) => {
    while (summaries.length > 0 && summaries[0].toSeq < seq)
      out.push(summaryBlock(/** @type {Summary} */ (summaries.shift())));
    while (branches.length > 0 && branches[0].atSeq < seq)
      out.push(branchBar(/** @type {Branch} */ (branches.shift()), branchActions));
  };
  for (const m of data.messages) {
    flushBefore(m.seq);
    if (!folded.has(m.seq)) out.push(message(m, results, data.onFork));
  }
  flushBefore(Number.POSITIVE_INFINITY);
  if (data.messages.length === 0) out.push(h("p", { class: "empty" }, "No messages stored in this session."));
  return h("div", { class: "transcript" }, out);
}

/**
 * Brings the message of a `#seq` link into view; a folded tool result opens its call.
 * @param {HTMLElement} root
 * @param {string} hash
 */
export function showSeq(root, hash) {
  const match = /^#(\d+)$/.exec(hash);
  for (const old of root.querySelectorAll(".target")) old.classList.remove("target");
  if (!match) return;
  const target = root.querySelector(`[data-seq="${match[1]}"]`);
  if (!(target instanceof HTMLElement)) return;
  const details = target.closest("details");
  if (details) details.open = true;
  target.classList.add("target");
  target.scrollIntoView({ block: "center" });
  const article = target.closest("article");
  if (article instanceof HTMLElement) article.focus({ preventScroll: true });
}
