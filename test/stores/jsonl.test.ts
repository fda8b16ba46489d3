import {
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
import { createFileStore } from "../../src/stores/file/index.js";
import { expectCode, runStoreConformance } from "../../src/testing/index.js";
import { linesOf, open, quarantined, seeded, sessionFile, text } from "./_jsonl-fixtures.js";

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

let dirs = 0;
const freshDir = () => join(root, `case-${++dirs}`);

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
    await store.appendMessages(session.id, [text("Welke producten heb je daarvoor? 🍎"), text("line one\nline two")]);
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
    await expectCode(store.setState(session.id, null as unknown as Record<string, unknown>, 0), "invalid_request");
    await expectCode(
      store.updateSessionMetadata(session.id, [] as unknown as Record<string, unknown>),
      "invalid_request",
    );
    await expectCode(
      store.saveSummary(session.id, { fromSeq: 1, toSeq: 2, content: 7 as unknown as string }),
      "invalid_request",
    );
    await expectCode(store.appendMessages(session.id, [{ ...text("x"), metadata: { n: 1n } }]), "invalid_request");
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
