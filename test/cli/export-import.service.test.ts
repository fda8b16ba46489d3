import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readExport } from "../../src/transfer/jsonl-format.js";
import { importSessions } from "../../src/transfer/import.js";
import type { FullStore } from "../../src/core/types.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { exportAll, seedVaried } from "./_seed.js";
import { storeKinds } from "./_stores.js";

const kinds = await storeKinds();

describe("export → import → export", () => {
  let source: FullStore;
  let original: string[];
  beforeAll(async () => {
    source = createMemoryStore({ ttlMs: 0 });
    await seedVaried(source);
    original = await exportAll(source);
  });
  afterAll(async () => {
    await source.close();
    for (const kind of kinds) await kind.cleanup();
  });

  it("writes a header, then each session's records with original seqs", () => {
    expect(JSON.parse(original[0])).toEqual({ type: "threadkeep-export", version: 2 });
    const records = original.slice(1).map((l) => JSON.parse(l));
    expect(records.filter((r) => r.type === "session")).toHaveLength(4);
    const trimmedSeqs = records
      .filter((r) => r.type === "message" && String(r.message.content).startsWith("turn"))
      .map((r) => r.message.seq);
    expect(trimmedSeqs).toEqual([5, 6, 7, 8, 9, 10, 11, 12]);
    expect(records.find((r) => r.type === "state").data.lastTaskId).toBe(42);
  });

  for (const kind of kinds) {
    it.skipIf(kind.enabled !== true)(
      `round-trips through the ${kind.name} store${kind.enabled === true ? "" : ` (${kind.enabled})`}`,
      async () => {
        const target = await kind.open();
        try {
          const first = await importSessions(target, () => original);
          expect(first.problems).toEqual([]);
          expect(first.counts.created).toBe(4);
          expect(await exportAll(target)).toEqual(original);

          const second = await importSessions(target, () => original);
          expect(second.counts).toEqual({ created: 0, appended: 0, updated: 0, unchanged: 4, diverged: 0 });
          expect(second.messagesAdded).toBe(0);
          expect(await exportAll(target)).toEqual(original);
        } finally {
          await target.close();
        }
      },
    );
  }
});

describe("import of a store that already holds some of it", () => {
  it("appends only the missing tail of a session cut short", async () => {
    const source = createMemoryStore({ ttlMs: 0 });
    await seedVaried(source);
    const lines = await exportAll(source);
    const target = createMemoryStore({ ttlMs: 0 });
    await importSessions(target, () => lines);
    const trimmed = JSON.parse(lines.find((l) => l.includes("importedSeqOffset") || l.includes('"seq":12'))!)
      .sessionId as string;
    await target.truncateAfter(trimmed, 3);
    const report = await importSessions(target, () => lines);
    expect(report.counts.appended).toBe(1);
    expect(report.messagesAdded).toBe(5);
    expect(await exportAll(target)).toEqual(lines);
  });

  it("reports a session that diverged and imports the others", async () => {
    const source = createMemoryStore({ ttlMs: 0 });
    const [tools] = await seedVaried(source);
    const lines = await exportAll(source);
    const target = createMemoryStore({ ttlMs: 0 });
    await importSessions(target, () => lines);
    await target.popMessage(tools);
    await target.appendMessages(tools, [{ role: "assistant", content: "something else" }]);
    const report = await importSessions(target, () => lines);
    expect(report.counts).toMatchObject({ unchanged: 3, diverged: 1 });
    expect(report.problems).toHaveLength(1);
    expect(report.problems[0].message).toMatch(new RegExp(`session ${tools} not imported: its message 7 differs`));
  });
});

describe("import into a store that moved on", () => {
  it("reports a session continued in the target since the export, and leaves it alone", async () => {
    const source = createMemoryStore({ ttlMs: 0 });
    const [tools] = await seedVaried(source);
    const lines = await exportAll(source);
    const target = createMemoryStore({ ttlMs: 0 });
    await importSessions(target, () => lines);
    await target.appendMessages(tools, [{ role: "user", content: "one more" }]);
    const report = await importSessions(target, () => lines);
    expect(report.counts).toMatchObject({ unchanged: 3, diverged: 1 });
    expect(report.problems[0].message).toBe(
      `session ${tools} not imported: the target holds messages up to seq 8, the source only to 7 (continued since?)`,
    );
    expect(await target.countMessages(tools)).toBe(8);
  });
});

describe("malformed input", () => {
  const lines = async () => {
    const source = createMemoryStore({ ttlMs: 0 });
    await seedVaried(source);
    return exportAll(source);
  };

  it("reports a bad line by number, skips its session and imports the rest", async () => {
    const good = await lines();
    const isMessage = (l: string) => l.startsWith('{"type":"message"');
    const first = good.findIndex(isMessage);
    const last = good.findLastIndex(isMessage);
    const { sessionId, message } = JSON.parse(good[last]);
    const bad = [...good];
    bad[first] = '{"type":"message", "sessionId": oops';
    bad.splice(
      last + 1,
      0,
      JSON.stringify({
        type: "message",
        sessionId,
        message: { seq: message.seq + 1, createdAt: 1, role: "wizard", content: "x" },
      }),
    );
    const target = createMemoryStore({ ttlMs: 0 });
    const report = await importSessions(target, () => bad);
    expect(report.problems.map((p) => [p.line, p.message.split(" (")[0]])).toEqual([
      [first + 1, "malformed JSON"],
      [last + 2, "invalid message"],
    ]);
    expect(report.problems[0].message).toMatch(/^malformed JSON \(/);
    expect(report.problems[1].message).toMatch(/role: unknown role "wizard"/);
    expect(report.problems[1].sessionId).toBe(sessionId);
    expect(report.counts.created).toBe(2);
    expect(await target.getSession(sessionId)).toBeNull();
  });

  it("with strict, imports nothing when any line is bad", async () => {
    const bad = [...(await lines()), "not json"];
    const target = createMemoryStore({ ttlMs: 0 });
    const report = await importSessions(target, () => bad, { strict: true });
    expect(report.problems).toEqual([
      { line: bad.length, message: expect.stringMatching(/^malformed JSON/), sessionId: expect.any(String) },
    ]);
    expect((await target.listAllSessions()).sessions).toEqual([]);
  });

  it("refuses records out of place and files from a newer format", async () => {
    const target = createMemoryStore({ ttlMs: 0 });
    const report = await importSessions(target, () => [
      JSON.stringify({ type: "threadkeep-export", version: 9 }),
      JSON.stringify({ type: "state", sessionId: "0b9c6c1e-3c1a-4a59-9d3c-2f9a1f0c1b2d", data: {} }),
    ]);
    expect(report.problems.map((p) => p.line)).toEqual([1, 2]);
    expect(report.problems[0].message).toMatch(/newer than this threadkeep/);
    expect(report.problems[1].message).toMatch(/must follow that session's session line/);
  });

  it("reports the records below a broken session line as one run of lines", async () => {
    const good = await lines();
    // A later session line with messages below it (the empty session has none).
    const second = good.findIndex(
      (l, i) => i > 1 && l.startsWith('{"type":"session"') && good[i + 1]?.startsWith('{"type":"message"'),
    );
    const bad = [...good];
    bad[second] = "{broken";
    const report = await importSessions(createMemoryStore({ ttlMs: 0 }), () => bad);
    expect(report.problems.map((p) => [p.line, p.toLine])).toEqual([
      [second + 1, undefined],
      [second + 2, expect.any(Number)],
    ]);
  });
});

describe("docs/cli.md", () => {
  it("shows an export example that imports without a problem", async () => {
    const doc = readFileSync(new URL("../../docs/cli.md", import.meta.url), "utf8");
    const example = /```jsonl\n([\s\S]*?)```/.exec(doc)![1].trimEnd().split("\n");
    const items = [];
    for await (const item of readExport(example)) items.push(item);
    expect(items.map((i) => i.kind)).toEqual(["bundle", "memory"]);
    const target = createMemoryStore({ ttlMs: 0 });
    expect((await importSessions(target, () => example)).problems).toEqual([]);
    expect(await exportAll(target)).toEqual(example);
  });
});

describe("files of earlier releases", () => {
  it("imports a version 1 export written by threadkeep 0.1.0 unchanged, and exports it back the same", async () => {
    const file = readFileSync(new URL("../fixtures/transfer/export-v1-release-0.1.0.jsonl", import.meta.url), "utf8");
    const lines = file.trimEnd().split("\n");
    expect(JSON.parse(lines[0])).toEqual({ type: "threadkeep-export", version: 1 });
    const target = createMemoryStore({ ttlMs: 0 });
    const report = await importSessions(target, () => lines);
    expect(report.problems).toEqual([]);
    expect(report.counts.created).toBe(4);
    // Only the header's version changes: every record reads back as the 0.1.0 file wrote it.
    expect((await exportAll(target)).slice(1)).toEqual(lines.slice(1));
  });
});
