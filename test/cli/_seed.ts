/** Test data for export, import and migrate: sessions that exercise every part of the format. */

import { exportSessions } from "../../src/transfer/export.js";
import { newSessionId } from "../../src/core/ids.js";
import type { MessageInput, FullStore } from "../../src/core/types.js";

const HOUR = 3_600_000;

/**
 * Writes a handful of awkward sessions: tool calls, content parts, metadata, an incomplete reply,
 * a trimmed session whose first seq is above 1 with a summary of what was dropped, state, an empty
 * session, and two owners. @returns their ids.
 */
export async function seedVaried(store: FullStore, now = Date.now()): Promise<string[]> {
  const ids: string[] = [];
  const make = async (
    userId: string,
    metadata: Record<string, unknown>,
    messages: MessageInput[],
    maxMessages?: number,
  ) => {
    const id = newSessionId();
    ids.push(id);
    await store.createSession({ id, userId, metadata, createdAt: now - 5 * HOUR - ids.length * 1000 });
    if (messages.length > 0) await store.appendMessages(id, messages, { maxMessages });
    return id;
  };
  const tools = await make("alice", { title: "Tasks", tags: ["a", "b"] }, [
    { role: "system", content: "You manage tasks." },
    { role: "user", content: "Create a task: buy groceries" },
    {
      role: "assistant",
      content: null,
      tool_calls: [
        {
          id: "call_1",
          type: "function",
          function: { name: "create_task", arguments: '{"title":"buy groceries"}' },
        },
      ],
    },
    { role: "tool", tool_call_id: "call_1", content: '{"id":42}' },
    { role: "assistant", content: "Created task 42.", metadata: { model: "m1", latencyMs: 12 } },
    {
      role: "user",
      content: [
        { type: "text", text: "Welke producten heb je daarvoor?" },
        { type: "image_url", image_url: { url: "data:x" } },
      ],
    },
    { role: "assistant", content: "Melk en br", incomplete: true },
  ]);
  await store.setState(tools, { lastTaskId: 42, pending: { action: "delete", taskId: 42 } }, 0);
  await store.saveSummary(tools, {
    fromSeq: 1,
    toSeq: 4,
    content: "User made task 42.",
    createdAt: now - 4 * HOUR,
    metadata: { by: "test" },
  });

  const trimmed = await make(
    "alice",
    {},
    Array.from(
      { length: 12 },
      (_, i) =>
        ({
          role: i % 2 ? "assistant" : "user",
          content: `turn ${i + 1} ✓ "quoted" \\ line\nnext`,
        }) as MessageInput,
    ),
    8,
  );
  await store.saveSummary(trimmed, {
    fromSeq: 1,
    toSeq: 4,
    content: "Early turns.",
    createdAt: now - 3 * HOUR,
  });
  await store.saveSummary(trimmed, {
    fromSeq: 5,
    toSeq: 8,
    content: "Middle turns.",
    createdAt: now - 2 * HOUR,
  });

  await make("bob", { empty: true }, []);
  await make("bob", {}, [
    { role: "user", content: "hello bob" },
    { role: "assistant", content: "hi", name: "helper" },
  ]);

  for (const [i, id] of ids.entries()) await store.touchSession(id, now - HOUR + i * 1000);
  return ids;
}

/** Writes `sessions` × `messages` plain sessions quickly, in parallel batches. @returns their ids. */
export async function seedBulk(
  store: FullStore,
  sessions: number,
  messages: number,
  now = Date.now(),
): Promise<string[]> {
  const ids = Array.from({ length: sessions }, () => newSessionId());
  for (let i = 0; i < ids.length; i += 50) {
    await Promise.all(
      ids.slice(i, i + 50).map(async (id, j) => {
        const n = i + j;
        await store.createSession({
          id,
          userId: `user-${n % 17}`,
          createdAt: now - 2 * HOUR,
          metadata: { n },
        });
        await store.appendMessages(
          id,
          Array.from(
            { length: messages },
            (_, k) =>
              ({
                role: k % 2 ? "assistant" : "user",
                content: `session ${n} message ${k + 1}`,
              }) as MessageInput,
          ),
        );
        await store.touchSession(id, now - HOUR + n);
      }),
    );
  }
  return ids;
}

/** Every session of the store as export lines: what round-trip and migrate tests compare. */
export async function exportAll(store: FullStore): Promise<string[]> {
  const lines: string[] = [];
  await exportSessions(store, { all: true }, (line) => {
    lines.push(line);
  });
  return lines;
}
