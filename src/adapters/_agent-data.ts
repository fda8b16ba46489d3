/**
 * Agent items as data threadkeep can store and compare exactly, checked the way the Agents SDK's own
 * session checks history transactions: plain objects and dense arrays of JSON values and `Uint8Array`
 * (a tool's binary output), read once, nothing else. A value that would not come back as it went in
 * (a `Date`, a cycle, a `bigint`, a symbol, a sparse array, a hidden or computed property) is refused
 * before anything is written, so it is never silently changed by a store.
 */
import { createHash } from "node:crypto";
import { type AgentInputItem, protocol } from "@openai/agents";
import { ThreadkeepError } from "../core/errors.js";
import { sortedData } from "../transfer/canonical.js";

/** The one-key object a `Uint8Array` is stored as (JSON has no bytes). */
const BYTES_KEY = "$threadkeep_bytes";

const fail = (): never => {
  throw new Error("unsupported");
};

/** A plain copy of `value` (own enumerable data properties only), or a throw for anything else. */
function snapshot(value: unknown, ancestors: Set<object>): unknown {
  if (value === null || value === undefined || typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number") return Number.isFinite(value) ? value : fail();
  if (typeof value !== "object") return fail();
  // A copy, as a plain Uint8Array (of a Buffer too; a shared buffer may change after the call).
  if (value instanceof Uint8Array) return new Uint8Array(value);
  if (ancestors.has(value)) return fail();
  ancestors.add(value);
  try {
    const keys = Reflect.ownKeys(value);
    if (Array.isArray(value)) {
      if (Object.getPrototypeOf(value) !== Array.prototype || keys.length !== value.length + 1) fail();
      return Array.from({ length: value.length }, (_, i) => snapshot(dataOf(value, String(i)), ancestors));
    }
    const prototype = Object.getPrototypeOf(value);
    if (prototype !== Object.prototype && prototype !== null) fail();
    const copy: Record<string, unknown> = {};
    for (const key of keys) {
      if (typeof key !== "string") fail();
      const v = snapshot(dataOf(value, key as string), ancestors);
      if (v !== undefined) copy[key as string] = v;
    }
    return copy;
  } finally {
    ancestors.delete(value);
  }
}

/** An own, enumerable data property: a getter is never run. */
function dataOf(value: object, key: string): unknown {
  const d = Object.getOwnPropertyDescriptor(value, key);
  return d && d.enumerable && "value" in d ? d.value : fail();
}

/** A plain, checked copy of `value`; `null` when it holds anything a store would not give back exactly. */
export function snapshotData(value: unknown): unknown | null {
  try {
    return snapshot(value, new Set());
  } catch {
    return null;
  }
}

/** Why an agent item is refused, or null for an item the SDK produces (by the SDK's own item schema). */
function itemProblem(item: unknown): string | null {
  if (!protocol.ModelItem.safeParse(item).success) return "is not an item the Agents SDK produces";
  return null;
}

/** What an item is, for an error message (its type or role, never its content). */
function itemKind(item: unknown): string {
  if (item === null || typeof item !== "object") return item === null ? "null" : typeof item;
  const { type, role } = item as { type?: unknown; role?: unknown };
  const named = typeof type === "string" ? type : typeof role === "string" ? `${role} message` : "object";
  return JSON.stringify(named.slice(0, 60));
}

/**
 * Plain, checked copies of items handed to `addItems`.
 * @throws `invalid_message` naming the first item the SDK never produces or that holds data a store
 * would not give back exactly.
 */
export function checkedItems(items: unknown): AgentInputItem[] {
  if (!Array.isArray(items))
    throw new ThreadkeepError("invalid_message", "addItems takes an array of Agents SDK items");
  return Array.from({ length: items.length }, (_, i) => {
    const item: unknown = items[i];
    const checked = i in items ? snapshotData(item) : null;
    const problem =
      checked === null
        ? "holds data a store cannot keep exactly (only JSON values and Uint8Array)"
        : itemProblem(checked);
    if (problem)
      throw new ThreadkeepError("invalid_message", `Agents SDK session item ${i} (${itemKind(item)}) ${problem}`, {
        details: { param: `items[${i}]` },
      });
    return checked as AgentInputItem;
  });
}

/** `true` when every item is one the SDK produces (for a transaction's already-checked copies). */
export function areAgentItems(items: unknown[]): boolean {
  return items.every((item) => itemProblem(item) === null);
}

/** A copy of checked data as JSON can store it: each `Uint8Array` as `{ "$threadkeep_bytes": base64 }`. */
export function toStorable(value: unknown): unknown {
  if (value instanceof Uint8Array)
    return { [BYTES_KEY]: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64") };
  if (Array.isArray(value)) return value.map(toStorable);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toStorable(v)]));
}

/** Stored data as it was handed in: the inverse of {@link toStorable}, on a copy. */
export function fromStorable(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(fromStorable);
  if (value === null || typeof value !== "object") return value;
  const keys = Object.keys(value);
  const bytes = (value as Record<string, unknown>)[BYTES_KEY];
  if (keys.length === 1 && typeof bytes === "string") return new Uint8Array(Buffer.from(bytes, "base64"));
  return Object.fromEntries(keys.map((k) => [k, fromStorable((value as Record<string, unknown>)[k])]));
}

/** A fingerprint of checked data, the same whatever its key order and whichever store it came back from. */
export function fingerprint(value: unknown): string {
  return createHash("sha256")
    .update(JSON.stringify(sortedData(toStorable(value))))
    .digest("base64url");
}
