/**
 * The inspector's Memories view in a real browser (Debian's chromium through playwright-core): the
 * caller's memories with their times, source and history; the source link into the transcript; a
 * memory whose session is gone; edit and delete; an operator key opening an end user of its tenant
 * (and downloading that user's data);
 * and another user's memories never shown, in the page or through the API it calls.
 */
import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import type { Browser, BrowserContextOptions } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { headerLine } from "../../src/transfer/jsonl-format.js";
import { browserAvailable, launchBrowser, openInspector } from "../_browser.js";
import { type Stack, startStack } from "./_stack.js";

const available = browserAvailable();
if (available !== true) console.log(`[skip] inspector memories browser tests: ${available}`);

const USER_HEADER = "X-OpenWebUI-User-Id";
const KEYS = { "tk-alice": "alice", "tk-bob": "bob", "tk-gw": "acme", "tk-ops": "acme" };

describe.skipIf(available !== true)("the inspector's Memories view in chromium", () => {
  let stack: Stack;
  let browser: Browser;
  const talk = randomUUID();
  const gone = randomUUID();
  const annSession = randomUUID();
  const ids: Record<string, string> = {};

  /** One chat turn through the proxy, as an application would send it. */
  async function turn(key: string, sessionId: string, content: string, headers: Record<string, string> = {}) {
    await stack
      .client(key)
      .chat.completions.create(
        { model: "demo-model", messages: [{ role: "user", content }] },
        { headers: { "X-Session-ID": sessionId, ...headers } },
      );
  }

  const rest = (key: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    stack.request(method, path, { headers: { authorization: `Bearer ${key}`, ...headers }, body });

  beforeAll(async () => {
    stack = await startStack({ apiKeys: KEYS, operatorKeys: ["tk-ops"], userHeader: USER_HEADER });
    stack.fake.setReply((body) => ({ content: `echo: ${String(body.messages.at(-1).content)}` }));
    browser = await launchBrowser();
    const alice = { userId: "alice" };
    await turn("tk-alice", talk, "Hello there");
    await turn("tk-alice", talk, "We moved to Utrecht last spring");
    ids.utrecht = (
      await stack.memory.memories.add(
        { text: "lives in Utrecht", source: { kind: "session", sessionId: talk, seqs: [3] } },
        alice,
      )
    ).id;
    // Apart in time, so the newest-first order is fixed (a tie would fall to the random ids).
    await sleep(5);
    ids.hand = (await stack.memory.memories.add({ text: "prefers short answers" }, alice)).id;
    await sleep(5);
    ids.manager = (
      await stack.memory.memories.add(
        { text: "manager is Sam", source: { kind: "session", sessionId: talk, seqs: [1, 2] } },
        alice,
      )
    ).id;
    await sleep(5);
    await stack.memory.memories.update(ids.manager, { text: "manager is Priya", reason: "contradiction" }, alice);
    await turn("tk-alice", gone, "I am vegetarian");
    await sleep(5);
    ids.gone = (
      await stack.memory.memories.add(
        { text: "is vegetarian", source: { kind: "session", sessionId: gone, seqs: [1] } },
        alice,
      )
    ).id;
    await stack.memory.deleteSession(gone, alice);
    ids.bob = (await stack.memory.memories.add({ text: "plays the oboe" }, { userId: "bob" })).id;
    await turn("tk-gw", annSession, "Tea or coffee?", { [USER_HEADER]: "ann" });
    ids.ann = (
      await stack.memory.memories.add(
        { text: "ann likes tea", source: { kind: "session", sessionId: annSession, seqs: [1] } },
        { userId: "acme/ann" },
      )
    ).id;
  });
  afterAll(async () => {
    await browser?.close();
    await stack?.close();
  });

  /** Opens a page of the inspector and enters the key in its key dialog. */
  const open = (path: string, key: string, options: BrowserContextOptions = {}) =>
    openInspector(browser, `${stack.url}${path}`, key, { viewport: { width: 1280, height: 900 }, ...options });

  it("lists the caller's memories with their times, source and history, and nobody else's", async () => {
    const { page, errors, close } = await open("/ui/memories", "tk-alice");
    const texts = () => page.locator(".memory .memory-text").allTextContents();
    await expect
      .poll(texts)
      .toEqual(["is vegetarian", "manager is Priya", "prefers short answers", "lives in Utrecht"]);
    expect(await page.locator("#memories-user").textContent()).toBe("alice");
    expect(await page.locator("#memories-status").textContent()).toBe("4 memories");

    const hand = page.locator(`li[data-memory="${ids.hand}"]`);
    expect(await hand.locator(".source").textContent()).toBe("added by hand");
    expect(await hand.locator("time").first().getAttribute("datetime")).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(await hand.locator("details.history").count()).toBe(0);

    const utrecht = page.locator(`li[data-memory="${ids.utrecht}"]`);
    expect(await utrecht.locator("a[data-source-link]").getAttribute("href")).toBe(`/ui/s/${talk}#3`);
    expect(await utrecht.locator(".source").textContent()).toBe(`from session ${talk.slice(0, 8)}… #3`);

    // A contradiction replaced "manager is Sam": the old text is in the history, with why.
    const manager = page.locator(`li[data-memory="${ids.manager}"]`);
    expect(await manager.locator("details.history summary").textContent()).toBe("History: 1 earlier text");
    await manager.locator("details.history summary").click();
    expect(await manager.locator("details.history li .old-text").textContent()).toBe("manager is Sam");
    expect(await manager.locator("details.history li").getAttribute("data-reason")).toBe("contradiction");
    expect(await manager.locator("details.history li .meta").textContent()).toMatch(/^replaced .* \(contradiction\)$/);
    expect(await manager.locator(".meta").first().textContent()).toContain("updated");

    // Its session was deleted: the text stays, the source says so, and there is no link to follow.
    const vegetarian = page.locator(`li[data-memory="${ids.gone}"]`);
    expect(await vegetarian.locator(".memory-text").textContent()).toBe("is vegetarian");
    expect(await vegetarian.locator('.source[data-source="deleted"]').textContent()).toBe(
      `from session ${gone.slice(0, 8)}… #1 session deleted`,
    );
    expect(await vegetarian.locator(".source .badge").textContent()).toBe("session deleted");
    expect(await vegetarian.locator("a").count()).toBe(0);

    // Nobody else's, and no way to open anyone else with a key that is not an operator's.
    const body = (await page.locator("body").textContent()) ?? "";
    expect(body).not.toMatch(/oboe|ann likes tea/);
    expect(await page.locator("#user-picker").count()).toBe(0);
    expect(errors).toEqual([]);
    await close();
  });

  it("follows a memory's source into the transcript, to the message it was drawn from", async () => {
    const { page, close } = await open("/ui/memories", "tk-alice");
    const link = page.locator(`li[data-memory="${ids.utrecht}"] a[data-source-link]`);
    await link.click();
    await page.waitForURL(`${stack.url}/ui/s/${talk}#3`);
    const target = page.locator('article[data-seq="3"]');
    await expect.poll(() => target.getAttribute("class")).toContain("target");
    expect(await target.locator(".content").textContent()).toBe("We moved to Utrecht last spring");
    expect(await page.locator("#memories").isHidden()).toBe(true);
    // Back to the list, by the top bar's link and by the key.
    await page.locator("#memories-link").click();
    await page.waitForURL(`${stack.url}/ui/memories`);
    await page.locator(".memory").first().waitFor();
    await close();
  });

  it("edits a memory: the page shows the new text and the old one joins its history", async () => {
    const id = (await stack.memory.memories.add({ text: "has a cat" }, { userId: "alice" })).id;
    const { page, errors, close } = await open("/ui/memories", "tk-alice");
    const item = page.locator(`li[data-memory="${id}"]`);
    await item.waitFor();
    // Cancel changes nothing.
    await item.locator('button[data-action="edit"]').click();
    await item.locator("textarea").fill("has a dog");
    await item.locator('button[data-action="cancel"]').click();
    expect(await item.locator(".memory-text").textContent()).toBe("has a cat");

    await item.locator('button[data-action="edit"]').click();
    expect(await item.locator("textarea").inputValue()).toBe("has a cat");
    await item.locator("textarea").fill("has two cats");
    await item.locator('button[data-action="save"]').click();
    await expect.poll(() => item.locator(".memory-text").textContent()).toBe("has two cats");
    expect(await item.locator("details.history summary").textContent()).toBe("History: 1 earlier text");

    const stored = (await (await rest("tk-alice", "GET", `/v1/memories/${id}`)).json()) as any;
    expect(stored.text).toBe("has two cats");
    expect(stored.history).toEqual([expect.objectContaining({ text: "has a cat", reason: "edit" })]);

    // An empty text is refused by the API and said in the form; nothing is stored.
    await item.locator('button[data-action="edit"]').click();
    await item.locator("textarea").fill("   ");
    await item.locator('button[data-action="save"]').click();
    await expect.poll(() => item.locator(".error").textContent()).toMatch(/text must not be empty/);
    expect(((await (await rest("tk-alice", "GET", `/v1/memories/${id}`)).json()) as any).text).toBe("has two cats");
    expect(errors).toEqual([]);
    await close();
  });

  it("deletes a memory only after confirmation", async () => {
    const id = (await stack.memory.memories.add({ text: "owns a red bicycle" }, { userId: "alice" })).id;
    const { page, close } = await open("/ui/memories", "tk-alice");
    const item = page.locator(`li[data-memory="${id}"]`);
    await item.waitFor();
    const status = () => rest("tk-alice", "GET", `/v1/memories/${id}`).then((r) => r.status);
    await item.locator('button[data-action="delete"]').click();
    expect(await page.locator("dialog#confirm h2").textContent()).toBe("Delete this memory?");
    expect(await page.locator("dialog#confirm p").textContent()).toContain("“owns a red bicycle”");
    await page.locator('dialog#confirm button[data-action="cancel"]').click();
    expect(await status()).toBe(200);
    await item.locator('button[data-action="delete"]').click();
    await page.locator('dialog#confirm button[data-action="confirm"]').click();
    await expect.poll(() => item.count()).toBe(0);
    expect(await status()).toBe(404);
    await close();
  });

  it("lets an operator key open an end user of its tenant: their memories, sessions and source links", async () => {
    const { page, errors, close } = await open("/ui/memories", "tk-ops");
    const picker = page.locator("#user-picker");
    await picker.waitFor();
    expect(await page.locator("#memories-user").textContent()).toBe("acme");
    expect(await page.locator("#memories-status").textContent()).toBe("No memories kept about this user.");
    expect(await picker.locator("code").textContent()).toBe("acme");

    await page.locator("#open-user").fill("ann");
    await page.locator("#open-user").press("Enter");
    await expect.poll(() => page.locator(".memory .memory-text").allTextContents()).toEqual(["ann likes tea"]);
    expect(await page.locator("#memories-user").textContent()).toBe("acme/ann");
    expect(await page.locator("#as-user").textContent()).toBe("as end user ann");
    await expect.poll(() => page.locator("#sessions .title").allTextContents()).toEqual(["Tea or coffee?"]);
    // The download of their data: fetched with the key and the opened user's header, saved as a file.
    const [download] = await Promise.all([page.waitForEvent("download"), page.locator("#export-data").click()]);
    expect(download.suggestedFilename()).toMatch(/^threadkeep-export-\d{4}-\d{2}-\d{2}\.jsonl$/);
    const file = await readFile((await download.path())!, "utf8");
    const lines = file.trimEnd().split("\n");
    expect(lines[0]).toBe(headerLine());
    expect(lines.some((line) => JSON.parse(line).memory?.text === "ann likes tea")).toBe(true);
    expect(file).toContain("Tea or coffee?");
    expect(file).not.toMatch(/Utrecht|vegetarian|oboe/);
    // Their source link opens their transcript, which the page reads as them.
    await page.locator(`li[data-memory="${ids.ann}"] a[data-source-link]`).click();
    await page.waitForURL(`${stack.url}/ui/s/${annSession}#1`);
    await expect.poll(() => page.locator('article[data-seq="1"] .content').textContent()).toBe("Tea or coffee?");

    // Another tenant's user is not within reach: "alice" here is acme's end user alice, who has none.
    await page.locator("#memories-link").click();
    await page.locator("#open-user").fill("alice");
    await page.locator("#open-user").press("Enter");
    await expect.poll(() => page.locator("#memories-user").textContent()).toBe("acme/alice");
    expect(await page.locator(".memory").count()).toBe(0);
    expect((await page.locator("body").textContent()) ?? "").not.toMatch(/Utrecht|vegetarian|oboe/);

    await page.locator("#own-user").click();
    await expect.poll(() => page.locator("#memories-user").textContent()).toBe("acme");
    expect(await page.locator("#as-user").isHidden()).toBe(true);
    expect(errors).toEqual([]);
    await close();
  });

  it("never shows another user's memories to a key that is not an operator's, in the page or through the API", async () => {
    // A key of the same tenant that is not flagged operator, made to send the header by hand.
    const { page, close } = await open("/ui/memories", "tk-gw");
    await page.locator("#memories-status").waitFor();
    expect(await page.locator("#user-picker").count()).toBe(0);
    await page.evaluate("sessionStorage.setItem('threadkeep.user', 'ann')");
    await page.reload();
    await expect
      .poll(() => page.locator("#error").textContent())
      .toBe("Only an operator key may open another user: go back to the key's own user.");
    expect(await page.locator(".memory").count()).toBe(0);
    expect((await page.locator("body").textContent()) ?? "").not.toContain("ann likes tea");
    // The way back is offered, and leads to the key's own (empty) memories.
    await page.locator("#own-user").click();
    await expect.poll(() => page.locator("#memories-user").textContent()).toBe("acme");
    await close();

    // The API the page calls: another user's memory is 404, the header from a non-operator 403.
    for (const [key, id] of [
      ["tk-bob", ids.utrecht],
      ["tk-alice", ids.bob],
      ["tk-alice", ids.ann],
      ["tk-gw", ids.utrecht],
    ] as const) {
      expect((await rest(key, "GET", `/v1/memories/${id}`)).status, `${key} ${id}`).toBe(404);
      expect((await rest(key, "PATCH", `/v1/memories/${id}`, { text: "taken over" })).status).toBe(404);
    }
    const bobs = (await (await rest("tk-bob", "GET", "/v1/memories")).json()) as any;
    expect(bobs.data.map((m: { text: string }) => m.text)).toEqual(["plays the oboe"]);
    for (const key of ["tk-alice", "tk-gw"]) {
      const refused = await rest(key, "GET", "/v1/memories", undefined, { "X-Threadkeep-User": "ann" });
      expect(refused.status).toBe(403);
      expect(((await refused.json()) as any).error.code).toBe("operator_only");
    }
  });
});
