/**
 * `threadkeep memories list|add|edit|delete` and `threadkeep users erase <userId>`: an operator's view
 * of one user's memories (`--user`, default the default user), and the erasure of everything kept
 * about a user (sessions with their messages, branches, summaries, vectors and state; memories with
 * their history). The same calls as /v1/memories and DELETE /v1/users/me, straight on the store.
 */
import type { Command } from "commander";
import { describeCommand } from "./_commands.js";
import { ThreadkeepError } from "../core/errors.js";
import type { Memory } from "../core/memory/memory.js";
import { parsePositiveInt } from "../core/policies.js";
import { createMemory } from "../create-memory.js";
import { oneLine, paintFor } from "./_format.js";
import { addStoreUrlOption } from "./_store.js";
import { resolveConfig } from "./options.js";

interface Flags {
  store?: string;
  user?: string;
  json?: boolean;
}

async function withMemory<T>(flags: Flags, fn: (memory: Memory) => Promise<T>): Promise<T> {
  const config = resolveConfig({ store: flags.store });
  const memory = createMemory({ store: config.store, ttlMs: config.ttlMs });
  try {
    return await fn(memory);
  } finally {
    await memory.close();
  }
}

const print = (value: unknown): void => void process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);

function show(flags: Flags, memory: { id: string; text: string; updatedAt: number; history: unknown[] }): void {
  if (flags.json) return print(memory);
  const paint = paintFor(process.stdout);
  const edits = memory.history.length > 0 ? paint.dim(` (${memory.history.length} earlier)`) : "";
  process.stdout.write(
    `${paint.dim(memory.id)}  ${new Date(memory.updatedAt).toISOString()}  ${oneLine(memory.text, 100)}${edits}\n`,
  );
}

/** Adds `threadkeep memories` and `threadkeep users`. */
export function register(program: Command): void {
  const memories = program.command("memories").description(describeCommand("memories"));
  const common = (command: Command) =>
    addStoreUrlOption(
      command.option("--user <id>", "whose memories (default: the default user)").option("--json", "print JSON"),
    );

  common(
    memories
      .command("list")
      .description("List a user's memories, newest first (with --query, most relevant first)")
      .option("--query <text>", "rank by relevance to this text")
      .option("--limit <n>", "most memories", "50")
      .option("--cursor <cursor>", "the next page (printed after a full page)"),
  ).action((flags: Flags & { query?: string; limit: string; cursor?: string }) =>
    withMemory(flags, async (memory) => {
      const page = await memory.memories.list({
        userId: flags.user,
        q: flags.query,
        limit: parsePositiveInt(flags.limit, "--limit"),
        cursor: flags.cursor,
      });
      if (flags.json) return print(page);
      if (page.memories.length === 0) process.stdout.write("no memories\n");
      for (const m of page.memories) show({}, m);
      if (page.nextCursor) process.stdout.write(`more: --cursor ${page.nextCursor}\n`);
    }),
  );

  common(memories.command("add").description("Add a memory by hand").argument("<text>", "the statement")).action(
    (text: string, flags: Flags) =>
      withMemory(flags, async (memory) => show(flags, await memory.memories.add({ text }, { userId: flags.user }))),
  );

  common(
    memories
      .command("edit")
      .description("Change a memory's text (the old one is kept in its history)")
      .argument("<id>")
      .argument("<text>"),
  ).action((id: string, text: string, flags: Flags) =>
    withMemory(flags, async (memory) =>
      show(flags, await memory.memories.update(id, { text }, { userId: flags.user })),
    ),
  );

  common(memories.command("delete").description("Delete a memory with its history").argument("<id>")).action(
    (id: string, flags: Flags) =>
      withMemory(flags, async (memory) => {
        if (!(await memory.memories.delete(id, { userId: flags.user })))
          throw new ThreadkeepError("not_found", `Memory ${id} not found`);
        if (flags.json) print({ id, deleted: true });
        else process.stdout.write(`deleted ${id}\n`);
      }),
  );

  const users = program.command("users").description(describeCommand("users"));
  addStoreUrlOption(
    users
      .command("erase")
      .description(
        "Erase everything kept about a user: sessions (messages, branches, summaries, vectors, state) and memories with their history",
      )
      .argument("<userId>", "the user (an end user behind a key is <key's user>/<end user>)")
      .option("--json", "print JSON"),
  ).action((userId: string, flags: Flags) =>
    withMemory(flags, async (memory) => {
      const erased = await memory.eraseUser(userId);
      if (flags.json) print({ userId, ...erased });
      else process.stdout.write(`erased ${userId}: ${erased.sessions} sessions, ${erased.memories} memories\n`);
    }),
  );
}
