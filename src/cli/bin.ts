#!/usr/bin/env node
import { main } from "./index.js";

// `threadkeep sessions list | head` closes the pipe early: the reader has what it wants, so the
// output ends quietly (exit 0) instead of with an EPIPE stack trace.
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code === "EPIPE") process.exit(0);
    throw error;
  });
}

main().then(
  (code) => {
    // Long-running commands (serve, chat) keep the process alive themselves; others end here.
    if (code !== 0) process.exit(code);
  },
  (error) => {
    process.stderr.write(`threadkeep: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
