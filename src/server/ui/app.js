// @ts-check
/**
 * The inspector page: routing (/ui, /ui/s/{id}[/context|/state], #seq for a message, /ui/memories),
 * the views, keyboard, colour scheme, and polling for new turns.
 */
import * as actions from "./actions.js";
import { api, ApiError, forgetKey, hasKey, onKeyNeeded, openedUser, optional, sessionPath } from "./api.js";
import { renderContext, sizeBars } from "./context.js";
import { askForKey, showHelp } from "./dialogs.js";
import { formatTime, h, replace } from "./dom.js";
import { createMemoriesView } from "./memories.js";
import { createSessionList, searchModes } from "./sessions.js";
import { renderState } from "./state.js";
import { renderTranscript, showSeq } from "./transcript.js";

const POLL_MS = 3000;
const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));
const input = (/** @type {string} */ id) => /** @type {HTMLInputElement} */ (document.getElementById(id));

/** @type {{ id: string | null, view: string, session: any, messages: any[], summaries: any[], branches: any[] | null, seen: number }} */
const open = { id: null, view: "transcript", session: null, messages: [], summaries: [], branches: null, seen: 0 };
let keyAsked = false;

onKeyNeeded(async () => {
  const key = await askForKey(keyAsked ? "That key was not accepted." : undefined);
  keyAsked = true;
  $("forget-key").hidden = !key;
  return key;
});

const list = createSessionList({
  list: $("sessions"),
  more: /** @type {HTMLButtonElement} */ ($("more")),
  status: $("list-status"),
  onStore: (name) => replace($("store"), `store: ${name}`),
  selected: () => open.id,
});

const memories = createMemoriesView({
  root: $("memories"),
  fail,
  userChanged: async () => {
    showOpenedUser();
    list.clearSearch();
    await list.refresh();
  },
});

/** Says in the top bar which end user an operator key opened, if any. */
function showOpenedUser() {
  const user = openedUser();
  $("as-user").hidden = !user;
  replace($("as-user"), user ? `as end user ${user}` : "");
}

function route() {
  if (/^\/ui\/memories\/?$/.test(location.pathname)) return { id: null, view: "memories" };
  const match = /^\/ui\/s\/([^/]+)(?:\/(context|state))?\/?$/.exec(location.pathname);
  return { id: match ? decodeURIComponent(match[1]).toLowerCase() : null, view: match?.[2] ?? "transcript" };
}

/** @param {string} path */
function navigate(path) {
  if (path !== location.pathname + location.hash) history.pushState(null, "", path);
  show().catch(fail);
}

/** @param {unknown} error */
function fail(error) {
  const box = $("error");
  box.hidden = false;
  const text =
    error instanceof ApiError && error.code === "session_not_found"
      ? "No such session for this key (it may have been deleted or expired)."
      : error instanceof ApiError && error.code === "operator_only"
        ? "Only an operator key may open another user: go back to the key's own user."
        : error instanceof Error
          ? error.message
          : String(error);
  replace(box, text);
}

async function readAll(/** @type {string} */ id) {
  const messages = [];
  let after = 0;
  for (let i = 0; i < 50; i++) {
    const page = await api(`${sessionPath(id)}/messages?after=${after}&limit=1000`);
    messages.push(...page.data);
    if (!page.hasMore) break;
    after = page.nextAfter;
  }
  return messages;
}

/** Reads the open session again: its record, messages, summaries and branches. */
async function load() {
  if (!open.id) return;
  const id = open.id;
  const [session, messages, summaries, branches] = await Promise.all([
    api(sessionPath(id)),
    readAll(id),
    optional(`${sessionPath(id)}/summaries`),
    optional(`${sessionPath(id)}/branches`),
  ]);
  if (open.id !== id) return;
  Object.assign(open, {
    session,
    messages,
    summaries: summaries?.data ?? [],
    branches: branches?.data ?? null,
    seen: session.lastActivityAt,
  });
}

function header() {
  const s = open.session;
  const firstUser = open.messages.find((m) => m.role === "user");
  const title = firstUser
    ? String(typeof firstUser.content === "string" ? firstUser.content : "(multi-part message)")
    : "(no user message)";
  replace($("session-title"), title.length > 100 ? `${title.slice(0, 99)}…` : title);
  const fork = s.metadata?.forkedFrom;
  replace(
    $("session-meta"),
    h("code", null, s.id),
    ` · ${s.userId} · ${open.messages.length} messages · created ${formatTime(s.createdAt)} · last activity ${formatTime(s.lastActivityAt)}`,
    fork?.sessionId
      ? [
          " · forked from ",
          h(
            "a",
            { href: `/ui/s/${fork.sessionId}#${fork.atSeq}`, "data-nav": true },
            `${String(fork.sessionId).slice(0, 8)}… #${fork.atSeq}`,
          ),
        ]
      : null,
  );
  for (const tab of document.querySelectorAll(".tabs a")) {
    if (!(tab instanceof HTMLAnchorElement)) continue;
    const view = tab.dataset.view ?? "transcript";
    tab.href = `/ui/s/${s.id}${view === "transcript" ? "" : `/${view}`}`;
    if (view === open.view) tab.setAttribute("aria-current", "page");
    else tab.removeAttribute("aria-current");
  }
}

/** @type {{ window?: number, tokenBudget?: number }} */
let preview = {};

async function renderView() {
  const view = $("view");
  const id = /** @type {string} */ (open.id);
  $("context-controls").hidden = open.view !== "context";
  if (open.view === "context") {
    const query = new URLSearchParams();
    if (preview.window !== undefined) query.set("window", String(preview.window));
    if (preview.tokenBudget !== undefined) query.set("tokenBudget", String(preview.tokenBudget));
    const ctx = await api(`${sessionPath(id)}/context?${query}`);
    if (document.activeElement !== input("window")) input("window").value = String(ctx.window ?? "");
    if (document.activeElement !== input("budget")) input("budget").value = String(ctx.tokenBudget ?? "");
    replace(view, renderContext(ctx, { storedSeqs: open.messages.map((m) => m.seq), summaries: open.summaries }));
    sizeBars(view);
  } else if (open.view === "state") {
    replace(view, renderState(await api(`${sessionPath(id)}/state`)));
  } else {
    // Tool calls the user opened stay open when new turns arrive.
    const opened = new Set([...view.querySelectorAll("details.tool[open]")].map((d) => d.getAttribute("data-call")));
    replace(
      view,
      renderTranscript({
        messages: open.messages,
        summaries: open.summaries,
        branches: open.branches,
        onFork: (seq) => actions.forkSession(target(), seq, after).catch(fail),
        onLoadBranch: async (b) =>
          (await api(`${sessionPath(id)}/branches/${encodeURIComponent(b.id)}`)).messages ?? [],
        onSwitchBranch: (b) => actions.switchBranch(target(), b, after).catch(fail),
      }),
    );
    for (const d of view.querySelectorAll("details.tool"))
      if (opened.has(d.getAttribute("data-call"))) d.setAttribute("open", "");
    showSeq(view, location.hash);
  }
}

const target = () => ({ id: /** @type {string} */ (open.id), messages: open.messages });
const after = {
  navigate,
  removed: (/** @type {string} */ id) => list.remove(id),
  reload: async () => {
    await load();
    header();
    await renderView();
    await list.refresh();
  },
};

/** Shows what the URL names. */
async function show() {
  const next = route();
  const changed = next.id !== open.id;
  open.id = next.id;
  open.view = next.view;
  $("error").hidden = true;
  const inMemories = open.view === "memories";
  $("empty").hidden = open.id !== null || inMemories;
  $("session").hidden = open.id === null;
  $("memories").hidden = !inMemories;
  if (inMemories) $("memories-link").setAttribute("aria-current", "page");
  else $("memories-link").removeAttribute("aria-current");
  list.render();
  if (inMemories) return memories.show();
  if (!open.id) return;
  if (changed) {
    preview = {};
    replace($("view"), h("p", { class: "meta" }, "Loading…"));
    await load();
  }
  header();
  await renderView();
}

/** Polls for new turns: the first page of sessions, and the open session's last activity. */
async function poll() {
  if (document.hidden || document.querySelector("dialog[open]")) return;
  if (!list.searching) await list.refresh();
  if (open.id) {
    const session = await api(sessionPath(open.id));
    if (session.lastActivityAt !== open.seen) await after.reload();
  }
  replace($("live"), `live · ${formatTime(Date.now())}`);
}

function bindKeys() {
  document.addEventListener("keydown", (event) => {
    const el = /** @type {HTMLElement} */ (event.target);
    if (event.key === "Escape" && el.id === "q") {
      input("q").value = "";
      list.clearSearch();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || document.querySelector("dialog[open]")) return;
    if (["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName)) return;
    const views = /** @type {Record<string, string>} */ ({ t: "", c: "/context", s: "/state" });
    if (event.key === "/") {
      event.preventDefault();
      input("q").focus();
    } else if (event.key === "?") showHelp();
    else if (event.key === "r") (open.view === "memories" && !memories.editing ? memories.show() : poll()).catch(fail);
    else if (event.key === "m") navigate("/ui/memories");
    else if (event.key === "j" || event.key === "k") {
      const next = list.neighbour(event.key === "j" ? 1 : -1);
      if (next) {
        navigate(next.pathname);
        next.focus();
      }
    } else if (event.key in views && open.id) navigate(`/ui/s/${open.id}${views[event.key]}`);
  });
}

function bindUi() {
  document.addEventListener("click", (event) => {
    const link = /** @type {HTMLElement} */ (event.target).closest("a");
    if (!link || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) return;
    if (link.hasAttribute("data-nav") || link.hasAttribute("data-seq-link")) {
      event.preventDefault();
      const href = link.getAttribute("href") ?? "/ui";
      navigate(href.startsWith("#") ? `/ui/s/${open.id}${href}` : href);
    }
  });
  window.addEventListener("popstate", () => show().catch(fail));
  window.addEventListener("hashchange", () => showSeq($("view"), location.hash));
  $("more").addEventListener("click", () => list.more().catch(fail));
  $("search").addEventListener("submit", (event) => {
    event.preventDefault();
    const q = input("q").value.trim();
    const mode = /** @type {HTMLSelectElement} */ ($("mode")).value;
    (q ? list.search(q, mode) : Promise.resolve(list.clearSearch())).catch(fail);
  });
  const act = (/** @type {string} */ name) => {
    if (!open.id) return;
    const run = {
      delete: () => actions.deleteSession(target(), after),
      undo: () => actions.undoTurn(target(), after),
      fork: () => actions.forkSession(target(), undefined, after),
      export: () => actions.exportSession(target()),
    }[name];
    run?.().catch(fail);
  };
  for (const button of document.querySelectorAll(".actions button")) {
    button.addEventListener("click", () => act(button.getAttribute("data-action") ?? ""));
  }
  const runPreview = () => {
    const window = input("window").valueAsNumber;
    const budget = input("budget").valueAsNumber;
    preview = {
      window: Number.isFinite(window) ? window : undefined,
      tokenBudget: Number.isFinite(budget) ? budget : undefined,
    };
    renderView().catch(fail);
  };
  $("preview").addEventListener("click", runPreview);
  for (const id of ["window", "budget"]) $(id).addEventListener("keydown", (e) => e.key === "Enter" && runPreview());
  $("reset").addEventListener("click", () => {
    preview = {};
    input("window").value = input("budget").value = "";
    renderView().catch(fail);
  });
  $("forget-key").hidden = !hasKey();
  showOpenedUser();
  $("forget-key").addEventListener("click", () => {
    forgetKey();
    location.reload();
  });
  $("help-button").addEventListener("click", showHelp);
  const themes = ["auto", "light", "dark"];
  const applyTheme = (/** @type {string} */ theme) => {
    if (theme === "auto") delete document.documentElement.dataset.theme;
    else document.documentElement.dataset.theme = theme;
    replace($("theme"), `Theme: ${theme}`);
  };
  applyTheme(localStorage.getItem("threadkeep.theme") ?? "auto");
  $("theme").addEventListener("click", () => {
    const next = themes[(themes.indexOf(localStorage.getItem("threadkeep.theme") ?? "auto") + 1) % themes.length];
    localStorage.setItem("threadkeep.theme", next);
    applyTheme(next);
  });
}

async function start() {
  bindUi();
  bindKeys();
  const modes = await searchModes();
  replace(
    $("mode"),
    modes.map((m) => h("option", { value: m }, m)),
  );
  // A list the key may not read (a user it may not open) still leaves the view to say why and go back.
  await list.refresh().catch(fail);
  await show();
  replace($("live"), `live · ${formatTime(Date.now())}`);
  setInterval(() => poll().catch(fail), POLL_MS);
}

start().catch(fail);
