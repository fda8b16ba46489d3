/**
 * What recall across a user's sessions (`serve --recall-scope user`) costs a proxied turn on
 * PostgreSQL, counted on the wire as postgres-turn-round-trips.service.test.ts counts a plain turn (two
 * statements: open the turn, commit it): the store's full-text search more when nothing is found
 * (one statement, or two where the store sizes the owner first), since recall ranks with core's
 * `rankTurns` and a search whose candidates hold too few of the query's words stops there; when
 * something is, the search returns the hits' neighbours with them (`around`: no read of its own), and
 * recall reads the hits' sessions in one statement (`getSessions`), however many (the turns it quotes
 * are those the search read: no read of its own).
 */
import { randomBytes, randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { serviceAvailable } from "../_services.js";
import { quiet, startCountedServe } from "./_counted-postgres.js";
import { chatTurn as chat, killServeProcesses } from "./_serve-process.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  killServeProcesses();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A word no other run's sessions hold (the database is shared; every run is the same default user). */
const word = () =>
  `zq${randomBytes(6)
    .toString("hex")
    .replace(/\d/g, (d) => "abcdefghij"[Number(d)])}`;

describe("PostgreSQL round trips of a proxied turn with --recall-scope user", { timeout: 60_000 }, () => {
  it("costs the search when nothing is recalled, and one read more when earlier turns are, from one session or three", async (ctx) => {
    const available = await serviceAvailable("postgres");
    if (available !== true) ctx.skip(available);
    const { url, fake, counter } = await startCountedServe(["--no-summaries", "--recall-scope", "user"], cleanups);

    const [a, b] = [word(), word()];
    expect((await chat(url, randomUUID(), `The ${a} ${b} is kept in the blue box.`)).status).toBe(200);
    const session = randomUUID();
    for (let i = 0; i < 4; i++) expect((await chat(url, session, `warm ${i}`)).status).toBe(200);
    await quiet(counter);

    counter.reset();
    expect((await chat(url, session, `anything about ${word()} ${word()}?`)).status).toBe(200);
    await quiet(counter);
    const miss = counter.statements();
    // Open and commit (2), plus the search: one full-text query, or two where the store sizes the owner first.
    expect(miss, JSON.stringify(counter.counts())).toBeGreaterThanOrEqual(3);
    expect(miss, JSON.stringify(counter.counts())).toBeLessThanOrEqual(4);

    counter.reset();
    expect((await chat(url, session, `where is the ${a} ${b}?`)).status).toBe(200);
    await quiet(counter);
    // The search, then one more: the hits are the earlier turn and its echoed reply (seqs 1 and 2), and
    // the search returns each hit's neighbours in the same statement (`around`), so the ranking reads
    // nothing more; then recall reads the hit's session to check its owner and title (1). Seqs 1-3 are
    // what the note quotes, all read with the search already, so recall reads no turns itself. (Three
    // more before issue 34: the neighbour range read by getMessages, and its empty answer's session read
    // apart to tell "no messages" from a session gone.)
    expect(counter.statements(), JSON.stringify(counter.counts())).toBe(miss + 1);
    const sent = fake.chatRequests().at(-1)?.body.messages as { role: string; content: string }[];
    expect(sent.some((m) => m.role === "system" && m.content.includes("blue box"))).toBe(true);

    // Three earlier sessions each hold a turn with the words: the three sessions are read in one
    // statement (three before, a getSession each).
    const [c, d] = [word(), word()];
    for (const box of ["red", "green", "grey"])
      expect((await chat(url, randomUUID(), `The ${c} ${d} is kept in the ${box} box.`)).status).toBe(200);
    await quiet(counter);
    counter.reset();
    expect((await chat(url, session, `where is the ${c} ${d}?`)).status).toBe(200);
    await quiet(counter);
    const note = (fake.chatRequests().at(-1)?.body.messages as { role: string; content: string }[]).find(
      (m) => m.role === "system" && m.content.includes(c),
    );
    expect(["red", "green", "grey"].filter((box) => note?.content.includes(`${box} box`))).toHaveLength(3);
    expect(counter.statements(), JSON.stringify(counter.counts())).toBe(miss + 1);
  });
  it("recalls from the session itself (the default) with the search and one read of every hit's neighbours, one hit or three", async (ctx) => {
    const available = await serviceAvailable("postgres");
    if (available !== true) ctx.skip(available);
    // A window of 4 messages: two turns back, a turn is outside it and may be recalled.
    const { url, fake, counter } = await startCountedServe(["--no-summaries", "--window", "4"], cleanups);
    const session = randomUUID();
    const [a, b] = [word(), word()];
    expect((await chat(url, session, `The ${a} ${b} is kept in the blue box.`)).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await chat(url, session, `warm ${i}`)).status).toBe(200);
    await quiet(counter);

    counter.reset();
    expect((await chat(url, session, `anything about ${word()} ${word()}?`)).status).toBe(200);
    await quiet(counter);
    const miss = counter.statements();

    const sentAfter = async (text: string) => {
      counter.reset();
      expect((await chat(url, session, text)).status).toBe(200);
      await quiet(counter);
      return (fake.chatRequests().at(-1)?.body.messages as { role: string; content: string }[]).map((m) => m.content);
    };
    // One hit (the turn and its echoed reply): the search, then one read of the neighbours.
    expect((await sentAfter(`where is the ${a} ${b}?`)).some((text) => text.includes("blue box"))).toBe(true);
    expect(counter.statements(), JSON.stringify(counter.counts())).toBe(miss + 1);

    // Three turns hold the words, all outside the window: still one read for their neighbours (a read
    // each, three, before).
    const [c, d] = [word(), word()];
    for (const box of ["red", "green", "grey"])
      expect((await chat(url, session, `The ${c} ${d} is kept in the ${box} box.`)).status).toBe(200);
    for (let i = 0; i < 2; i++) expect((await chat(url, session, `warm again ${i}`)).status).toBe(200);
    await quiet(counter);
    const sent = await sentAfter(`where is the ${c} ${d}?`);
    expect(["red", "green", "grey"].filter((box) => sent.some((text) => text.includes(`${box} box`)))).toHaveLength(3);
    expect(counter.statements(), JSON.stringify(counter.counts())).toBe(miss + 1);
  });
});
