/**
 * The arguments of the Agents SDK's history transactions and mutations, read once and checked the way
 * the SDK's own `MemorySession` checks them, before anything is read or written: a bad argument is a
 * coded `invalid_request` that names what is wrong (never the data), and leaves the operation id free.
 */
import type { AgentInputItem, SessionHistoryMutation, SessionHistoryTransaction } from "@openai/agents";
import { ThreadkeepError } from "../core/errors.js";
import { areAgentItems, snapshotData } from "./_agent-data.js";

const invalid = (message: string) => new ThreadkeepError("invalid_request", message);

const hasExactly = (record: object, keys: string[]) => {
  const own = Object.keys(record);
  return own.length === keys.length && keys.every((k) => Object.hasOwn(record, k));
};

function items(value: unknown): AgentInputItem[] {
  const copy = snapshotData(value) as unknown[] | null;
  if (!copy || !areAgentItems(copy))
    throw invalid("Session history transaction items contain invalid or unsupported data.");
  return copy as AgentInputItem[];
}

/** A checked transaction: its operation id and a plain copy of the transaction. */
export interface CheckedTransaction {
  operationId: string;
  transaction: SessionHistoryTransaction;
}

/** Reads `applyHistoryTransaction`'s arguments once and checks them. @throws `invalid_request` */
export function checkedTransaction(args: unknown): CheckedTransaction {
  let operationId: unknown;
  let transaction: unknown;
  try {
    if (!args || typeof args !== "object") throw new Error("no arguments");
    operationId = Reflect.get(args, "operationId");
    transaction = Reflect.get(args, "transaction");
  } catch {
    // A throwing getter's message may hold anything: it is not passed on.
    throw invalid("Session history transaction arguments are invalid.");
  }
  if (typeof operationId !== "string" || !operationId.trim())
    throw invalid("Session history transaction operationId must be a non-empty string.");
  if (!transaction || typeof transaction !== "object") throw invalid("Session history transaction must be an object.");
  const record = snapshotData(transaction) as Record<string, unknown> | null;
  if (!record) throw invalid("Session history transaction items contain invalid or unsupported data.");
  if (record.type === "append_items") {
    if (!hasExactly(transaction, ["type", "items"]) || !Array.isArray(record.items))
      throw invalid("Session history append transaction fields are invalid.");
    return { operationId, transaction: { type: "append_items", items: items(record.items) } };
  }
  if (record.type !== "replace_suffix") throw invalid("Unsupported session history transaction type.");
  if (
    !hasExactly(transaction, ["type", "expectedSuffix", "replacement"]) ||
    !Array.isArray(record.expectedSuffix) ||
    !Array.isArray(record.replacement)
  ) {
    throw invalid("Session history suffix transaction fields are invalid.");
  }
  return {
    operationId,
    transaction: {
      type: "replace_suffix",
      expectedSuffix: items(record.expectedSuffix),
      replacement: items(record.replacement),
    },
  };
}

/** Reads `applyHistoryMutations`' arguments and checks them. @throws `invalid_request` */
export function checkedMutations(args: unknown): SessionHistoryMutation[] {
  const record = snapshotData(args) as { mutations?: unknown } | null;
  if (!record || typeof record !== "object" || !Array.isArray(record.mutations))
    throw invalid("Session history mutations must be an object with a mutations array.");
  return record.mutations.map((m, i) => {
    const mutation = m as Record<string, unknown> | null;
    if (!mutation || mutation.type !== "replace_function_call")
      throw invalid(`Session history mutation ${i} has an unsupported type.`);
    const replacement = mutation.replacement as Record<string, unknown> | undefined;
    if (typeof mutation.callId !== "string" || replacement?.type !== "function_call" || !areAgentItems([replacement])) {
      throw invalid(`Session history mutation ${i} needs a callId and a function_call replacement.`);
    }
    return mutation as unknown as SessionHistoryMutation;
  });
}
