/**
 * The slash commands of `threadkeep chat`. Each works through `Memory` (owner checks included), so
 * what the chat shows is what the server and the library would see.
 */
import { saveSummaryOf } from "../core/incarnation.js";
import { isThreadkeepError } from "../core/errors.js";
import { newSessionId } from "../core/ids.js";
import type { Memory } from "../core/memory/memory.js";
import type { ChatMessage, Message } from "../core/types.js";
import type { Upstream } from "../llm/openai-compatible.js";
import { ago, oneLine, type Paint, table } from "./_format.js";
import { describeSessions } from "./sessions.js";
import { createSummarizer } from "../llm/summarizer.js";

/** What the commands share with the chat loop. */
export interface ChatState {
  readonly memory: Memory;
  readonly userId: string;
  readonly upstream?: Upstream;
  readonly model?: string;
  readonly system: ChatMessage[];
  readonly paint: Paint;
  /** The current session; it is stored on its first message. */
  sessionId: string;
  /** Ids shown by the last /sessions, so `/resume 2` works. */
  listed: string[];
  /** Writes a line of output. */
  print(text: string): void;
  /** Writes a line to the error stream. */
  warn(text: string): void;
  /** Asks a question and waits for the answer line (null at end of input or Ctrl-C). */
  ask(question: string): Promise<string | null>;
  /** Commands that were not understood, and turns or commands that failed (for the exit code). */
  usageErrors: number;
  failures: number;
  quit: boolean;
}

interface SlashCommand {
  args?: string;
  help: string;
  run(state: ChatState, arg: string): Promise<void>;
}

/** The session if it is stored, else null (a new session is stored on its first message). */
async function stored(state: ChatState, id = state.sessionId) {
  return state.memory.getSession(id, { userId: state.userId }).catch((error) => {
    if (isThreadkeepError(error, "session_not_found")) return null;
    throw error;
  });
}

function usage(state: ChatState, text: string): void {
  state.warn(text);
  state.usageErrors++;
}

/** Prints messages one line each: `#seq role: first line`. */
export function printMessages(state: ChatState, messages: Message[]): void {
  const { paint } = state;
  for (const m of messages) {
    const text = m.tool_calls ? `→ ${m.tool_calls.map((c) => c.function.name).join(", ")}` : oneLine(m.content, 100);
    state.print(`${paint.dim(`#${m.seq}`)} ${m.role}: ${text}${m.incomplete ? paint.yellow(" [incomplete]") : ""}`);
  }
}

async function resume(state: ChatState, arg: string): Promise<void> {
  if (!arg) return usage(state, "/resume needs a session id, or a number from /sessions");
  let id = arg;
  if (/^\d+$/.test(arg)) {
    if (state.listed.length === 0)
      state.listed = (await state.memory.listSessions({ userId: state.userId, limit: 20 })).sessions.map((s) => s.id);
    id = state.listed[Number(arg) - 1];
    if (!id) return usage(state, `There is no session number ${arg}; /sessions lists them`);
  }
  const session = await state.memory.getSession(id, { userId: state.userId });
  state.sessionId = session.id;
  const last = await state.memory.getMessages(session.id, { userId: state.userId, last: 4 });
  state.print(`resumed session ${session.id} (last activity ${ago(session.lastActivityAt)})`);
  printMessages(state, last);
}

async function summarize(state: ChatState): Promise<void> {
  if (!state.upstream) return state.warn("/summary needs a model: set --upstream and --model (see /help)");
  // The session first: the summary is saved only into this incarnation of it (see saveSummaryOf).
  const session = await stored(state);
  if (!session) return state.print("nothing to summarise yet");
  const summaries = await state.memory.listSummaries(state.sessionId, { userId: state.userId });
  // The rolling summary covers everything before it: fold in only what came after.
  const previous = summaries.reduce<(typeof summaries)[number] | undefined>(
    (a, s) => (!a || s.toSeq > a.toSeq ? s : a),
    undefined,
  );
  const messages = await state.memory.getMessages(state.sessionId, {
    userId: state.userId,
    afterSeq: previous?.toSeq ?? 0,
  });
  if (messages.length === 0)
    return state.print(
      previous
        ? `summary (messages ${previous.fromSeq}–${previous.toSeq}):\n${previous.content}`
        : "nothing to summarise yet",
    );
  const model = state.model ?? "";
  // Unlike background compaction (which waits for a threshold), /summary folds in everything now.
  const content = await createSummarizer({
    baseUrl: state.upstream.baseUrl,
    upstream: state.upstream,
    model,
  }).summarize({ sessionId: state.sessionId, messages, previous });
  const store = await state.memory.store();
  const saved = await saveSummaryOf(store, session, {
    fromSeq: previous?.fromSeq ?? messages[0].seq,
    toSeq: messages[messages.length - 1].seq,
    content,
    metadata: {
      messages: messages.length,
      requestedBy: "chat",
      ...(previous ? { previousSummaryId: previous.id } : {}),
    },
  }).catch((error) => {
    if (!isThreadkeepError(error, "session_not_found")) throw error;
    return null;
  });
  if (!saved) {
    state.warn("/summary: the session was deleted or replaced while the summary was written; nothing was saved");
    state.failures++;
    return;
  }
  state.print(`summary (messages ${saved.fromSeq}–${saved.toSeq}):\n${content}`);
}

/** Every slash command, in the order /help lists them. */
export const COMMANDS: Record<string, SlashCommand> = {
  sessions: {
    help: "recent sessions: number, id, messages, last activity, title",
    async run(state) {
      const { sessions } = await state.memory.listSessions({ userId: state.userId, limit: 20 });
      state.listed = sessions.map((s) => s.id);
      if (sessions.length === 0) return state.print("no stored sessions yet");
      const rows = await describeSessions(await state.memory.store(), sessions);
      const cells = rows.map((r, i) => [
        `${r.id === state.sessionId ? "*" : " "}${i + 1}`,
        r.id,
        String(r.messages),
        ago(r.lastActivityAt),
        r.title,
      ]);
      state.print(table([" #", "ID", "MESSAGES", "LAST ACTIVITY", "TITLE"], cells, true, state.paint).trimEnd());
    },
  },
  resume: { args: "<id | n>", help: "continue a stored session (n: its number in /sessions)", run: resume },
  newsession: {
    help: "start a new session",
    async run(state) {
      state.sessionId = newSessionId();
      state.print(`new session ${state.sessionId}`);
    },
  },
  history: {
    args: "[n]",
    help: "the last n messages of this session (default 20)",
    async run(state, arg) {
      if (arg && !/^\d+$/.test(arg)) return usage(state, "/history takes a number, e.g. /history 50");
      if (!(await stored(state))) return state.print("no messages yet");
      printMessages(
        state,
        await state.memory.getMessages(state.sessionId, {
          userId: state.userId,
          last: arg ? Number(arg) : 20,
        }),
      );
    },
  },
  search: {
    args: "<text>",
    help: "search your sessions' messages",
    async run(state, arg) {
      if (!arg) return usage(state, "/search needs some text, e.g. /search groceries");
      const hits = await state.memory.search(arg, { userId: state.userId, limit: 20, mode: "auto" });
      if (hits.length === 0) return state.print(`no messages contain "${arg}"`);
      for (const hit of hits) {
        const here = hit.sessionId === state.sessionId ? state.paint.green(" (this session)") : "";
        state.print(`${hit.sessionId} #${hit.seq} ${hit.message.role}: ${oneLine(hit.snippet, 100)}${here}`);
      }
    },
  },
  context: {
    help: "what the model will see next turn, and what is left out",
    async run(state) {
      if (!(await stored(state)))
        return state.print(
          `nothing stored yet: the model will see ${state.system.length > 0 ? "the system prompt and " : ""}your next message`,
        );
      // Passing the stored preferences leaves them in place for the real turn.
      const preferences = await state.memory.getPreferences(state.sessionId, { userId: state.userId });
      const context = await state.memory.buildContext(state.sessionId, {
        userId: state.userId,
        system: state.system,
        model: state.model,
        preferences,
      });
      state.print(
        `next turn sends ${context.messages.length} message(s) + your new one, ${context.tokens} tokens so far:`,
      );
      for (const m of context.messages)
        state.print(`  ${m.role.padEnd(10)}${m.tool_calls ? "→ tool call" : oneLine(m.content, 90)}`);
      const o = context.omitted;
      state.print(
        `left out: ${o.messages} stored message(s) (${o.tokens} tokens), ${o.summaries} summar${o.summaries === 1 ? "y" : "ies"}, ${o.truncated} shortened`,
      );
    },
  },
  summary: { help: "summarise this session now (uses the same model)", run: summarize },
  undo: {
    help: "remove the last turn (your last message and the reply)",
    async run(state) {
      if (!(await stored(state))) return state.print("nothing to undo");
      const removed = await state.memory.undoTurn(state.sessionId, { userId: state.userId });
      state.print(
        removed.length === 0
          ? "nothing to undo"
          : `removed the last turn (${removed.length} message${removed.length === 1 ? "" : "s"}): ${oneLine(removed[0].content, 60)}`,
      );
    },
  },
  fork: {
    help: "continue in a copy of this session (the original stays as it is)",
    async run(state) {
      if (!(await stored(state))) return state.print("nothing to fork yet");
      const from = state.sessionId;
      const copy = await state.memory.fork(from, { userId: state.userId });
      state.sessionId = copy.id;
      state.print(`forked: now in session ${copy.id} (a copy of ${from})`);
    },
  },
  forget: {
    help: "delete this session (asks first)",
    async run(state) {
      if (!(await stored(state))) return state.print("this session is not stored; nothing to delete");
      const answer = await state.ask(`Delete session ${state.sessionId}? [y/N] `);
      if (!answer || !/^y(es)?$/i.test(answer.trim())) return state.print("kept");
      await state.memory.deleteSession(state.sessionId, { userId: state.userId });
      const gone = state.sessionId;
      state.sessionId = newSessionId();
      state.print(`deleted ${gone}; new session ${state.sessionId}`);
    },
  },
  help: {
    help: "this list",
    async run(state) {
      state.print("Type a message to chat. Commands:");
      for (const [name, c] of Object.entries(COMMANDS))
        state.print(`  ${`/${name}${c.args ? ` ${c.args}` : ""}`.padEnd(20)}${c.help}`);
      state.print(
        "Start a message with // to send one that begins with /. Ctrl-C stops a reply; twice at the prompt quits.",
      );
    },
  },
  exit: {
    help: "quit (also /quit, Ctrl-D)",
    async run(state) {
      state.quit = true;
    },
  },
};

/** Runs one slash command line (`/name args`). Errors are reported, never thrown. */
export async function runSlashCommand(state: ChatState, line: string): Promise<void> {
  const [, name, arg = ""] = /^\/(\S*)\s*(.*)$/s.exec(line) ?? [];
  const command = COMMANDS[name === "quit" ? "exit" : name.toLowerCase()];
  if (!command) return usage(state, `Unknown command "/${name}". Type /help for the list.`);
  try {
    await command.run(state, arg.trim());
  } catch (error) {
    const known = isThreadkeepError(error);
    if (known && (error.code === "invalid_session_id" || error.code === "session_not_found"))
      return usage(state, error.message);
    state.warn(`/${name} failed: ${error instanceof Error ? error.message : String(error)}`);
    state.failures++;
  }
}
