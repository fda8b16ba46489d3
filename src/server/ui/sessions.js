// @ts-check
/**
 * The sidebar: the caller's sessions, newest activity first, a page at a time (the API's cursor
 * paging, so the 10,000th session costs what the first does), and search across them.
 */
import { api, ApiError, optional } from "./api.js";
import { h, replace, timeTag } from "./dom.js";

/**
 * @typedef {{ id: string, userId: string, createdAt: number, lastActivityAt: number,
 *   metadata: Record<string, unknown>, title: string | null, messageCount: number }} SessionRow
 */

const PAGE = 50;

/**
 * @param {{ list: HTMLElement, more: HTMLButtonElement, status: HTMLElement,
 *   onStore: (name: string) => void, selected: () => string | null }} ui
 */
export function createSessionList(ui) {
  /** @type {SessionRow[]} */
  let rows = [];
  /** @type {string | null} */
  let cursor = null;
  /** @type {{ query: string, hits: any[], note: string } | null} */
  let search = null;
  let store = "";

  /** @param {string | null} after */
  async function page(after) {
    const query = new URLSearchParams({ limit: String(PAGE), overview: "true" });
    if (after) query.set("cursor", after);
    const answer = await api(`/v1/sessions?${query}`);
    if (answer.store) {
      store = answer.store;
      ui.onStore(store);
    }
    return /** @type {{ data: SessionRow[], nextCursor: string | null }} */ (answer);
  }

  /** @param {SessionRow} row */
  function item(row) {
    const current = row.id === ui.selected();
    return h(
      "li",
      null,
      h(
        "a",
        {
          href: `/ui/s/${row.id}`,
          class: current ? "session current" : "session",
          "aria-current": current ? "page" : null,
          "data-session": row.id,
          "data-nav": true,
        },
        h("span", { class: "title" }, row.title ?? h("em", null, "(no user message)")),
        h(
          "span",
          { class: "meta" },
          `${row.messageCount} message${row.messageCount === 1 ? "" : "s"} · `,
          timeTag(row.lastActivityAt),
          store ? ` · ${store}` : null,
        ),
        h("span", { class: "id" }, row.id),
      ),
    );
  }

  /** @param {any} hit */
  function hitItem(hit) {
    return h(
      "li",
      null,
      h(
        "a",
        { href: `/ui/s/${hit.sessionId}#${hit.seq}`, class: "session hit", "data-nav": true },
        h("span", { class: "title" }, hit.snippet ?? ""),
        h("span", { class: "meta" }, `#${hit.seq} ${hit.message?.role ?? ""} · `, timeTag(hit.message?.createdAt ?? 0)),
        h("span", { class: "id" }, hit.sessionId),
      ),
    );
  }

  function render() {
    if (search) {
      replace(ui.list, search.hits.map(hitItem));
      ui.more.hidden = true;
      replace(
        ui.status,
        `${search.hits.length} match${search.hits.length === 1 ? "" : "es"} for “${search.query}”`,
        search.note ? h("span", { class: "note" }, ` ${search.note}`) : null,
      );
      return;
    }
    replace(ui.list, rows.map(item));
    ui.more.hidden = cursor === null;
    replace(ui.status, rows.length === 0 ? "No sessions yet." : `${rows.length}${cursor ? "+" : ""} sessions`);
  }

  return {
    /** Loads the first page again, keeping further pages already shown (live updates). */
    async refresh() {
      const first = await page(null);
      const seen = new Set(first.data.map((r) => r.id));
      const extra = rows.slice(PAGE).filter((r) => !seen.has(r.id));
      rows = [...first.data, ...extra];
      if (extra.length === 0) cursor = first.nextCursor;
      render();
    },
    async more() {
      if (!cursor) return;
      const next = await page(cursor);
      const seen = new Set(rows.map((r) => r.id));
      rows.push(...next.data.filter((r) => !seen.has(r.id)));
      cursor = next.nextCursor;
      render();
    },
    /**
     * Searches the caller's sessions; without the cross-session route (an older server), the open session.
     * @param {string} query
     * @param {string} mode
     */
    async search(query, mode) {
      const params = new URLSearchParams({ q: query, limit: "50", mode });
      let note = "";
      let answer = await optional(`/v1/search?${params}`);
      if (!answer) {
        const id = ui.selected();
        note = id ? "(this session only: the server has no cross-session search)" : "(open a session to search it)";
        answer = id ? await api(`/v1/sessions/${id}/search?${params}`) : { data: [] };
      }
      search = { query, hits: answer.data ?? [], note };
      render();
    },
    clearSearch() {
      search = null;
      render();
    },
    get searching() {
      return search !== null;
    },
    render,
    /** The session after or before the current one, for j/k. @param {1 | -1} step */
    neighbour(step) {
      const links = [...ui.list.querySelectorAll("a.session")];
      const index = links.findIndex((a) => a.getAttribute("aria-current") === "page" || a === document.activeElement);
      const next = links[Math.max(0, Math.min(links.length - 1, index + step))];
      return next instanceof HTMLAnchorElement ? next : null;
    },
    /** @param {string} id */
    remove(id) {
      rows = rows.filter((r) => r.id !== id);
      render();
    },
  };
}

/**
 * The search modes this server offers, from its OpenAPI document (substring and fulltext by default).
 * @returns {Promise<string[]>}
 */
export async function searchModes() {
  try {
    const doc = await (await fetch("/openapi.json")).json();
    /** @type {any[]} */
    const params =
      doc.paths?.["/v1/search"]?.get?.parameters ?? doc.paths?.["/v1/sessions/{id}/search"]?.get?.parameters ?? [];
    const mode = params.find((p) => p?.name === "mode");
    const modes = mode?.schema?.enum;
    if (Array.isArray(modes) && modes.every((m) => typeof m === "string")) return modes;
  } catch (error) {
    if (error instanceof ApiError) throw error;
  }
  return ["substring", "fulltext"];
}
