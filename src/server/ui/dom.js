// @ts-check
/**
 * Building the page without markup: every string becomes a text node, so message content (which is
 * untrusted) shows as the characters it is and can never become an element, a script or an image.
 */

/** @typedef {string | number | boolean | null | undefined | EventListener} AttrValue */
/** @typedef {Node | string | number | null | undefined | false} Child */

/**
 * Creates an element. `on…` attributes take listeners; `href` takes only the page's own paths.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, AttrValue> | null} [attrs]
 * @param {...(Child | Child[])} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (typeof value === "function") el.addEventListener(key.replace(/^on/, ""), value);
    else if (key === "href" && !/^[/#]/.test(String(value))) continue;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

/**
 * Appends children (strings as text).
 * @param {Element} parent
 * @param {(Child | Child[])[]} children
 */
export function append(parent, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(typeof child === "object" ? child : String(child));
  }
}

/**
 * Replaces an element's children.
 * @param {Element} parent
 * @param {...(Child | Child[])} children
 */
export function replace(parent, ...children) {
  parent.replaceChildren();
  append(parent, children);
}

const timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

/** @param {number} ms */
export function formatTime(ms) {
  return timeFormat.format(new Date(ms));
}

/**
 * "3 min ago", "in 2 min".
 * @param {number} ms
 * @param {number} [now]
 */
export function relativeTime(ms, now = Date.now()) {
  const seconds = Math.round((ms - now) / 1000);
  const abs = Math.abs(seconds);
  const [value, unit] =
    abs < 60
      ? [abs, "s"]
      : abs < 3600
        ? [Math.round(abs / 60), "min"]
        : abs < 86400
          ? [Math.round(abs / 3600), "h"]
          : [Math.round(abs / 86400), "d"];
  if (abs < 5) return "just now";
  return seconds < 0 ? `${value} ${unit} ago` : `in ${value} ${unit}`;
}

/**
 * A time element showing relative time, with the exact time on hover.
 * @param {number} ms
 */
export function timeTag(ms) {
  return h("time", { datetime: new Date(ms).toISOString(), title: formatTime(ms) }, relativeTime(ms));
}

/**
 * The text of message content: a string, or the text of its parts; other parts are named, never loaded.
 * @param {unknown} content
 * @returns {string}
 */
export function contentText(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part) =>
      part && typeof part === "object" && typeof part.text === "string"
        ? part.text
        : `[${part && typeof part === "object" && typeof part.type === "string" ? part.type : "unknown"} part]`,
    )
    .join("\n");
}

/**
 * Groups sorted seqs into ranges: [1,2,3,7] → "#1–#3, #7".
 * @param {number[]} seqs
 * @returns {[number, number][]}
 */
export function seqRanges(seqs) {
  /** @type {[number, number][]} */
  const ranges = [];
  for (const seq of [...seqs].sort((a, b) => a - b)) {
    const last = ranges.at(-1);
    if (last && seq === last[1] + 1) last[1] = seq;
    else ranges.push([seq, seq]);
  }
  return ranges;
}

/**
 * A badge.
 * @param {string} text
 * @param {string} [kind]
 */
export function badge(text, kind = "") {
  return h("span", { class: `badge ${kind}`.trim() }, text);
}
