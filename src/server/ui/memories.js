// @ts-check
/**
 * The memories view: what the assistant keeps about the user the page is authenticated as (the key's
 * user, its end user, or the end user an operator key opened), each with its times, where it came
 * from (a link to the messages it was drawn from, "added by hand", or a session that is gone), its
 * earlier texts, and edit and delete; and a download of everything kept about that user (their
 * sessions, memories and preferences as export JSONL). Everything goes through /v1/memories and
 * /v1/users/me.
 */
import { api, openedUser, openUser, request } from "./api.js";
import { confirmAction } from "./dialogs.js";
import { badge, formatTime, h, replace, seqRanges, timeTag } from "./dom.js";

/**
 * @typedef {{ kind: "hand" } | { kind: "session", sessionId: string, seqs: number[], sessionDeleted?: boolean }} Source
 * @typedef {{ text: string, replacedAt: number, reason?: string }} Version
 * @typedef {{ id: string, userId: string, text: string, createdAt: number, updatedAt: number,
 *   source: Source, metadata: Record<string, unknown>, history: Version[] }} UserMemory
 * @typedef {{ id: string, tenant: string, operator: boolean, canOpenUsers: boolean }} Me
 */

const PAGE = 50;

/** @param {[number, number]} range */
const rangeText = ([from, to]) => (from === to ? `#${from}` : `#${from}–#${to}`);

/**
 * Where a memory came from: a link to its messages while the session exists, plain text once it is gone.
 * @param {Source} source
 */
function sourceOf(source) {
  if (source.kind !== "session") return h("span", { class: "source", "data-source": "hand" }, "added by hand");
  const ranges = seqRanges(source.seqs ?? []);
  const short = `${source.sessionId.slice(0, 8)}…`;
  if (source.sessionDeleted) {
    return h(
      "span",
      { class: "source gone", "data-source": "deleted", title: source.sessionId },
      `from session ${short} ${ranges.map(rangeText).join(", ")} `,
      badge("session deleted", "warn"),
    );
  }
  const first = ranges[0]?.[0];
  return h(
    "span",
    { class: "source", "data-source": "session" },
    "from ",
    h(
      "a",
      {
        href: `/ui/s/${source.sessionId}${first === undefined ? "" : `#${first}`}`,
        "data-nav": true,
        "data-source-link": source.sessionId,
        title: source.sessionId,
      },
      `session ${short} ${ranges.map(rangeText).join(", ")}`.trim(),
    ),
  );
}

/** @param {Version[]} history */
function historyOf(history) {
  if (history.length === 0) return null;
  return h(
    "details",
    { class: "history" },
    h("summary", null, `History: ${history.length} earlier text${history.length === 1 ? "" : "s"}`),
    h(
      "ol",
      null,
      // Newest first: the text it replaced last is the one a person looks for.
      [...history]
        .reverse()
        .map((v) =>
          h(
            "li",
            { "data-reason": v.reason ?? "" },
            h("span", { class: "old-text" }, v.text),
            " ",
            h("span", { class: "meta" }, `replaced ${formatTime(v.replacedAt)}${v.reason ? ` (${v.reason})` : ""}`),
          ),
        ),
    ),
  );
}

/**
 * Creates the view.
 * @param {{ root: HTMLElement, fail: (error: unknown) => void, userChanged: () => Promise<void> }} ui
 */
export function createMemoriesView(ui) {
  /** @type {UserMemory[]} */
  let rows = [];
  /** @type {string | null} */
  let cursor = null;
  /** @type {Me | null} */
  let me = null;
  const list = h("ul", { class: "memories" });
  const more = h(
    "button",
    { type: "button", id: "memories-more", onclick: () => page(cursor).catch(ui.fail) },
    "Load more",
  );
  const status = h("p", { class: "meta", id: "memories-status", "aria-live": "polite" });

  /** @param {string | null} after */
  async function page(after) {
    const query = new URLSearchParams({ limit: String(PAGE) });
    if (after) query.set("cursor", after);
    const answer = await api(`/v1/memories?${query}`);
    /** @type {UserMemory[]} */
    const data = answer.data ?? [];
    const seen = new Set(after ? rows.map((m) => m.id) : []);
    rows = after ? [...rows, ...data.filter((m) => !seen.has(m.id))] : data;
    cursor = answer.next_cursor ?? null;
    render();
  }

  /** @param {UserMemory} m */
  function item(m) {
    const text = h("div", { class: "memory-text" }, m.text);
    const buttons = h(
      "div",
      { class: "memory-actions" },
      h("button", { type: "button", "data-action": "edit", onclick: () => edit(m, li) }, "Edit"),
      h(
        "button",
        { type: "button", "data-action": "delete", class: "danger", onclick: () => remove(m).catch(ui.fail) },
        "Delete",
      ),
    );
    const li = h(
      "li",
      { class: "memory", "data-memory": m.id },
      text,
      h(
        "div",
        { class: "meta" },
        "created ",
        timeTag(m.createdAt),
        m.updatedAt !== m.createdAt ? [" · updated ", timeTag(m.updatedAt)] : null,
        " · ",
        sourceOf(m.source),
      ),
      buttons,
      historyOf(m.history ?? []),
    );
    return li;
  }

  /**
   * Turns a memory into a form: its text in a box, Save sends it (the old text goes into its history).
   * @param {UserMemory} m
   * @param {HTMLElement} li
   */
  function edit(m, li) {
    const box = h("textarea", { class: "memory-edit", "aria-label": "Memory text", rows: 3, maxlength: 2000 });
    box.value = m.text;
    const problem = h("p", { class: "error", hidden: true });
    const save = async () => {
      const text = box.value.trim();
      if (text === m.text) return render();
      try {
        const updated = await api(`/v1/memories/${encodeURIComponent(m.id)}`, { method: "PATCH", body: { text } });
        rows = rows.map((r) => (r.id === m.id ? updated : r));
        render();
      } catch (error) {
        problem.hidden = false;
        replace(problem, error instanceof Error ? error.message : String(error));
      }
    };
    const form = h(
      "form",
      { class: "memory-form" },
      box,
      problem,
      h(
        "div",
        { class: "buttons" },
        h("button", { type: "button", "data-action": "cancel", onclick: () => render() }, "Cancel"),
        h("button", { type: "submit", class: "primary", "data-action": "save" }, "Save"),
      ),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      save();
    });
    box.addEventListener("keydown", (event) => {
      if (event.key === "Escape") render();
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) save();
    });
    li.replaceChildren(form);
    box.focus();
  }

  /** @param {UserMemory} m */
  async function remove(m) {
    const ok = await confirmAction({
      title: "Delete this memory?",
      body: `“${m.text.length > 200 ? `${m.text.slice(0, 199)}…` : m.text}” is deleted with its history${m.history?.length ? ` (${m.history.length} earlier text${m.history.length === 1 ? "" : "s"})` : ""}. The assistant no longer knows it. This cannot be undone.`,
      confirm: "Delete memory",
      danger: true,
    });
    if (!ok) return;
    await request(`/v1/memories/${encodeURIComponent(m.id)}`, { method: "DELETE" });
    rows = rows.filter((r) => r.id !== m.id);
    render();
  }

  /**
   * Saves the user's data as a file. A plain link cannot send the key and the opened user's header,
   * so the page fetches it and hands the browser the body as a Blob (held in the page's memory while
   * saved: the server streams it, the browser keeps it).
   */
  async function download() {
    const button = /** @type {HTMLButtonElement | null} */ (document.getElementById("export-data"));
    if (button) button.disabled = true;
    try {
      const response = await request("/v1/users/me/export");
      const name =
        /filename="([^"]+)"/.exec(response.headers.get("content-disposition") ?? "")?.[1] ?? "threadkeep-export.jsonl";
      const url = URL.createObjectURL(await response.blob());
      // Not through h(), which keeps only same-page links: this one is the page's own blob: URL.
      const link = document.createElement("a");
      link.href = url;
      link.download = name;
      link.hidden = true;
      document.body.append(link);
      link.click();
      link.remove();
      // After the click has handed the file over: revoking at once can cancel the save in some browsers.
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    } finally {
      if (button) button.disabled = false;
    }
  }

  /** The form an operator key opens another user with; nothing for any other key. */
  function userPicker() {
    if (!me?.canOpenUsers && !openedUser()) return null;
    const input = h("input", {
      id: "open-user",
      name: "user",
      type: "text",
      autocomplete: "off",
      spellcheck: "false",
      placeholder: "end user id",
      value: openedUser() ?? "",
    });
    const form = h(
      "form",
      { id: "user-picker", class: "controls" },
      h("label", { for: "open-user" }, "Open a user of ", h("code", null, me?.tenant ?? ""), " "),
      input,
      h("button", { type: "submit" }, "Open"),
      openedUser()
        ? h(
            "button",
            { type: "button", class: "link", id: "own-user", onclick: () => switchUser(null) },
            "Back to the key's own user",
          )
        : null,
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      switchUser(input.value.trim() || null);
    });
    return form;
  }

  /** @param {string | null} name */
  async function switchUser(name) {
    openUser(name);
    try {
      await show();
    } finally {
      await ui.userChanged();
    }
  }

  function render() {
    replace(
      ui.root,
      h("h1", null, "Memories"),
      h(
        "p",
        { class: "meta", id: "memories-of" },
        "What the assistant keeps about ",
        h("strong", { id: "memories-user" }, me?.id ?? ""),
        " across sessions. ",
        h(
          "button",
          {
            type: "button",
            class: "link",
            id: "export-data",
            title: "Sessions, memories and preferences, as JSONL (the export format)",
            onclick: () => download().catch(ui.fail),
          },
          "Download all data of this user",
        ),
      ),
      userPicker(),
      status,
      list,
      more,
    );
    replace(list, rows.map(item));
    more.hidden = cursor === null;
    replace(
      status,
      rows.length === 0
        ? "No memories kept about this user."
        : `${rows.length}${cursor ? "+" : ""} memor${rows.length === 1 ? "y" : "ies"}`,
    );
  }

  /** Reads who the page is and the first page of their memories, and shows them. */
  async function show() {
    replace(ui.root, h("p", { class: "meta" }, "Loading…"));
    try {
      me = await api("/v1/users/me");
    } catch (error) {
      // A user the key may not open (no longer an operator key): the picker stays, to go back.
      me = null;
      rows = [];
      cursor = null;
      render();
      throw error;
    }
    await page(null);
  }

  return {
    show,
    /** True while a memory is being edited: a refresh would throw the typing away. */
    get editing() {
      return ui.root.querySelector("form.memory-form") !== null;
    },
  };
}
