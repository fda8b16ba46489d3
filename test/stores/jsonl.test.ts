import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import type { MessageInput } from "../../src/core/types.js";
import { createFileStore, type FileStoreOptions } from "../../src/stores/jsonl.js";
import { expectCode, runStoreConformance } from "../../src/testing/index.js";

const root = mkdtempSync(join(tmpdir(), "threadkeep-file-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

// One directory for every create, so the persistence test reopens what it wrote.
const conformanceDir = join(root, "conformance");
const conformanceWarnings: string[] = [];
runStoreConformance("file", () =>
  createFileStore({ dir: conformanceDir, onWarning: (m) => conformanceWarnings.push(m) }),
);

// Again with every write synced and a one-session cache, so nearly every read replays a file.
const strictDir = join(root, "conformance-strict");
runStoreConformance("file (fsync, cacheSize 1)", () =>
  createFileStore({
    dir: strictDir,
    fsync: true,
    cacheSize: 1,
    onWarning: (m) => conformanceWarnings.push(m),
  }),
);

const text = (content: string): MessageInput => ({ role: "user", content });
let dirs = 0;
const freshDir = () => join(root, `case-${++dirs}`);

/** A store on `dir` whose warnings are collected. */
function open(dir: string, extra: Partial<FileStoreOptions> = {}) {
  const warnings: string[] = [];
  const store = createFileStore({ dir, onWarning: (m) => warnings.push(m), ...extra });
  return { store, warnings };
}

const sessionFile = (dir: string, id: string) => join(dir, "sessions", `${id}.jsonl`);
const linesOf = (path: string) =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l !== "");
const quarantined = (dir: string) =>
  existsSync(join(dir, "quarantine"))
    ? readdirSync(join(dir, "quarantine")).flatMap((name) =>
        linesOf(join(dir, "quarantine", name)).map((l) => JSON.parse(l)),
      )
    : [];

/** A session with `n` messages in a closed store. */
async function seeded(dir: string, n: number, userId = "u1") {
  const { store } = open(dir);
  const session = await store.createSession({ id: newSessionId(), userId });
  await store.appendMessages(
    session.id,
    Array.from({ length: n }, (_, i) => text(`m${i + 1}`)),
  );
  await store.close();
  return session;
}

describe("file store specifics", () => {
  it("ran the conformance suite without a single warning", () => {
    expect(conformanceWarnings).toEqual([]);
  });

  it("writes a cat-able JSONL file: a header, then one message per line", async () => {
    const dir = freshDir();
    const { store } = open(dir);
    const session = await store.createSession({
      id: newSessionId(),
      userId: "u1",
      metadata: { title: "Boodschappen" },
    });
    await store.appendMessages(session.id, [
      text("Welke producten heb je daarvoor? 🍎"),
      text("line one\nline two"),
    ]);
    await store.appendMessages(session.id, [{ role: "assistant", content: "Appels." }]);
    await store.close();
    const raw = readFileSync(sessionFile(dir, session.id), "utf8");
    expect(raw).toContain("🍎");
    expect(raw.endsWith("\n")).toBe(true);
    const records = linesOf(sessionFile(dir, session.id)).map((l) => JSON.parse(l));
    expect(records[0]).toMatchObject({
      type: "session",
      id: session.id,
      userId: "u1",
      metadata: { title: "Boodschappen" },
    });
    expect(records.slice(1).map((r) => [r.type, r.message.seq, r.message.content])).toEqual([
      ["message", 1, "Welke producten heb je daarvoor? 🍎"],
      ["message", 2, "line one\nline two"],
      ["message", 3, "Appels."],
    ]);
    const index = linesOf(join(dir, "index.jsonl")).map((l) => JSON.parse(l));
    expect(index).toEqual([expect.objectContaining({ type: "session", id: session.id, userId: "u1" })]);
  });

  it("quarantines a torn last line, warns, and carries on with contiguous seq", async () => {
    const dir = freshDir();
    const session = await seeded(dir, 3);
    const torn = '{"type":"message","message":{"seq":4,"createdAt":17';
    appendFileSync(sessionFile(dir, session.id), torn);
    const { store, warnings } = open(dir);
    expect((await store.getMessages(session.id)).map((m) => m.content)).toEqual(["m1", "m2", "m3"]);
    expect(warnings.join("\n")).toMatch(/moved 1 bad line\(s\) of session .*\(line 5: torn/);
    expect(quarantined(dir)).toEqual([
      expect.objectContaining({ file: `sessions/${session.id}.jsonl`, line: 5, text: torn }),
    ]);
    await store.appendMessages(session.id, [text("m4"), text("m5")]);
    await store.close();
    for (const line of linesOf(sessionFile(dir, session.id))) expect(() => JSON.parse(line)).not.toThrow();
    const again = open(dir);
    expect((await again.store.getMessages(session.id)).map((m) => m.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(again.warnings).toEqual([]);
    await again.store.close();
  });

  it("keeps a batch all or none: the complete lines of a write cut short go to quarantine too", async () => {
    const dir = freshDir();
    const session = await seeded(dir, 1);
    const line = (seq: number, more: number) =>
      JSON.stringify({
        type: "message",
        more,
        message: { role: "user", content: `b${seq}`, seq, createdAt: 1 },
      });
    appendFileSync(sessionFile(dir, session.id), `${line(2, 2)}\n${line(3, 1)}\n{"type":"mess`);
    const { store, warnings } = open(dir);
    expect((await store.getMessages(session.id)).map((m) => m.content)).toEqual(["m1"]);
    expect(warnings).toHaveLength(1);
    expect(quarantined(dir).map((q) => q.line)).toEqual([3, 4, 5]);
    expect((await store.appendMessages(session.id, [text("next")]))[0].seq).toBe(2);
    await store.close();
  });

  it("quarantines a corrupt line in the middle and keeps every other line", async () => {
    const dir = freshDir();
    const session = await seeded(dir, 5);
    const path = sessionFile(dir, session.id);
    const lines = linesOf(path);
    lines[2] = "garbage {not json";
    writeFileSync(path, `${lines.join("\n")}\n`);
    const { store, warnings } = open(dir);
    expect((await store.getMessages(session.id)).map((m) => m.content)).toEqual(["m1", "m3", "m4", "m5"]);
    expect(warnings).toHaveLength(1);
    expect(quarantined(dir)).toEqual([expect.objectContaining({ line: 3, text: "garbage {not json" })]);
    expect((await store.appendMessages(session.id, [text("m6")]))[0].seq).toBe(6);
    await store.close();
    // The file was rewritten without the bad line, so a reopen finds nothing more to quarantine.
    const again = open(dir);
    expect(await again.store.countMessages(session.id)).toBe(5);
    expect(again.warnings).toEqual([]);
    expect(quarantined(dir)).toHaveLength(1);
    await again.store.close();
  });

  it("stands the index's copy in for a corrupt session header", async () => {
    const dir = freshDir();
    const session = await seeded(dir, 2, "owner-7");
    const path = sessionFile(dir, session.id);
    const lines = linesOf(path);
    lines[0] = lines[0].slice(0, 20);
    writeFileSync(path, `${lines.join("\n")}\n`);
    const { store, warnings } = open(dir);
    expect((await store.getSession(session.id))?.userId).toBe("owner-7");
    expect(await store.countMessages(session.id)).toBe(2);
    expect(warnings).toHaveLength(1);
    await store.close();
    expect(JSON.parse(linesOf(path)[0])).toMatchObject({ type: "session", userId: "owner-7" });
  });

  it("rebuilds a deleted or corrupt index from the session files", async () => {
    const dir = freshDir();
    const first = open(dir);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const s = await first.store.createSession({
        id: newSessionId(),
        userId: "u1",
        metadata: { n: i },
        lastActivityAt: 1000 * (i + 1),
      });
      ids.push(s.id);
    }
    await first.store.appendMessages(ids[0], [text("now")]);
    await first.store.close();
    const expected = [ids[0], ids[2], ids[1]];

    rmSync(join(dir, "index.jsonl"));
    const rebuilt = open(dir);
    expect((await rebuilt.store.listSessions("u1")).sessions.map((s) => s.id)).toEqual(expected);
    expect(rebuilt.warnings.join()).toMatch(/index missing; rebuilding it from 3 session files/);
    await rebuilt.store.close();
    expect(linesOf(join(dir, "index.jsonl"))).toHaveLength(3);

    appendFileSync(join(dir, "index.jsonl"), "{{{ not an index line\n");
    const repaired = open(dir);
    const page = await repaired.store.listSessions("u1");
    expect(page.sessions.map((s) => s.id)).toEqual(expected);
    expect(page.sessions.map((s) => s.metadata.n)).toEqual([0, 2, 1]);
    expect(repaired.warnings.join()).toMatch(/index corrupt at line 4/);
    expect(readdirSync(join(dir, "quarantine")).some((n) => n.startsWith("index."))).toBe(true);
    await repaired.store.close();
  });

  it("reconciles an index that missed the last writes before a crash", async () => {
    const dir = freshDir();
    const session = await seeded(dir, 1);
    // A write the index never heard of, and a session file it does not list.
    appendFileSync(sessionFile(dir, session.id), `${JSON.stringify({ type: "touch", at: 4242 })}\n`);
    const orphan = newSessionId();
    const header = {
      type: "session",
      v: 1,
      id: orphan,
      userId: "u1",
      createdAt: 5,
      lastActivityAt: 5,
      metadata: {},
    };
    writeFileSync(sessionFile(dir, orphan), `${JSON.stringify(header)}\n`);
    const { store, warnings } = open(dir);
    expect((await store.getSession(session.id))?.lastActivityAt).toBe(4242);
    expect((await store.listSessions("u1")).sessions.map((s) => s.id)).toEqual([session.id, orphan]);
    expect(await store.expire(5000)).toEqual(expect.arrayContaining([session.id, orphan]));
    expect(readdirSync(join(dir, "sessions"))).toEqual([]);
    expect(warnings).toEqual([]);
    await store.close();
  });

  it("keeps a capped session's file small by compacting it", async () => {
    const dir = freshDir();
    const { store } = open(dir);
    const session = await store.createSession({ id: newSessionId(), userId: "u1" });
    for (let i = 1; i <= 500; i++)
      await store.appendMessages(session.id, [text(`message number ${i}`)], { maxMessages: 5 });
    const path = sessionFile(dir, session.id);
    expect(linesOf(path).length).toBeLessThan(100);
    expect(statSync(path).size).toBeLessThan(16 * 1024);
    await store.close();
    const again = open(dir);
    expect((await again.store.getMessages(session.id)).map((m) => m.seq)).toEqual([496, 497, 498, 499, 500]);
    expect(again.warnings).toEqual([]);
    await again.store.close();
  });

  it("compacts without losing summaries, state, metadata or a past activity time", async () => {
    const dir = freshDir();
    const { store } = open(dir, { compactAfter: 1 });
    const session = await store.createSession({ id: newSessionId(), userId: "u1" });
    await store.appendMessages(
      session.id,
      Array.from({ length: 10 }, (_, i) => text(`m${i + 1}`)),
    );
    await store.saveSummary(session.id, { fromSeq: 1, toSeq: 3, content: "early", metadata: { by: "test" } });
    await store.setState(session.id, { step: 2 }, 0);
    await store.updateSessionMetadata(session.id, { title: "kept" });
    await store.truncateAfter(session.id, 6);
    await store.touchSession(session.id, 1234);
    await store.popMessage(session.id);
    await store.popMessage(session.id);
    await store.close();
    expect(linesOf(sessionFile(dir, session.id)).length).toBeLessThan(12);
    const again = open(dir);
    expect(await again.store.getSession(session.id)).toMatchObject({
      lastActivityAt: 1234,
      metadata: { title: "kept" },
    });
    expect((await again.store.getMessages(session.id)).map((m) => m.seq)).toEqual([1, 2, 3, 4]);
    expect((await again.store.listSummaries(session.id))[0]).toMatchObject({
      id: 1,
      content: "early",
      metadata: { by: "test" },
    });
    expect(await again.store.getState(session.id)).toEqual({ version: 1, data: { step: 2 } });
    expect((await again.store.saveSummary(session.id, { fromSeq: 4, toSeq: 4, content: "x" })).id).toBe(2);
    await again.store.close();
  });

  it("refuses what it could not read back, and serves what a reload would", async () => {
    const dir = freshDir();
    const { store } = open(dir);
    const when = new Date(Date.UTC(2026, 0, 2));
    const session = await store.createSession({ id: newSessionId(), userId: "u", metadata: { when } });
    expect(session.metadata.when).toBe(when.toISOString());
    await store.appendMessages(session.id, [text("a"), text("b"), text("c")]);
    const before = readFileSync(sessionFile(dir, session.id), "utf8");
    await expectCode(store.touchSession(session.id, Number.NaN), "invalid_request");
    await expectCode(
      store.setState(session.id, null as unknown as Record<string, unknown>, 0),
      "invalid_request",
    );
    await expectCode(
      store.updateSessionMetadata(session.id, [] as unknown as Record<string, unknown>),
      "invalid_request",
    );
    await expectCode(
      store.saveSummary(session.id, { fromSeq: 1, toSeq: 2, content: 7 as unknown as string }),
      "invalid_request",
    );
    await expectCode(
      store.appendMessages(session.id, [{ ...text("x"), metadata: { n: 1n } }]),
      "invalid_request",
    );
    expect(readFileSync(sessionFile(dir, session.id), "utf8")).toBe(before);
    expect(await store.truncateAfter(session.id, 1.5)).toBe(2);
    const [stored] = await store.appendMessages(session.id, [{ ...text("d"), metadata: { at: when } }], {
      maxMessages: 2.7,
    });
    expect(stored.metadata).toEqual({ at: when.toISOString() });
    const live = await store.getMessages(session.id);
    await store.close();
    const again = open(dir);
    expect(await again.store.getMessages(session.id)).toEqual(live);
    expect(live.map((m) => m.content)).toEqual(["a", "d"]);
    expect(again.warnings).toEqual([]);
    await again.store.close();
  });

  it("never builds a path from an invalid id", async () => {
    const dir = freshDir();
    const { store } = open(dir);
    for (const id of ["../../escape", "..", "a/b", `${newSessionId()}/../x`, ""]) {
      expect(await store.getSession(id)).toBeNull();
      expect(await store.getMessages(id)).toEqual([]);
      expect(await store.deleteSession(id)).toBe(false);
      await expectCode(store.appendMessages(id, [text("x")]), "session_not_found");
      await expectCode(store.createSession({ id, userId: "u" }), "invalid_session_id");
    }
    expect(readdirSync(join(dir, "sessions"))).toEqual([]);
    expect(existsSync(join(root, "escape.jsonl"))).toBe(false);
    // Ids are case-insensitive, as on a case-insensitive filesystem.
    const upper = newSessionId().toUpperCase();
    await store.createSession({ id: upper, userId: "u" });
    expect((await store.getSession(upper.toLowerCase()))?.id).toBe(upper);
    expect(readdirSync(join(dir, "sessions"))).toEqual([`${upper.toLowerCase()}.jsonl`]);
    await store.close();
  });

  it("reports filesystem failures as store_unavailable with the cause", async () => {
    const dir = freshDir();
    writeFileSync(dir, "a file where the directory should be");
    const blocked = open(dir).store;
    const error = await blocked.getSession(newSessionId()).catch((e) => e);
    expect(error).toMatchObject({ code: "store_unavailable" });
    expect(error.cause).toBeDefined();
    await blocked.close();

    const other = freshDir();
    const { store } = open(other);
    const session = await store.createSession({ id: newSessionId(), userId: "u" });
    rmSync(sessionFile(other, session.id));
    mkdirSync(sessionFile(other, session.id));
    await expectCode(store.appendMessages(session.id, [text("x")]), "store_unavailable");
    await store.close();
  });

  it("refuses a session file written by a newer format", async () => {
    const dir = freshDir();
    const session = await seeded(dir, 1);
    const path = sessionFile(dir, session.id);
    const [header, ...rest] = linesOf(path);
    writeFileSync(path, [JSON.stringify({ ...JSON.parse(header), v: 99 }), ...rest, ""].join("\n"));
    const { store } = open(dir);
    await expectCode(store.getMessages(session.id), "schema_version_unsupported");
    expect(quarantined(dir)).toEqual([]);
    await store.close();
  });

  it("refuses work after close", async () => {
    const { store } = open(freshDir());
    await store.close();
    await expectCode(store.getSession(newSessionId()), "store_unavailable");
  });
});
