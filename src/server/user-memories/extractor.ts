/**
 * `--memories auto`: after a turn is committed, the server asks the model in the background which
 * durable facts about the user the turn adds, changes or contradicts, and applies the answer to the
 * user's memories. Never on the turn's path: `schedule` only queues the session.
 *
 * Durability: each session's state keeps `memoryExtraction.toSeq`, the last message extracted. A
 * run reads what follows it, so a turn missed by a failure, a full queue or a restart is extracted
 * with the session's next committed turn (and at start, {@link MemoryExtractor.resume} queues the
 * recently active sessions whose marker lags behind). The marker moves only when the answer was
 * applied or was malformed (a malformed answer is not asked again: the same turn would cost the
 * same tokens for the same answer).
 */
import { memoryWritten } from "../../core/user-memories/presence.js";
import type { FastifyBaseLogger } from "fastify";
import { isThreadkeepError } from "../../core/errors.js";
import { contentText } from "../../core/messages.js";
import type { Memory } from "../../core/memory/memory.js";
import { hasRetention, hasUserMemories, type UserMemory, type UserMemoryStore } from "../../core/store-types.js";
import type { FullStore, Message } from "../../core/types.js";
import { lexicalScore, words } from "../../core/context/user-memories.js";
import type { Upstream } from "../../llm/openai-compatible.js";
import type { ServerMetrics } from "../metrics.js";
import {
  type ExtractionMessage,
  extractionRequest,
  MalformedExtraction,
  type MemoryOperation,
  normaliseMemoryText,
  parseExtraction,
} from "./extraction.js";
import { inSpan } from "../../core/tracing.js";

/** The state key of a session's extraction marker. */
export const EXTRACTION_STATE_KEY = "memoryExtraction";

/** Options of {@link MemoryExtractor}. */
export interface MemoryExtractorOptions {
  memory: Memory;
  upstream: Upstream;
  metrics: ServerMetrics;
  log: FastifyBaseLogger;
  /** The model that extracts; unset: the server's default model. */
  model?: string;
  /** Wait before retrying a failed extraction, doubled each time. @default 5000 */
  retryDelayMs?: number;
  /** Attempts per run before it is left to the session's next turn. @default 3 */
  maxAttempts?: number;
  /** Sessions waiting at most; more are left to their next turn. @default 10000 */
  maxQueued?: number;
  /** Messages of a turn read at most (the newest). @default 12 */
  maxMessages?: number;
  /** Known memories shown to the model at most (the most related). @default 20 */
  maxKnown?: number;
}

const MESSAGE_CHARS = 2000;

/** The queue and worker of background memory extraction. */
export class MemoryExtractor {
  readonly #options: Required<Omit<MemoryExtractorOptions, "model">> & { model?: string };
  readonly #queue = new Map<string, string>();
  #running: Promise<void> | undefined;
  #closed = false;
  #timer: NodeJS.Timeout | undefined;
  #wake: (() => void) | undefined;

  constructor(options: MemoryExtractorOptions) {
    this.#options = {
      retryDelayMs: 5000,
      maxAttempts: 3,
      maxQueued: 10_000,
      maxMessages: 12,
      maxKnown: 20,
      ...options,
    };
  }

  /** Queues a session whose turn was committed. Returns at once; never throws. */
  schedule(userId: string, sessionId: string): void {
    if (this.#closed) return;
    if (!this.#queue.has(sessionId) && this.#queue.size >= this.#options.maxQueued) return;
    this.#queue.set(sessionId, userId);
    this.#running ??= this.#drain().finally(() => {
      this.#running = undefined;
    });
  }

  /** Resolves when the queue is empty (for tests and shutdown). */
  async idle(): Promise<void> {
    while (this.#running) await this.#running;
  }

  /** Stops: waits for the extraction in progress; what is queued is left to the markers. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#queue.clear();
    if (this.#timer) clearTimeout(this.#timer);
    this.#wake?.();
    await this.#running;
  }

  /**
   * Queues the sessions active in the last `withinMs` whose marker lags behind their messages: what
   * a restart interrupted. Needs a store that enumerates sessions; failures are logged.
   */
  async resume(withinMs = 24 * 60 * 60_000): Promise<number> {
    const store = await this.#options.memory.store();
    if (!hasRetention(store)) return 0;
    let queued = 0;
    try {
      let cursor: string | null | undefined;
      const since = Date.now() - withinMs;
      do {
        const page = await store.listAllSessions({ limit: 200, cursor });
        for (const session of page.sessions) {
          if (session.lastActivityAt < since) continue;
          const [state, last] = await Promise.all([
            store.getState(session.id),
            store.getMessages(session.id, { last: 1 }),
          ]);
          if ((last[0]?.seq ?? 0) > markerOf(state.data)) {
            this.schedule(session.userId, session.id);
            queued++;
          }
        }
        cursor = page.nextCursor;
      } while (cursor && !this.#closed);
    } catch (error) {
      this.#options.log.warn(
        { err: error },
        "resuming memory extraction failed; sessions are extracted on their next turn",
      );
    }
    return queued;
  }

  async #drain(): Promise<void> {
    while (!this.#closed && this.#queue.size > 0) {
      const [sessionId, userId] = this.#queue.entries().next().value as [string, string];
      this.#queue.delete(sessionId);
      await this.#runWithRetries(userId, sessionId);
    }
  }

  async #runWithRetries(userId: string, sessionId: string): Promise<void> {
    const { metrics, log, maxAttempts, retryDelayMs } = this.#options;
    for (let attempt = 1; attempt <= maxAttempts && !this.#closed; attempt++) {
      try {
        const outcome = await inSpan(
          "threadkeep.extract_memories",
          { attributes: { "gen_ai.conversation.id": sessionId, "threadkeep.attempt": attempt } },
          () => this.extract(userId, sessionId),
        );
        metrics.memoryExtractions.inc({ outcome });
        return;
      } catch (error) {
        // A session deleted meanwhile has nothing left to extract.
        if (isThreadkeepError(error, "session_not_found")) return;
        if (error instanceof MalformedExtraction) {
          metrics.memoryExtractions.inc({ outcome: "malformed" });
          log.warn(
            { sessionId, reason: error.message },
            "the model's memory extraction answer was malformed; nothing stored",
          );
          return;
        }
        if (attempt === maxAttempts) {
          metrics.memoryExtractions.inc({ outcome: "failed" });
          log.warn(
            { err: error, sessionId },
            "memory extraction failed; it is tried again with the session's next turn",
          );
          return;
        }
        metrics.memoryExtractions.inc({ outcome: "retry" });
        await this.#sleep(retryDelayMs * 2 ** (attempt - 1));
      }
    }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.#wake = resolve;
      this.#timer = setTimeout(resolve, ms);
      this.#timer.unref?.();
    });
  }

  /**
   * One extraction of a session: the messages after its marker, the answer, its operations applied,
   * the marker moved. @returns `nothing` or `applied`. @throws MalformedExtraction, or the failure to retry.
   */
  async extract(userId: string, sessionId: string): Promise<"nothing" | "applied"> {
    const { memory, metrics } = this.#options;
    const store = await memory.store();
    if (!hasUserMemories(store)) return "nothing";
    const state = await memory.getState(sessionId, { userId });
    const marker = markerOf(state.data);
    const fresh = (await memory.getMessages(sessionId, { userId, last: this.#options.maxMessages })).filter(
      (m) => m.seq > marker,
    );
    const turn = fresh.map(toExtractionMessage).filter((m): m is ExtractionMessage => m !== null);
    const toSeq = fresh.at(-1)?.seq;
    if (toSeq === undefined) return "nothing";
    if (turn.length === 0) {
      await this.#mark(userId, sessionId, toSeq);
      return "nothing";
    }
    const all = await listAll(store, userId);
    const known = related(all, turn, this.#options.maxKnown);
    const request = extractionRequest(known, turn);
    const body: Record<string, unknown> = {
      messages: request.messages,
      temperature: 0,
      response_format: { type: "json_object" },
    };
    if (this.#options.model) body.model = this.#options.model;
    const completion = await this.#options.upstream.chat(body);
    let parsed;
    try {
      parsed = parseExtraction(completion?.choices?.[0]?.message?.content, known);
    } catch (error) {
      // Not asked again: the marker moves past the turn.
      if (error instanceof MalformedExtraction) await this.#mark(userId, sessionId, toSeq);
      throw error;
    }
    if (parsed.rejected > 0) metrics.memoryOperations.inc({ op: "any", result: "rejected" }, parsed.rejected);
    const changed = await applyOperations(store, userId, all, parsed.operations, {
      source: { kind: "session", sessionId, seqs: turn.filter((m) => m.role === "user").map((m) => m.seq) },
      count: (op, result) => metrics.memoryOperations.inc({ op, result }),
    });
    if (changed > 0) await memory.memories.scheduleEmbedding({ userId });
    await this.#mark(userId, sessionId, toSeq);
    return changed > 0 ? "applied" : "nothing";
  }

  async #mark(userId: string, sessionId: string, toSeq: number): Promise<void> {
    await this.#options.memory.updateState(
      sessionId,
      (data) => ({ ...data, [EXTRACTION_STATE_KEY]: { toSeq: Math.max(toSeq, markerOf(data)) } }),
      { userId },
    );
  }
}

/** The last message seq a session's state says was extracted (0: none). */
export function markerOf(data: Record<string, unknown>): number {
  const value = (data[EXTRACTION_STATE_KEY] as { toSeq?: unknown } | undefined)?.toSeq;
  return typeof value === "number" && Number.isSafeInteger(value) ? value : 0;
}

function toExtractionMessage(message: Message): ExtractionMessage | null {
  if (message.role !== "user" && message.role !== "assistant") return null;
  const text = contentText(message.content).trim();
  return text ? { seq: message.seq, role: message.role, text: text.slice(0, MESSAGE_CHARS) } : null;
}

/** Every memory of the user (up to 1000), for the duplicate check. */
async function listAll(store: UserMemoryStore, userId: string): Promise<UserMemory[]> {
  const all: UserMemory[] = [];
  let cursor: string | null | undefined;
  do {
    const page = await store.listUserMemories(userId, { limit: 200, cursor });
    all.push(...page.memories);
    cursor = page.nextCursor;
  } while (cursor && all.length < 1000);
  return all;
}

/** The memories the model is shown: the most related to the turn, then the most recent. */
function related(all: readonly UserMemory[], turn: readonly ExtractionMessage[], limit: number): UserMemory[] {
  if (all.length <= limit) return [...all];
  const query = new Set(words(turn.map((m) => m.text).join(" ")));
  return all
    .map((m) => ({ m, score: lexicalScore(query, m.text) }))
    .sort((a, b) => b.score - a.score || b.m.updatedAt - a.m.updatedAt)
    .slice(0, limit)
    .map((e) => e.m);
}

/**
 * Applies validated operations. Whatever the answer says, no memory ends up with the normalised text
 * of another: such an add or update is dropped as a duplicate. A contradiction keeps the old text in
 * the memory's history with reason `contradiction`. @returns how many memories changed.
 */
export async function applyOperations(
  store: FullStore & UserMemoryStore,
  userId: string,
  existing: readonly UserMemory[],
  operations: readonly MemoryOperation[],
  context: { source: UserMemory["source"]; count: (op: string, result: string) => void },
): Promise<number> {
  const texts = new Map(existing.map((m) => [m.id, normaliseMemoryText(m.text)]));
  const taken = () => new Set(texts.values());
  let changed = 0;
  for (const operation of operations) {
    const label = operation.op === "update" && operation.contradiction ? "contradiction" : operation.op;
    if (operation.op === "delete") {
      if (await store.deleteUserMemory(userId, operation.id)) {
        texts.delete(operation.id);
        changed++;
        context.count(label, "applied");
      } else context.count(label, "rejected");
      continue;
    }
    const normal = normaliseMemoryText(operation.text);
    if (!normal || taken().has(normal)) {
      context.count(label, "duplicate");
      continue;
    }
    if (operation.op === "add") {
      const added = await store.addUserMemory({ userId, text: operation.text, source: context.source });
      memoryWritten(store, userId);
      texts.set(added.id, normal);
    } else {
      try {
        await store.updateUserMemory(userId, operation.id, {
          text: operation.text,
          reason: operation.contradiction ? "contradiction" : "update",
        });
      } catch (error) {
        // Deleted by hand since it was shown to the model.
        if (!isThreadkeepError(error, "not_found")) throw error;
        context.count(label, "rejected");
        continue;
      }
      texts.set(operation.id, normal);
    }
    changed++;
    context.count(label, "applied");
  }
  return changed;
}
