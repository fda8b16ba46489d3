/** Drives `startChat` through pipes: type a line, wait for what the chat prints. */
import { PassThrough } from "node:stream";
import { type ChatController, type ChatOptions, startChat } from "../../src/cli/chat.js";

/** A chat under test. */
export interface ChatDriver {
  chat: ChatController;
  /** Length of everything printed so far (both streams), to pass as `since`. */
  mark(): number;
  /** Everything printed to standard output so far. */
  out(): string;
  /** Everything printed to standard error so far. */
  err(): string;
  /** Types a line. */
  send(line: string): void;
  /** Waits until standard output and error together (from `since`, default all) match. */
  waitFor(pattern: RegExp, since?: number, timeoutMs?: number): Promise<string>;
  /** Types a line and waits until the output after it matches. @returns the output since the line */
  say(line: string, pattern: RegExp): Promise<string>;
  /** Ends the input and waits for the exit code. */
  end(): Promise<number>;
}

/** Starts a chat with piped (non-terminal) input and output. */
export function driveChat(options: Omit<ChatOptions, "input" | "output" | "errorOutput">): ChatDriver {
  const input = new PassThrough();
  const output = new PassThrough();
  const errors = new PassThrough();
  let out = "";
  let err = "";
  // Both streams in arrival order, so "what came after this line" has one meaning.
  let all = "";
  output.on("data", (d) => {
    out += d;
    all += d;
  });
  errors.on("data", (d) => {
    err += d;
    all += d;
  });
  const chat = startChat({ ...options, input, output, errorOutput: errors });
  const both = () => all;
  const waitFor = async (pattern: RegExp, since = 0, timeoutMs = 5000) => {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const text = both().slice(since);
      if (pattern.test(text)) return text;
      if (Date.now() > until)
        throw new Error(`timed out waiting for ${pattern}; output so far:\n${out}\n--- stderr:\n${err}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  return {
    chat,
    mark: () => all.length,
    out: () => out,
    err: () => err,
    send: (line) => input.write(`${line}\n`),
    waitFor,
    async say(line, pattern) {
      const since = both().length;
      input.write(`${line}\n`);
      return waitFor(pattern, since);
    },
    async end() {
      input.end();
      return chat.done;
    },
  };
}
