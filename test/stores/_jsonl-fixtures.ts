/** Fixtures shared by the file store tests (jsonl, jsonl-recovery). */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { newSessionId } from "../../src/core/ids.js";
import type { MessageInput } from "../../src/core/types.js";
import { createFileStore, type FileStoreOptions } from "../../src/stores/file/index.js";

/** A user message with `content`. */
export const text = (content: string): MessageInput => ({ role: "user", content });

/** A store on `dir` whose warnings are collected. */
export function open(dir: string, extra: Partial<FileStoreOptions> = {}) {
  const warnings: string[] = [];
  const store = createFileStore({ dir, onWarning: (m) => warnings.push(m), ...extra });
  return { store, warnings };
}

/** The file of session `id` in the store on `dir`. */
export const sessionFile = (dir: string, id: string) => join(dir, "sessions", `${id}.jsonl`);
/** The non-empty lines of a file. */
export const linesOf = (path: string) =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l !== "");
/** Every record the store on `dir` put in quarantine. */
export const quarantined = (dir: string) =>
  existsSync(join(dir, "quarantine"))
    ? readdirSync(join(dir, "quarantine")).flatMap((name) =>
        linesOf(join(dir, "quarantine", name)).map((l) => JSON.parse(l)),
      )
    : [];

/** A session with `n` messages in a closed store. */
export async function seeded(dir: string, n: number, userId = "u1") {
  const { store } = open(dir);
  const session = await store.createSession({ id: newSessionId(), userId });
  await store.appendMessages(
    session.id,
    Array.from({ length: n }, (_, i) => text(`m${i + 1}`)),
  );
  await store.close();
  return session;
}
