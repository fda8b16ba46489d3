/**
 * The extraction contract of `--memories auto`: the prompt that asks the model which durable facts
 * about the user a new turn adds, changes or contradicts, and the validation of its JSON answer.
 * The model sees the user's related memories under short handles (`m1`, `m2`, …), never their ids:
 * an answer can only name what it was shown, so another user's id or an invented one cannot reach
 * the store. Pure: no I/O here (docs/memories.md explains the contract).
 */
import { z } from "zod";
import type { UserMemory } from "../../core/store-types.js";

/** The largest answer read (characters); a longer one is refused whole as malformed. */
export const MAX_ANSWER_CHARS = 32_000;
/** The longest memory text kept (characters). */
export const MAX_MEMORY_TEXT = 300;
/** The most operations applied from one answer. */
export const MAX_OPERATIONS = 10;

/** One operation of the model's answer, with handles resolved to ids. */
export type MemoryOperation =
  | { op: "add"; text: string }
  | { op: "update"; id: string; text: string; contradiction: boolean }
  | { op: "delete"; id: string };

/** What validation made of an answer. */
export interface ParsedExtraction {
  operations: MemoryOperation[];
  /** Operations dropped (unknown handle, wrong shape, over the cap): counted, never applied. */
  rejected: number;
}

/** The system prompt of the extraction request. */
export const EXTRACTION_PROMPT = `You maintain a short list of durable facts about a user ("memories"), written from their conversations with an assistant.
From the NEW MESSAGES, find facts about the user that are worth remembering across conversations: stable preferences, circumstances, relationships, plans, constraints (e.g. "Is vegetarian", "Manager is Sam", "Lives in Utrecht").
Do not record: passing requests or questions, facts about the world, what the assistant said unless the user confirmed it, secrets such as passwords or keys, or anything already in KNOWN MEMORIES with the same meaning.
When a new message changes or contradicts a known memory, update that memory (set "contradiction": true when the old statement is no longer true). Delete a known memory only when the user says it is wrong or asks to forget it.
Write each memory as one short third-person statement without the user's name, at most ${MAX_MEMORY_TEXT} characters.
Answer with JSON only, exactly this shape, and an empty list when nothing is worth remembering:
{"operations":[{"op":"add","text":"..."},{"op":"update","ref":"m1","text":"...","contradiction":true},{"op":"delete","ref":"m2"}]}
"ref" is the handle of a KNOWN MEMORY in brackets. Never invent a handle.`;

/** A message of the turn as the extraction sees it. */
export interface ExtractionMessage {
  seq: number;
  role: string;
  text: string;
}

/** The chat request body of one extraction (without the model). */
export function extractionRequest(
  known: readonly Pick<UserMemory, "text">[],
  messages: readonly ExtractionMessage[],
): {
  messages: { role: "system" | "user"; content: string }[];
  handles: string[];
} {
  const handles = known.map((_, i) => `m${i + 1}`);
  const memories = known.length === 0 ? "(none)" : known.map((m, i) => `[${handles[i]}] ${m.text}`).join("\n");
  const turn = messages.map((m) => `${m.role}: ${m.text}`).join("\n");
  return {
    messages: [
      { role: "system", content: EXTRACTION_PROMPT },
      { role: "user", content: `KNOWN MEMORIES:\n${memories}\n\nNEW MESSAGES:\n${turn}` },
    ],
    handles,
  };
}

const text = z.string().trim().min(1).max(MAX_MEMORY_TEXT);
const operation = z.discriminatedUnion("op", [
  z.object({ op: z.literal("add"), text }),
  z.object({ op: z.literal("update"), ref: z.string(), text, contradiction: z.boolean().optional() }),
  z.object({ op: z.literal("delete"), ref: z.string() }),
]);

/** Why an answer was refused whole. */
export class MalformedExtraction extends Error {}

/** The JSON of an answer's content, also when a model wraps it in a ```json fence. */
function answerJson(content: string): unknown {
  const fenced = /^```(?:json)?\s*([\s\S]*?)\s*```$/i.exec(content.trim());
  return JSON.parse(fenced ? fenced[1] : content);
}

/**
 * Validates the model's answer: handles become the ids of the memories shown (`known`, same order as
 * the handles), unknown handles and ill-shaped operations are dropped and counted.
 * @throws MalformedExtraction when the answer is not JSON of the contract's shape, or too long.
 */
export function parseExtraction(content: unknown, known: readonly Pick<UserMemory, "id">[]): ParsedExtraction {
  if (typeof content !== "string") throw new MalformedExtraction("the answer has no text content");
  if (content.length > MAX_ANSWER_CHARS)
    throw new MalformedExtraction(`the answer is longer than ${MAX_ANSWER_CHARS} characters`);
  let json: unknown;
  try {
    json = answerJson(content);
  } catch {
    throw new MalformedExtraction("the answer is not JSON");
  }
  const list = (json as { operations?: unknown } | null)?.operations;
  if (typeof json !== "object" || json === null || !Array.isArray(list))
    throw new MalformedExtraction('the answer has no "operations" list');
  const operations: MemoryOperation[] = [];
  let rejected = 0;
  const touched = new Set<string>();
  for (const raw of list) {
    const parsed = operation.safeParse(raw);
    if (!parsed.success || operations.length >= MAX_OPERATIONS) {
      rejected++;
      continue;
    }
    const op = parsed.data;
    if (op.op === "add") {
      operations.push({ op: "add", text: op.text });
      continue;
    }
    const index = /^m([1-9]\d{0,4})$/.exec(op.ref.trim());
    const memory = index ? known[Number(index[1]) - 1] : undefined;
    // One operation per memory: a second one on the same memory contradicts the first.
    if (!memory || touched.has(memory.id)) {
      rejected++;
      continue;
    }
    touched.add(memory.id);
    operations.push(
      op.op === "update"
        ? { op: "update", id: memory.id, text: op.text, contradiction: op.contradiction === true }
        : { op: "delete", id: memory.id },
    );
  }
  return { operations, rejected };
}

/** A memory's text for comparison: case, accents, punctuation and spacing do not make a new fact. */
export function normaliseMemoryText(value: string): string {
  return value
    .normalize("NFKD")
    .replace(/\p{M}/gu, "")
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, " ")
    .trim();
}
