// @ts-check
/**
 * Modal questions: confirming an action, and asking for the API key. Native <dialog> elements, so
 * focus stays inside, Escape cancels, and the page behind cannot be clicked.
 */
import { h, replace } from "./dom.js";

/**
 * Asks the user to confirm an action. Cancel has the focus, so Enter alone never destroys anything.
 * @param {{ title: string, body: string, confirm: string, danger?: boolean }} question
 * @returns {Promise<boolean>}
 */
export function confirmAction(question) {
  const dialog = /** @type {HTMLDialogElement} */ (document.getElementById("confirm"));
  const cancel = h("button", { type: "button", value: "cancel", "data-action": "cancel" }, "Cancel");
  const ok = h(
    "button",
    { type: "button", value: "ok", class: question.danger ? "danger" : "primary", "data-action": "confirm" },
    question.confirm,
  );
  replace(
    dialog,
    h("h2", { id: "confirm-title" }, question.title),
    h("p", null, question.body),
    h("div", { class: "buttons" }, cancel, ok),
  );
  dialog.setAttribute("aria-labelledby", "confirm-title");
  return new Promise((resolve) => {
    cancel.addEventListener("click", () => dialog.close("cancel"));
    ok.addEventListener("click", () => dialog.close("ok"));
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
    cancel.focus();
  });
}

/**
 * Asks for the threadkeep API key; the server needs one.
 * @param {string} [problem] why the last one did not work
 * @returns {Promise<string | null>}
 */
export function askForKey(problem) {
  const dialog = /** @type {HTMLDialogElement} */ (document.getElementById("key"));
  const input = h("input", {
    type: "password",
    id: "key-input",
    name: "key",
    autocomplete: "off",
    required: true,
    spellcheck: "false",
  });
  const form = h(
    "form",
    { method: "dialog" },
    h("h2", null, "API key"),
    h(
      "p",
      null,
      "This server needs a threadkeep API key. It is kept in this tab only (sessionStorage) and sent with each request.",
    ),
    problem ? h("p", { class: "error" }, problem) : null,
    h("label", { for: "key-input" }, "Key"),
    input,
    h("div", { class: "buttons" }, h("button", { type: "submit", class: "primary", value: "ok" }, "Use key")),
  );
  replace(dialog, form);
  return new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => resolve(dialog.returnValue === "ok" && input.value.trim() ? input.value.trim() : null),
      { once: true },
    );
    dialog.returnValue = "";
    dialog.showModal();
    input.focus();
  });
}

/** Shows the keyboard shortcuts. */
export function showHelp() {
  const dialog = /** @type {HTMLDialogElement} */ (document.getElementById("help"));
  const keys = [
    ["/", "search"],
    ["j / k", "next / previous session"],
    ["t, c, s", "transcript, context, state"],
    ["m", "memories"],
    ["r", "refresh now"],
    ["?", "this help"],
    ["Esc", "close a dialog, leave search"],
  ];
  replace(
    dialog,
    h("h2", null, "Keyboard"),
    h(
      "table",
      { class: "kv" },
      h(
        "tbody",
        null,
        keys.map(([k, v]) => h("tr", null, h("th", null, h("kbd", null, k)), h("td", null, v))),
      ),
    ),
    h("form", { method: "dialog", class: "buttons" }, h("button", { class: "primary" }, "Close")),
  );
  dialog.showModal();
}
