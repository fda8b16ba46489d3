/**
 * The SQLite store's full-text search and index. Since schema v8 each session records how far it is
 * indexed (`fts_seq`), and since v9 a session whose messages wait is a row of `fts_queue`; the indexer
 * works in bounded steps.
 */
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { newSessionId } from "../../src/core/ids.js";
import { LocalLeases } from "../../src/stores/_lease.js";
import { openSqliteStoreDb } from "../../src/stores/sqlite/_db.js";
import { scopedMatch } from "../../src/stores/sqlite/_fulltext.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { watchEventLoop } from "../_event-loop-gaps.js";
import { sqliteV7File } from "./_sqlite-v7-file.js";
import { sqliteStoresPerTest, sqliteTempFiles } from "../stores/_sqlite-files.js";

const { freshPath } = sqliteTempFiles("threadkeep-sqlite-fulltext-");
const say = (content: string) => ({ role: "user" as const, content });
const rowsIn = (db: Database.Database) => db.prepare("SELECT count(*) FROM messages_fts").pluck().get() as number;
/** Messages not yet in the full-text index: above their session's indexed seq. */
const unindexed = (db: Database.Database) =>
  db
    .prepare("SELECT count(*) FROM messages m JOIN sessions s ON s.id = m.session_id WHERE m.seq > s.fts_seq")
    .pluck()
    .get() as number;

/** {@link unindexed}, of one owner's sessions. */
const unindexedOf = (db: Database.Database, userId: string) =>
  db
    .prepare(
      "SELECT count(*) FROM messages m JOIN sessions s ON s.id = m.session_id WHERE m.seq > s.fts_seq AND s.user_id = ?",
    )
    .pluck()
    .get(userId) as number;
/** Sessions marked as having messages wait for the index. */
const pendingSessions = (db: Database.Database) => db.prepare("SELECT count(*) FROM fts_queue").pluck().get() as number;

/** Runs `fn` under a 5 ms interval timer. @returns its result and the longest the timer waited. */
async function timed<T>(fn: () => Promise<T>): Promise<{ result: T; maxGap: number }> {
  const watch = watchEventLoop(5);
  try {
    const result = await fn();
    return { result, maxGap: watch.stop() };
  } finally {
    watch.stop();
  }
}

/** A schema v7 file (its upgrade leaves every message waiting): `perSession` messages in each session. */
const olderFile = (path: string, sessions: { id: string; userId: string }[], perSession: number) => {
  const old = sqliteV7File(path);
  old.transaction(() => {
    for (const { id, userId } of sessions) {
      old.session(id, userId);
      for (let seq = 1; seq <= perSession; seq++) old.message(id, seq, `waiting ${seq}`);
    }
  });
  old.close();
};

describe("sqlite full-text index", () => {
  const { storeAt } = sqliteStoresPerTest();

  it("searches full text with ranking-free newest-first order and FTS syntax taken literally", async () => {
    const store = storeAt(freshPath());
    const session = await store.createSession({ id: newSessionId(), userId: "u" });
    await store.appendMessages(session.id, [
      { role: "user", content: "Buy groceries: apples AND pears" },
      { role: "assistant", content: "Added apples and pears (NEAR the milk)." },
      { role: "user", content: [{ type: "text", text: "Zoek mijn boodschappenlijst" }] },
    ]);
    const q = (text: string) => store.search({ userId: "u", text, mode: "fulltext" });
    expect((await q("apples pears")).map((h) => h.seq)).toEqual([2, 1]);
    expect((await q("NEAR(")).map((h) => h.seq)).toEqual([2]);
    expect((await q("boodschappenlijst")).map((h) => h.snippet)).toEqual(["Zoek mijn boodschappenlijst"]);
    expect(await q('apples "pears')).toHaveLength(2);
    expect(await q("-apples* ^ :")).toBeInstanceOf(Array);
    await store.popMessage(session.id);
    expect(await q("boodschappenlijst")).toEqual([]);
  });

  it("indexes new text in batches and keeps the full-text index exact through every kind of delete", async () => {
    const path = freshPath();
    const store = storeAt(path, { fullTextIndexDelayMs: 20 });
    const say = (content: string) => ({ role: "user" as const, content });
    const a = await store.createSession({ id: newSessionId(), userId: "u" });
    const b = await store.createSession({ id: newSessionId(), userId: "u" });
    // Opened once the store has created the file.
    const raw = new Database(path);
    const pending = () => unindexed(raw);
    await store.appendMessages(a.id, ["alpha one", "alpha two", "alpha three"].map(say));
    expect(pending()).toBe(3);
    await new Promise((resolve) => setTimeout(resolve, 80));
    expect(pending()).toBe(0);
    // Deletes of indexed text (pop, truncate, cap, session delete) and of text still waiting.
    await store.appendMessages(a.id, ["alpha four", "alpha five"].map(say));
    await store.appendMessages(b.id, ["alpha in b"].map(say));
    await store.popMessage(a.id);
    await store.truncateAfter(a.id, 3);
    await store.appendMessages(a.id, ["alpha six", "alpha seven"].map(say), { maxMessages: 2 });
    await store.deleteSession(b.id);
    const hits = await store.search({ userId: "u", text: "alpha", mode: "fulltext" });
    expect(hits.map((h) => h.message.content)).toEqual(["alpha seven", "alpha six"]);
    expect(pending()).toBe(0);
    expect(() => raw.exec("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")).not.toThrow();
    raw.close();
  });

  it("indexes a large backlog in chunks, the event loop free between them, until nothing waits", async () => {
    const path = freshPath();
    const store = storeAt(path, { fullTextIndexDelayMs: 10 });
    const session = await store.createSession({ id: newSessionId(), userId: "u" });
    const raw = new Database(path);
    const pending = () => unindexed(raw);
    await store.appendMessages(
      session.id,
      Array.from({ length: 1_600 }, (_, i) => ({ role: "user" as const, content: `backlog ${i}` })),
    );
    expect(pending()).toBe(1_600);
    // Sampled between the indexer's steps: the backlog shrinks a chunk at a time, not all at once.
    const seen = new Set<number>();
    const until = Date.now() + 5_000;
    while (pending() > 0 && Date.now() < until) {
      seen.add(pending());
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(pending()).toBe(0);
    expect([...seen].filter((n) => n > 0 && n < 1_600).length).toBeGreaterThan(0);
    const hits = await store.search({ userId: "u", text: "backlog", mode: "fulltext", limit: 2_000 });
    expect(hits).toHaveLength(1_600);
    raw.close();
  });

  it("waits with the event loop free while another connection holds the write lock, then indexes", async () => {
    const path = freshPath();
    const store = storeAt(path, { fullTextIndexDelayMs: 10 });
    const session = await store.createSession({ id: newSessionId(), userId: "u" });
    const raw = new Database(path);
    await store.appendMessages(session.id, [say("locked out for a while")]);
    // Another connection (as the vector index builder's worker does) holds the write lock for 400 ms.
    raw.exec("BEGIN IMMEDIATE");
    const watch = watchEventLoop(5);
    await new Promise((resolve) => setTimeout(resolve, 400));
    const heldMs = watch.stop();
    expect(unindexed(raw)).toBe(1);
    raw.exec("COMMIT");
    // The indexer found the lock taken and came back later, instead of sleeping in the busy handler:
    // before, this held the loop for 5,017 ms (the whole 5 s busy timeout, the lock's holder being on
    // this very thread here; with the builder's worker it is the rest of the worker's write).
    expect(heldMs).toBeLessThan(200);
    const until = Date.now() + 5_000;
    while (unindexed(raw) > 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(unindexed(raw)).toBe(0);
    expect(await store.search({ userId: "u", text: "locked", mode: "fulltext" })).toHaveLength(1);
    raw.close();
  });

  it("matches full text inside the index for one owner and session, however alike the owner ids look", async () => {
    const path = freshPath();
    const store = storeAt(path);
    // Ids the tokenizer alone would merge ("a-b", "a b" and "A.B" are all the words a, b).
    const owners = ["a-b", "a b", "A.B", "a-b-c", "ä-b"];
    const sessions: Record<string, string[]> = {};
    for (const owner of owners) {
      sessions[owner] = [];
      for (let i = 0; i < 2; i++) {
        const session = await store.createSession({ id: newSessionId(), userId: owner });
        await store.appendMessages(session.id, [
          { role: "user", content: `shared words for ${owner}` },
          { role: "user", content: "shared again" },
        ]);
        sessions[owner].push(session.id);
      }
    }
    // A search indexes its owner's sessions: each owner's, so the index holds every row.
    for (const owner of owners) await store.search({ userId: owner, text: "shared", mode: "fulltext" });
    const raw = new Database(path, { readonly: true });
    const matched = (match: string) =>
      raw.prepare("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?").pluck().get(match);
    for (const owner of owners) {
      // The index itself returns the owner's rows only (4 of 20), and the session's only (2).
      expect(matched(scopedMatch("shared", { userId: owner }))).toBe(4);
      expect(matched(scopedMatch("shared again", { userId: owner }, true))).toBe(4);
      expect(matched(scopedMatch("shared", { userId: owner, sessionId: sessions[owner][1] }))).toBe(2);
      // Within a session the session's token alone scopes the MATCH (one owner's); the statements'
      // joins check the owner, so another owner's session finds nothing, ranked or not.
      const othersSession = sessions[owners[0] === owner ? "a b" : "a-b"][0];
      expect(matched(scopedMatch("shared", { userId: owner, sessionId: othersSession }))).toBe(2);
      for (const ranking of ["relevance", undefined] as const) {
        const found = await store.search({
          userId: owner,
          sessionId: othersSession,
          text: "shared",
          mode: "fulltext",
          ranking,
        });
        expect(found).toEqual([]);
      }
      const inSession = await store.search({
        userId: owner,
        sessionId: sessions[owner][1],
        text: "shared words",
        mode: "fulltext",
        ranking: "relevance",
      });
      // Both of the session's messages hold "shared"; the one with both words ranks first.
      expect(inSession.map((h) => h.message.content)).toEqual([`shared words for ${owner}`, "shared again"]);
      const hits = await store.search({ userId: owner, text: "shared words", mode: "fulltext", ranking: "relevance" });
      expect(hits.map((h) => h.message.content).sort()).toEqual(
        [`shared words for ${owner}`, `shared words for ${owner}`, "shared again", "shared again"].sort(),
      );
      expect(hits.every((h) => sessions[owner].includes(h.sessionId))).toBe(true);
    }
    raw.close();
  });

  it("ranks a session's matches in code, and still returns one its tokenizer does not see (a folded diacritic)", async () => {
    const store = storeAt(freshPath());
    const session = await store.createSession({ id: newSessionId(), userId: "u" });
    const other = await store.createSession({ id: newSessionId(), userId: "u" });
    await store.appendMessages(session.id, [
      { role: "user", content: "the garden needs water" },
      { role: "user", content: "water the garden and the roses in the garden" },
      { role: "user", content: "meet at the café" },
      { role: "user", content: "nothing here" },
    ]);
    // The same words elsewhere in the owner's store: a search in the session never returns them.
    await store.appendMessages(other.id, [{ role: "user", content: "garden water cafe" }]);
    const search = (text: string, limit = 10) =>
      store.search({ userId: "u", sessionId: session.id, text, mode: "fulltext", ranking: "relevance", limit });
    const garden = await search("garden water");
    expect(garden.map((h) => [h.sessionId, h.seq])).toEqual([
      [session.id, 2],
      [session.id, 1],
    ]);
    expect(garden[0].snippet).toContain("garden");
    // FTS5 folds "café" to "cafe"; the code's BM25 does not: the match comes back all the same.
    const cafe = await search("cafe");
    expect(cafe.map((h) => h.seq)).toEqual([3]);
    expect(cafe[0].message.content).toBe("meet at the café");
    expect(await search("garden water", 1)).toHaveLength(1);
  });

  it("indexes at most the asked number of messages per step, across sessions, until none waits", () => {
    const db = openSqliteStoreDb({ path: freshPath(), busyTimeoutMs: 1000, synchronous: "normal" }, new LocalLeases());
    try {
      const ids = [newSessionId(), newSessionId(), newSessionId()];
      const insert = db.db.prepare(
        "INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES (?, 'u', 0, 0)",
      );
      for (const id of ids) {
        insert.run(id);
        db.tx.append(
          id,
          Array.from({ length: 300 }, (_, i) => JSON.stringify(say(`word ${i}`))),
          {},
          1,
        );
      }
      const steps: number[] = [];
      let more = true;
      while (more) {
        const before = rowsIn(db.db);
        more = db.tx.indexPending(250);
        steps.push(rowsIn(db.db) - before);
      }
      expect(steps.slice(0, 3)).toEqual([250, 250, 250]);
      expect(steps.every((n) => n <= 250)).toBe(true);
      expect(steps.reduce((a, b) => a + b, 0)).toBe(900);
      expect(pendingSessions(db.db)).toBe(0);
      // Nothing left: a step does nothing and says so.
      expect(db.tx.indexPending(250)).toBe(false);
    } finally {
      db.close();
    }
  });

  it("indexes many sessions a step, within the budget where gaps make a session's span overstate it, each message once", () => {
    const db = openSqliteStoreDb({ path: freshPath(), busyTimeoutMs: 1000, synchronous: "normal" }, new LocalLeases());
    try {
      const insert = db.db.prepare(
        "INSERT INTO sessions (id, user_id, created_at, last_activity_at) VALUES (?, ?, 0, 0)",
      );
      const word = (s: number, seq: number) => `w${s}x${seq}`;
      const ids = Array.from({ length: 24 }, () => newSessionId());
      ids.forEach((id, s) => {
        insert.run(id, `u${s % 3}`);
        const count = s === 0 ? 30 : 2;
        db.tx.append(
          id,
          Array.from({ length: count }, (_, i) => JSON.stringify(say(`shared ${word(s, i + 1)}`))),
          {},
          1,
        );
      });
      // Session 0: seqs 5..20 gone before they were indexed, so 14 wait where its seqs span 30.
      db.db.prepare("DELETE FROM messages WHERE session_id = ? AND seq BETWEEN 5 AND 20").run(ids[0]);
      const steps: number[] = [];
      let more = true;
      while (more) {
        const before = rowsIn(db.db);
        more = db.tx.indexPending(10);
        steps.push(rowsIn(db.db) - before);
      }
      expect(steps.every((n) => n <= 10)).toBe(true);
      expect(steps.reduce((a, b) => a + b, 0)).toBe(14 + 23 * 2);
      expect(unindexed(db.db)).toBe(0);
      expect(pendingSessions(db.db)).toBe(0);
      // Each message is in the index once, under its own session's key and owner.
      const find = db.db.prepare("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?").pluck();
      const keyOf = db.db.prepare("SELECT key FROM sessions WHERE id = ?").pluck();
      const seqs = (s: number) => (s === 0 ? [1, 2, 3, 4, ...Array.from({ length: 10 }, (_, i) => 21 + i)] : [1, 2]);
      ids.forEach((id, s) => {
        const key = keyOf.get(id) as number;
        for (const seq of seqs(s)) {
          expect(find.all(scopedMatch(word(s, seq), { userId: `u${s % 3}`, sessionId: id }))).toEqual([
            key * 2 ** 32 + seq,
          ]);
        }
      });
      expect(find.all(scopedMatch(word(0, 7), { userId: "u0" }))).toEqual([]);
      expect(find.all(scopedMatch("shared", { userId: "u1" }))).toHaveLength(8 * 2);
    } finally {
      db.close();
    }
  });

  it("keeps search exact through replaceAfter, switchBranch, truncation and reused seqs, indexed or not", async () => {
    const path = freshPath();
    const store = createSqliteStore({ path, fullTextIndexDelayMs: 60_000 });
    try {
      const { id } = await store.createSession({ id: newSessionId(), userId: "u" });
      const find = async (text: string) =>
        (await store.search({ userId: "u", text, mode: "fulltext", limit: 50 })).map((h) => [h.seq, h.message.content]);
      await store.appendMessages(id, ["old one", "old two", "old three", "old four"].map(say));
      // Indexed (a search indexes first); then the tail replaced by a branch-keeping write.
      expect(await find("old")).toHaveLength(4);
      await store.replaceAfter(id, 2, [say("new three")], { branch: { reason: "regenerate" } });
      expect(await find("old")).toEqual([
        [2, "old two"],
        [1, "old one"],
      ]);
      expect(await find("new")).toEqual([[3, "new three"]]);
      // Back to the branch: its messages return at their seqs and are found again.
      const [branch] = await store.listBranches(id);
      await store.switchBranch(id, branch.id);
      expect(await find("old")).toEqual([
        [4, "old four"],
        [3, "old three"],
        [2, "old two"],
        [1, "old one"],
      ]);
      expect(await find("new")).toEqual([]);
      // Seqs reused before the index saw them: truncated, written again, never searched in between.
      await store.truncateAfter(id, 1);
      await store.appendMessages(id, [say("again two")]);
      await store.popMessage(id);
      await store.appendMessages(id, [say("third two")]);
      expect(await find("two")).toEqual([[2, "third two"]]);
      expect(await find("old")).toEqual([[1, "old one"]]);
      await store.appendMessages(id, [say("cap one"), say("cap two")], { maxMessages: 2 });
      expect(await find("two")).toEqual([[4, "cap two"]]);
      // Waiting already (seq 5), then everything truncated (the cap left 3 and 4, both indexed) and
      // seq 1 written again: below what the index had.
      await store.appendMessages(id, [say("five waits")]);
      await store.truncateAfter(id, 2);
      await store.appendMessages(id, [say("three anew")]);
      expect(await find("anew")).toEqual([[1, "three anew"]]);
      expect(await find("waits")).toEqual([]);
    } finally {
      await store.close();
    }
    const raw = new Database(path);
    expect(() => raw.exec("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")).not.toThrow();
    // One row per indexed message, none for a message gone (closing indexes nothing more).
    expect(rowsIn(raw) + unindexed(raw)).toBe(raw.prepare("SELECT count(*) FROM messages").pluck().get());
    raw.close();
  });

  it("indexes what an older file left waiting in the background after opening, before any search", async () => {
    const path = freshPath();
    const id = newSessionId();
    olderFile(path, [{ id, userId: "u" }], 1_200);
    const store = createSqliteStore({ path, fullTextIndexDelayMs: 10 });
    try {
      expect(await store.countMessages(id)).toBe(1_200);
      const raw = new Database(path, { readonly: true });
      const indexed = () => raw.prepare("SELECT fts_seq FROM sessions").pluck().get() as number;
      const deadline = Date.now() + 10_000;
      while (indexed() < 1_200 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(indexed()).toBe(1_200);
      expect(rowsIn(raw)).toBe(1_200);
      raw.close();
    } finally {
      await store.close();
    }
  });

  it("indexes a backlog before a search in chunks, the event loop free between them, and finds all of it", async () => {
    const path = freshPath();
    const sessions = Array.from({ length: 8 }, (_, i) => ({ id: newSessionId(), userId: i % 2 ? "u" : "other" }));
    olderFile(path, sessions, 1_000);
    // The background indexer would not start for a minute: the search meets the whole backlog.
    const store = createSqliteStore({ path, fullTextIndexDelayMs: 60_000 });
    const raw = new Database(path, { readonly: true });
    try {
      await store.appendMessages(sessions[1]!.id, [say("waiting latest")]);
      const seen = new Set<number>([unindexed(raw)]);
      const loop = watchEventLoop(5, () => seen.add(unindexed(raw)));
      const hits = await store.search({ userId: "u", text: "waiting", mode: "fulltext", limit: 5_000 });
      const maxGap = loop.stop();
      expect(hits).toHaveLength(4 * 1_000 + 1);
      expect(hits[0]!.message.content).toBe("waiting latest");
      // The timer ran while the search indexed: it saw the backlog partly indexed.
      expect([...seen].filter((n) => n > 0 && n < 8_001).length).toBeGreaterThan(0);
      expect(maxGap).toBeLessThan(200);
      // The owner's backlog is indexed; the other owner's is left to the background indexer.
      expect(unindexedOf(raw, "u")).toBe(0);
      expect(unindexedOf(raw, "other")).toBe(4 * 1_000);
    } finally {
      raw.close();
      await store.close();
    }
  });

  it("leaves the messages at and above a search's beforeSeq waiting when all below it are indexed, and indexes what waits below it", async () => {
    const path = freshPath();
    const store = createSqliteStore({ path, fullTextIndexDelayMs: 60_000 });
    // The store makes its file on first use.
    const session = await store.createSession({ id: newSessionId(), userId: "u" });
    const raw = new Database(path, { readonly: true });
    try {
      await store.appendMessages(
        session.id,
        Array.from({ length: 30 }, (_, i) => say(`apple note ${i + 1}`)),
      );
      const ranked = (beforeSeq: number) =>
        store.search({
          userId: "u",
          sessionId: session.id,
          text: "apple note",
          mode: "fulltext",
          ranking: "relevance",
          limit: 100,
          beforeSeq,
        });
      // Waiting below the bound: indexed first (the whole session's backlog), and found.
      expect((await ranked(11)).map((h) => h.seq).sort((a, b) => a - b)).toEqual(
        Array.from({ length: 10 }, (_, i) => i + 1),
      );
      expect(unindexed(raw)).toBe(0);
      // Recall's case: the new messages are the window's, at and above the bound. Nothing is indexed.
      await store.appendMessages(session.id, [say("apple note 31"), say("apple note 32")]);
      expect(await ranked(31)).toHaveLength(30);
      expect(unindexed(raw)).toBe(2);
      expect(pendingSessions(raw)).toBe(1);
      // A bound above them: indexed, and found.
      expect((await ranked(33)).map((h) => h.seq)).toContain(32);
      expect(unindexed(raw)).toBe(0);
    } finally {
      raw.close();
      await store.close();
    }
  });

  it("indexes only the searched owner's (or session's) backlog before a search, another owner's not at all", async () => {
    const path = freshPath();
    const mine = Array.from({ length: 3 }, () => ({ id: newSessionId(), userId: "a" }));
    const theirs = Array.from({ length: 20 }, () => ({ id: newSessionId(), userId: "b" }));
    olderFile(path, [...mine, ...theirs], 1_000);
    const store = createSqliteStore({ path, fullTextIndexDelayMs: 60_000 });
    const raw = new Database(path, { readonly: true });
    try {
      // One session first: only it is indexed.
      const inSession = await store.search({
        userId: "a",
        sessionId: mine[0]!.id,
        text: "waiting",
        mode: "fulltext",
        limit: 5_000,
      });
      expect(inSession).toHaveLength(1_000);
      expect(unindexedOf(raw, "a")).toBe(2 * 1_000);
      // Another owner's session named: nothing of it is indexed (nor found).
      expect(await store.search({ userId: "a", sessionId: theirs[0]!.id, text: "waiting", mode: "fulltext" })).toEqual(
        [],
      );
      expect(unindexedOf(raw, "b")).toBe(20 * 1_000);
      // The owner: all of theirs, nothing of the other owner's 20,000.
      const hits = await store.search({ userId: "a", text: "waiting", mode: "fulltext", limit: 5_000 });
      expect(hits).toHaveLength(3 * 1_000);
      expect(unindexedOf(raw, "a")).toBe(0);
      expect(unindexedOf(raw, "b")).toBe(20 * 1_000);
      expect(pendingSessions(raw)).toBe(20);
      expect(rowsIn(raw)).toBe(3 * 1_000);
      // Their own search finds all of theirs.
      expect(await store.search({ userId: "b", text: "waiting", mode: "fulltext", limit: 50_000 })).toHaveLength(
        20 * 1_000,
      );
      expect(pendingSessions(raw)).toBe(0);
    } finally {
      raw.close();
      await store.close();
    }
  });

  it("closes without indexing a backlog (the event loop free), which the next open indexes, losing nothing", async () => {
    const path = freshPath();
    const sessions = Array.from({ length: 10 }, (_, i) => ({ id: newSessionId(), userId: i % 2 ? "u" : "v" }));
    olderFile(path, sessions, 6_000);
    const store = createSqliteStore({ path, fullTextIndexDelayMs: 60_000 });
    await store.appendMessages(sessions[1]!.id, [say("waiting latest")]);
    const raw = new Database(path, { readonly: true });
    try {
      expect(unindexed(raw)).toBe(60_001);
      // Indexing 60,000 messages in one call held the loop for ~0.7 s here.
      const { maxGap } = await timed(() => store.close());
      expect(maxGap).toBeLessThan(150);
      expect(unindexed(raw)).toBe(60_001);
      // Opened again: the background indexer takes the backlog, and a search before it finishes finds all.
      const again = createSqliteStore({ path, fullTextIndexDelayMs: 10 });
      try {
        const hits = await again.search({ userId: "u", text: "waiting", mode: "fulltext", limit: 50_000 });
        expect(hits).toHaveLength(5 * 6_000 + 1);
        expect(hits[0]!.message.content).toBe("waiting latest");
        const deadline = Date.now() + 30_000;
        while (unindexed(raw) > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
        expect(unindexed(raw)).toBe(0);
        expect(await again.search({ userId: "v", text: "waiting", mode: "fulltext", limit: 50_000 })).toHaveLength(
          5 * 6_000,
        );
      } finally {
        await again.close();
      }
    } finally {
      raw.close();
    }
  });

  it("indexes each message once when searches and the background indexer take turns", async () => {
    const path = freshPath();
    const sessions = Array.from({ length: 6 }, () => ({ id: newSessionId(), userId: "u" }));
    olderFile(path, sessions, 700);
    const store = createSqliteStore({ path, fullTextIndexDelayMs: 0 });
    try {
      await store.countMessages(sessions[0]!.id);
      const searches = await Promise.all(
        [0, 1, 2].map(async (i) => {
          await store.appendMessages(sessions[i]!.id, [say(`waiting extra ${i}`)]);
          return store.search({ userId: "u", text: "waiting", mode: "fulltext", limit: 5_000 });
        }),
      );
      // Each search finds all of the backlog and what was appended before it started (maybe more).
      searches.forEach((hits, i) => {
        const extras = hits.map((h) => h.message.content as string).filter((text) => text.startsWith("waiting extra"));
        expect(hits.length - extras.length).toBe(6 * 700);
        expect(extras).toContain(`waiting extra ${i}`);
      });
    } finally {
      await store.close();
    }
    const raw = new Database(path);
    expect(rowsIn(raw)).toBe(6 * 700 + 3);
    expect(() => raw.exec("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")).not.toThrow();
    raw.close();
  });

  it("gives a new session a key never used before, even after the newest session is deleted", async () => {
    const path = freshPath();
    const store = createSqliteStore({ path });
    try {
      const first = await store.createSession({ id: newSessionId(), userId: "u" });
      await store.appendMessages(first.id, [say("gone")]);
      await store.search({ userId: "u", text: "gone", mode: "fulltext" });
      await store.deleteSession(first.id);
      const second = await store.createSession({ id: newSessionId(), userId: "u" });
      await store.appendMessages(second.id, [say("kept")]);
      expect(await store.search({ userId: "u", text: "gone", mode: "fulltext" })).toEqual([]);
      expect((await store.search({ userId: "u", text: "kept", mode: "fulltext" })).map((h) => h.sessionId)).toEqual([
        second.id,
      ]);
      const raw = new Database(path, { readonly: true });
      expect(raw.prepare("SELECT key FROM sessions").pluck().all()).toEqual([2]);
      raw.close();
    } finally {
      await store.close();
    }
  });
});
