import { randomUUID } from "node:crypto";
import { z } from "zod";
import { parseWith } from "../validate.js";

/** Most referenced entities remembered per session. */
export const MAX_REFERENCES = 10;
/** How long a pending confirmation waits for the user's yes or no. */
export const DEFAULT_CONFIRMATION_TTL_MS = 5 * 60_000;

/** Something the conversation talks about, as the application names it (`{ type: "task", id: 42 }`). */
export interface EntityRef {
  type: string;
  id: string | number;
  /** A human name, shown in the state note (`buy groceries`). */
  label?: string;
  /** When it was last referenced, in ms since the epoch. */
  at: number;
}

/** The last thing the user asked for. */
export interface Intent {
  /** The application's name for it (`create_task`). */
  name: string;
  at: number;
}

/** An action that waits for the user's yes or no. */
export interface PendingConfirmation {
  /** Random; lets a caller confirm exactly the confirmation it asked about. */
  id: string;
  /** The application's name for the action (`delete_task`). */
  action: string;
  /** Its arguments, as the application will execute them. */
  args: Record<string, unknown>;
  /** The question put to the user, if the application wants it in the state note. */
  prompt?: string;
  createdAt: number;
  /** After this (ms since the epoch) the confirmation is void: it is never executed. */
  expiresAt: number;
}

/** Conversational state of a session, kept in its state under `data.conversation`. */
export interface ConversationState {
  lastIntent?: Intent;
  /** Most recent first, at most {@link MAX_REFERENCES}: "that task" is the first task here. */
  references: EntityRef[];
  pending?: PendingConfirmation;
}

/** A change to conversational state: fields given replace the stored ones, `null` clears them. */
export interface ConversationPatch {
  lastIntent?: Intent | null;
  references?: EntityRef[];
  pending?: PendingConfirmation | null;
}

const text = (max: number) => z.string().min(1).max(max);
const time = z.int().nonnegative();
const entitySchema = z.strictObject({
  type: text(64),
  id: z.union([text(200), z.number()]),
  label: z.string().max(200).optional(),
  at: time,
});
const intentSchema = z.strictObject({ name: text(128), at: time });
const pendingSchema = z.strictObject({
  id: text(100),
  action: text(128),
  args: z.record(z.string(), z.unknown()),
  prompt: z.string().max(1000).optional(),
  createdAt: time,
  expiresAt: time,
});

/** The JSON shape of {@link ConversationState}. */
export const conversationStateSchema = z.strictObject({
  lastIntent: intentSchema.optional(),
  references: z.array(entitySchema).max(MAX_REFERENCES),
  pending: pendingSchema.optional(),
});

/** The JSON shape of {@link ConversationPatch}. */
export const conversationPatchSchema = z.strictObject({
  lastIntent: intentSchema.nullable().optional(),
  references: z.array(entitySchema).max(MAX_REFERENCES).optional(),
  pending: pendingSchema.nullable().optional(),
});

/** Validates conversational state. @throws ThreadkeepError `invalid_request` naming the field. */
export function parseConversationState(value: unknown): ConversationState {
  return parseWith(conversationStateSchema, value, "conversation") as ConversationState;
}

/** Validates a conversation patch. @throws ThreadkeepError `invalid_request` naming the field. */
export function parseConversationPatch(value: unknown): ConversationPatch {
  return parseWith(conversationPatchSchema, value, "conversation") as ConversationPatch;
}

/** The conversational state in session state data; empty when missing or unreadable. */
export function readConversation(data: Record<string, unknown> | undefined): ConversationState {
  if (data?.conversation === undefined) return { references: [] };
  const parsed = conversationStateSchema.safeParse(data.conversation);
  return parsed.success ? (parsed.data as ConversationState) : { references: [] };
}

/** Session state data with the conversational state replaced. */
export function writeConversation(
  data: Record<string, unknown>,
  conversation: ConversationState,
): Record<string, unknown> {
  return { ...data, conversation };
}

/** The state with a patch applied. */
export function patchConversation(state: ConversationState, patch: ConversationPatch): ConversationState {
  const next: ConversationState = { ...state, references: patch.references ?? state.references };
  if (patch.lastIntent === null) delete next.lastIntent;
  else if (patch.lastIntent) next.lastIntent = patch.lastIntent;
  if (patch.pending === null) delete next.pending;
  else if (patch.pending) next.pending = patch.pending;
  return next;
}

/** The state with `entity` moved (or added) to the front of the references. */
export function withReference(
  state: ConversationState,
  entity: Omit<EntityRef, "at">,
  now = Date.now(),
): ConversationState {
  const ref = parseWith(entitySchema, { ...entity, at: now }, "entity") as EntityRef;
  const others = state.references.filter((r) => r.type !== ref.type || String(r.id) !== String(ref.id));
  return { ...state, references: [ref, ...others].slice(0, MAX_REFERENCES) };
}

/** The state with `name` as the last intent. */
export function withIntent(state: ConversationState, name: string, now = Date.now()): ConversationState {
  return { ...state, lastIntent: parseWith(intentSchema, { name, at: now }, "intent") };
}

/** What is needed to ask the user for a confirmation. */
export interface PendingInput {
  action: string;
  args?: Record<string, unknown>;
  prompt?: string;
  /** How long the confirmation stays valid. @default 300000 (5 minutes) */
  ttlMs?: number;
}

/** A new pending confirmation (replacing any earlier one: only the latest question is answered). */
export function newPending(input: PendingInput, now = Date.now()): PendingConfirmation {
  const ttlMs = input.ttlMs ?? DEFAULT_CONFIRMATION_TTL_MS;
  return parseWith(
    pendingSchema,
    {
      id: randomUUID(),
      action: input.action,
      args: input.args ?? {},
      ...(input.prompt === undefined ? {} : { prompt: input.prompt }),
      createdAt: now,
      expiresAt: now + ttlMs,
    },
    "pending",
  ) as PendingConfirmation;
}

/** True when the confirmation can no longer be executed. */
export function isExpired(pending: PendingConfirmation, now = Date.now()): boolean {
  return now >= pending.expiresAt;
}

function entityName(ref: EntityRef): string {
  return `${ref.type} ${ref.id}${ref.label ? ` (${ref.label})` : ""}`;
}

/**
 * A short note for the model ("Recently referenced: task 42 (buy groceries)"), or null when there
 * is nothing to say. An expired confirmation is not mentioned.
 */
export function renderConversationNote(state: ConversationState, now = Date.now()): string | null {
  const lines: string[] = [];
  if (state.references.length > 0)
    lines.push(`Recently referenced: ${state.references.slice(0, 5).map(entityName).join(", ")}`);
  if (state.lastIntent) lines.push(`Last intent: ${state.lastIntent.name}`);
  const pending = state.pending;
  if (pending && !isExpired(pending, now)) {
    const minutes = Math.max(1, Math.ceil((pending.expiresAt - now) / 60_000));
    const question = pending.prompt ? ` ("${pending.prompt}")` : "";
    lines.push(
      `Waiting for the user to confirm: ${pending.action} ${JSON.stringify(pending.args)}${question}, expires in ${minutes} min`,
    );
  }
  return lines.length === 0 ? null : `Conversation state:\n- ${lines.join("\n- ")}`;
}
