/**
 * `threadkeep chat`: an interactive chat with any OpenAI-compatible model, kept in the configured
 * store. The loop runs over any input/output streams, so tests drive it with pipes; prompts and
 * colour appear only on a terminal.
 */
import { createInterface } from "node:readline";
import type { Command } from "commander";
import { describeCommand } from "./_commands.js";
import { isThreadkeepError, ThreadkeepError } from "../core/errors.js";
import { newSessionId, parseSessionId } from "../core/ids.js";
import type { Memory } from "../core/memory/memory.js";
import { createMemory } from "../create-memory.js";
import {
  addEmbeddingOptions,
  addRecallOptions,
  type RecallFlags,
  recallMemoryOptions,
  resolveRecallConfig,
} from "./_recall-options.js";
import type { ChatMessage } from "../core/types.js";
import { createUpstream, StreamAccumulator, type Upstream } from "../llm/openai-compatible.js";
import { type ChatState, printMessages, runSlashCommand } from "./_chat-commands.js";
import { type Output, paintFor } from "./_format.js";
import { addStoreOptions, addUpstreamOptions, type ConfigFlags, resolveConfig } from "./options.js";

/** Options of {@link startChat}. */
export interface ChatOptions {
  memory: Memory;
  /** Owner of the sessions. @default "default" */
  userId?: string;
  /** The model's API; without one the chat still browses and searches stored sessions. */
  upstream?: Upstream;
  model?: string;
  /** A system prompt sent first on every turn (not stored). */
  system?: string;
  input: NodeJS.ReadableStream & { isTTY?: boolean };
  output: Output;
  /** Errors and warnings. @default output */
  errorOutput?: Output;
  /** Continue this session (created on the first message if it does not exist). */
  sessionId?: string;
  /** Continue the most recently active session. */
  resume?: boolean;
  /** Shown in the banner. */
  storeLabel?: string;
}

/** A running chat. */
export interface ChatController {
  /** Resolves with the exit code when the chat ends (0; with non-terminal input, 1 after a failed turn, else 2 after a command not understood). */
  done: Promise<number>;
  /** What Ctrl-C does: stops the reply being streamed, or at the prompt asks once and quits the second time. */
  interrupt(): void;
  /** The current session id. */
  sessionId(): string;
}

/** The advice printed when no model is configured. */
export const NO_UPSTREAM_HELP =
  "No model configured: set --upstream <url> (or THREADKEEP_UPSTREAM_URL), e.g. http://127.0.0.1:11434/v1, and --model <name> " +
  "(or THREADKEEP_MODEL); add --upstream-key (THREADKEEP_UPSTREAM_API_KEY) if it needs a key. " +
  "Meanwhile /sessions, /resume, /history, /search and /context work.";

/** Starts a chat on the given streams. */
export function startChat(options: ChatOptions): ChatController {
  const { memory, output } = options;
  const errorOutput = options.errorOutput ?? output;
  const interactive = options.input.isTTY === true && output.isTTY === true;
  const paint = paintFor(output);
  const rl = createInterface({
    input: options.input,
    output: interactive ? output : undefined,
    terminal: interactive,
  });
  const lines = rl[Symbol.asyncIterator]();
  let streaming: AbortController | undefined;
  let asking = false;
  let lastInterrupt = 0;

  const state: ChatState = {
    memory,
    userId: options.userId ?? "default",
    upstream: options.upstream,
    model: options.model,
    system: options.system ? [{ role: "system", content: options.system }] : [],
    paint,
    sessionId: options.sessionId ? parseSessionId(options.sessionId) : newSessionId(),
    listed: [],
    print: (text) => void output.write(`${text}\n`),
    warn: (text) => void errorOutput.write(`${paint.red(text)}\n`),
    async ask(question) {
      output.write(question);
      asking = true;
      try {
        const next = await lines.next();
        return next.done ? null : next.value;
      } finally {
        asking = false;
      }
    },
    usageErrors: 0,
    failures: 0,
    quit: false,
  };

  const interrupt = () => {
    if (streaming) return streaming.abort();
    if (asking) return rl.write("\n");
    if (Date.now() - lastInterrupt < 2000) {
      state.quit = true;
      rl.close();
      return;
    }
    lastInterrupt = Date.now();
    output.write(paint.dim("\n(Ctrl-C again or /exit to quit)\n"));
    if (interactive) rl.prompt();
  };
  rl.on("SIGINT", interrupt);

  async function turn(text: string): Promise<void> {
    const upstream = state.upstream;
    if (!upstream) {
      state.warn(NO_UPSTREAM_HELP);
      state.failures++;
      return;
    }
    const user: ChatMessage = { role: "user", content: text };
    const sessionId = state.sessionId;
    await memory.runTurn(sessionId, async (lease) => {
      // Resolved once for the turn; a new session is created by the turn's append, so a turn that
      // fails first leaves nothing behind.
      const owner = { userId: state.userId };
      const session = await memory.getSession(sessionId, owner).catch((error) => {
        if (isThreadkeepError(error, "session_not_found")) return undefined;
        throw error;
      });
      const context = await memory.buildContext(sessionId, {
        session,
        userId: state.userId,
        input: [user],
        system: state.system,
        model: state.model,
      });
      const abort = new AbortController();
      streaming = abort;
      const reply = new StreamAccumulator();
      if (interactive) output.write(paint.cyan("ai> "));
      try {
        const body = { ...(state.model ? { model: state.model } : {}), messages: context.messages };
        for await (const event of await upstream.streamChat(body, { signal: abort.signal })) {
          reply.add(event.chunk);
          const delta = event.chunk?.choices?.[0]?.delta?.content;
          if (typeof delta === "string" && delta) output.write(delta);
        }
      } catch (error) {
        if (!abort.signal.aborted) {
          output.write("\n");
          // The model failed: nothing of this turn is stored.
          state.warn(`The model failed, nothing was stored: ${error instanceof Error ? error.message : String(error)}`);
          state.failures++;
          return;
        }
      } finally {
        streaming = undefined;
      }
      const incomplete = abort.signal.aborted;
      output.write(incomplete ? paint.yellow(" [stopped]\n") : "\n");
      // What was shown is what is kept: a stopped reply is stored, marked incomplete.
      await memory.addMessages(sessionId, [user, { ...reply.message(), ...(incomplete ? { incomplete: true } : {}) }], {
        ...owner,
        fence: lease.fence,
        session,
      });
    });
  }

  async function banner(): Promise<void> {
    if (options.resume && !options.sessionId) {
      const [latest] = (await memory.listSessions({ userId: state.userId, limit: 1 })).sessions;
      if (latest) state.sessionId = latest.id;
      else state.print("no stored session to resume; starting a new one");
    }
    const exists = await memory.getSession(state.sessionId, { userId: state.userId }).catch(() => null);
    const recent = exists ? await memory.getMessages(state.sessionId, { userId: state.userId, last: 2 }) : [];
    const where = [options.model && `model ${options.model}`, options.storeLabel && `store ${options.storeLabel}`]
      .filter(Boolean)
      .join(" · ");
    state.print(paint.dim(`threadkeep chat${where ? ` · ${where}` : ""}`));
    state.print(
      `session ${state.sessionId} ${exists ? (recent.length > 0 ? "(resumed)" : "(resumed, empty)") : "(new)"}`,
    );
    printMessages(state, recent);
    if (!state.upstream) state.warn(NO_UPSTREAM_HELP);
    if (interactive) state.print(paint.dim("Type a message, or /help for commands."));
  }

  async function loop(): Promise<number> {
    await banner();
    while (!state.quit) {
      if (interactive) {
        rl.setPrompt(paint.bold("you> "));
        rl.prompt();
      }
      const next = await lines.next();
      if (next.done) break;
      const line = next.value.trim();
      if (line === "") continue;
      try {
        if (line.startsWith("/") && !line.startsWith("//")) await runSlashCommand(state, line);
        else await turn(line.startsWith("//") ? line.slice(1) : line);
      } catch (error) {
        state.warn(`error: ${error instanceof Error ? error.message : String(error)}`);
        state.failures++;
      }
    }
    if (await memory.getSession(state.sessionId, { userId: state.userId }).catch(() => null)) {
      state.print(
        paint.dim(
          `session ${state.sessionId} is kept; continue with: threadkeep chat --session ${state.sessionId} (or --resume)`,
        ),
      );
    }
    if (interactive) return 0;
    return state.failures > 0 ? 1 : state.usageErrors > 0 ? 2 : 0;
  }

  const done = loop().finally(() => {
    rl.off("SIGINT", interrupt);
    rl.close();
  });
  return { done, interrupt, sessionId: () => state.sessionId };
}

/** Adds `threadkeep chat`. */
export function register(program: Command): void {
  const command = program
    .command("chat")
    .description(describeCommand("chat"))
    .option("--resume", "continue the most recently active session")
    .option("--session <id>", "continue (or start) the session with this id")
    .option("--user <id>", 'owner of the sessions (env THREADKEEP_USER; default "default")')
    .option("--system <text>", "system prompt sent on every turn (not stored)");
  addStoreOptions(addRecallOptions(addEmbeddingOptions(addUpstreamOptions(command)))).addHelpText(
    "after",
    `
Slash commands: /sessions /resume <id|n> /newsession /history [n] /search <text> /context /summary
/undo /fork /forget /help /exit. Replies stream as they arrive; Ctrl-C stops a reply (kept, marked
incomplete), Ctrl-C twice at the prompt quits. Without a model configured, the chat still browses and
searches stored sessions. With input from a pipe the exit code is 1 if a turn failed, 2 if a command
was not understood.

Example:
  threadkeep chat --upstream http://127.0.0.1:11434/v1 --model llama3.2 --store sqlite:./data/threadkeep.db`,
  );
  command.action(
    async (
      flags: ConfigFlags & RecallFlags & { resume?: boolean; session?: string; user?: string; system?: string },
    ) => {
      const config = resolveConfig(flags);
      if (flags.resume && flags.session)
        throw new ThreadkeepError("invalid_request", "Use --resume or --session, not both");
      const sessionId = flags.session === undefined ? undefined : parseSessionId(flags.session);
      const upstream = config.upstreamUrl
        ? createUpstream({
            baseUrl: config.upstreamUrl,
            apiKey: config.upstreamKey,
            timeoutMs: config.upstreamTimeoutMs,
          })
        : undefined;
      const memory = createMemory({
        store: config.store,
        window: config.window,
        tokenBudget: config.tokenBudget,
        maxMessages: config.maxMessages,
        ttlMs: config.ttlMs,
        leaseTtlMs: config.leaseTtlMs,
        defaultUserId: flags.user ?? (process.env.THREADKEEP_USER || "default"),
        ...recallMemoryOptions(resolveRecallConfig(flags), config, upstream),
      });
      await memory.store();
      const chat = startChat({
        memory,
        userId: memory.settings.defaultUserId,
        upstream,
        model: config.model,
        system: flags.system,
        input: process.stdin,
        output: process.stdout,
        errorOutput: process.stderr,
        sessionId,
        resume: flags.resume,
        storeLabel: config.store,
      });
      // Off a terminal Ctrl-C arrives as a signal rather than through readline.
      process.on("SIGINT", chat.interrupt);
      try {
        const code = await chat.done;
        if (code === 1) throw new Error("a turn or command failed (see above)");
        if (code === 2) throw new ThreadkeepError("invalid_request", "a command was not understood (see above)");
      } finally {
        process.off("SIGINT", chat.interrupt);
        await memory.close();
        process.stdin.pause();
      }
    },
  );
}
