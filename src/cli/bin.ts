#!/usr/bin/env node
import { main } from "./index.js";

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
