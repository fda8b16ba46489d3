import { appendFileSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { linesOf, open, quarantined, seeded, sessionFile, text } from "./_jsonl-fixtures.js";

const root = mkdtempSync(join(tmpdir(), "threadkeep-file-recovery-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const freshDir = () => join(root, `case-${++dirs}`);

describe("file store recovery", () => {
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
});
