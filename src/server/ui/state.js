// @ts-check
/**
 * The state view: what "that task" means now (the last intent and recent references), a pending
 * confirmation and when it expires, the stored context preferences, and the application's own keys.
 */
import { badge, formatTime, h, relativeTime } from "./dom.js";

/** @param {unknown} value */
const json = (value) => JSON.stringify(value, null, 2);

/**
 * @param {string} title
 * @param {...(Node | string | null)} body
 */
function card(title, ...body) {
  return h("section", { class: "card" }, h("h3", null, title), ...body);
}

/**
 * @param {[string, unknown][]} rows
 */
function table(rows) {
  return h(
    "table",
    { class: "kv" },
    h(
      "tbody",
      null,
      rows.map(([key, value]) =>
        h("tr", null, h("th", { scope: "row" }, key), h("td", null, value instanceof Node ? value : String(value))),
      ),
    ),
  );
}

/**
 * Renders a session's state.
 * @param {{ version: number, data: Record<string, any> }} state
 * @param {number} [now]
 */
export function renderState(state, now = Date.now()) {
  const { conversation, preferences, ...rest } = state.data ?? {};
  const intent = conversation?.lastIntent;
  /** @type {any[]} */
  const references = Array.isArray(conversation?.references) ? conversation.references : [];
  const pending = conversation?.pending;
  const expired = pending && pending.expiresAt <= now;
  return h(
    "div",
    { class: "state" },
    h("p", { class: "meta" }, `State version ${state.version}`),
    card(
      "Last intent",
      intent
        ? table([
            ["name", intent.name],
            ["at", formatTime(intent.at)],
          ])
        : h("p", { class: "empty" }, "None recorded."),
    ),
    card(
      "Recent references",
      references.length === 0
        ? h("p", { class: "empty" }, "None: “that task” has nothing to point at.")
        : h(
            "ol",
            { class: "refs" },
            references.map((r, i) =>
              h(
                "li",
                null,
                h("strong", null, `${r.type} ${r.id}`),
                r.label ? ` — ${r.label}` : "",
                " ",
                h("span", { class: "meta" }, relativeTime(r.at, now)),
                i === 0 ? badge(`“that ${r.type}”`, "ok") : null,
              ),
            ),
          ),
    ),
    card(
      "Pending confirmation",
      pending
        ? h(
            "div",
            { class: expired ? "pending expired" : "pending" },
            table([
              ["action", pending.action],
              ["arguments", h("pre", null, json(pending.args))],
              ["prompt", pending.prompt ?? "—"],
              ["asked", formatTime(pending.createdAt)],
              [
                "expires",
                h(
                  "span",
                  null,
                  `${formatTime(pending.expiresAt)} `,
                  badge(
                    expired ? "expired" : `expires ${relativeTime(pending.expiresAt, now)}`,
                    expired ? "warn" : "ok",
                  ),
                ),
              ],
            ]),
          )
        : h("p", { class: "empty" }, "None waiting for a yes or no."),
    ),
    card(
      "Context preferences",
      preferences
        ? h("pre", null, json(preferences))
        : h("p", { class: "empty" }, "None stored: the next turn uses the server's window and budget."),
    ),
    Object.keys(rest).length > 0 ? card("Application state", h("pre", null, json(rest))) : null,
  );
}
