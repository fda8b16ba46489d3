/**
 * The inspector in a real browser (Debian's chromium through playwright-core): threadkeep serves
 * /ui, conversations are made through the API with a fake upstream, and the page is checked as a
 * person would use it.
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Browser, BrowserContextOptions, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { browserAvailable, launchBrowser, openInspector } from "../_browser.js";
import { type Stack, startStack } from "./_stack.js";

const available = browserAvailable();
if (available !== true) console.log(`[skip] inspector browser tests: ${available}`);

const KEYS = { "tk-alice": "alice", "tk-bob": "bob" };
const WEATHER_CALL = {
  id: "call_w1",
  type: "function",
  function: { name: "get_weather", arguments: '{"city":"Utrecht"}' },
};

/** The fake model: asks for the weather tool when asked about weather, else echoes. */
function scriptReplies(stack: Stack) {
  stack.fake.setReply((body) => {
    const last = body.messages.at(-1);
    if (last.role === "user" && /weather/i.test(String(last.content))) return { tool_calls: [WEATHER_CALL] };
    if (last.role === "tool") return { content: "It is 14 °C and dry in Utrecht." };
    return { content: `echo: ${typeof last.content === "string" ? last.content : "…"}` };
  });
}

/** One chat turn through the proxy, as an application would send it. */
async function turn(stack: Stack, key: string, sessionId: string, messages: unknown[]) {
  await stack
    .client(key)
    .chat.completions.create(
      { model: "demo-model", messages: messages as never },
      { headers: { "X-Session-ID": sessionId } },
    );
}

describe.skipIf(available !== true)("the inspector page in chromium", () => {
  let stack: Stack;
  let browser: Browser;
  const alice = randomUUID();
  const bob = randomUUID();

  beforeAll(async () => {
    stack = await startStack({ apiKeys: KEYS, memoryOptions: { window: 6 } });
    scriptReplies(stack);
    browser = await launchBrowser();
    await turn(stack, "tk-alice", alice, [{ role: "user", content: "What is the weather in Utrecht?" }]);
    await turn(stack, "tk-alice", alice, [
      { role: "tool", tool_call_id: "call_w1", content: '{"celsius":14,"sky":"dry"}' },
    ]);
    for (const text of ["Plan a walk", "Which route?", "Along the canal"]) {
      await turn(stack, "tk-alice", alice, [{ role: "user", content: text }]);
    }
    await turn(stack, "tk-bob", bob, [{ role: "user", content: "Bob's private question" }]);
  });
  afterAll(async () => {
    await browser?.close();
    await stack?.close();
  });

  /** Opens a page of the inspector and, when a key is given, enters it in the page's key dialog. */
  const open = (path: string, key: string | null, options: BrowserContextOptions = {}) =>
    openInspector(browser, `${stack.url}${path}`, key, options);

  const titles = (page: Page) => page.locator("#sessions .title").allTextContents();

  it("asks for the key once, lists the caller's sessions, and never shows another user's", async () => {
    const { page, errors, close } = await open("/ui", "tk-alice");
    await expect.poll(() => titles(page)).toContain("What is the weather in Utrecht?");
    const row = page.locator(`a[data-session="${alice}"]`);
    await expect.poll(() => row.locator(".meta").textContent()).toMatch(/^10 messages · .* · memory$/);
    expect(await page.locator("#store").textContent()).toBe("store: memory");
    // The key stays in this tab: a reload does not ask again.
    await page.reload();
    await expect.poll(() => titles(page)).toContain("What is the weather in Utrecht?");
    expect(await page.locator("dialog#key[open]").count()).toBe(0);
    expect(errors).toEqual([]);
    await close();

    const asBob = await open("/ui", "tk-bob");
    await expect.poll(() => titles(asBob.page)).toEqual(["Bob's private question"]);
    await asBob.page.goto(`${stack.url}/ui/s/${alice}`);
    await expect.poll(() => asBob.page.locator("#error").textContent()).toMatch(/No such session/);
    expect(await asBob.page.locator("body").textContent()).not.toMatch(/Utrecht|canal/);
    await asBob.close();
  });

  it("folds a tool call together with its result in the transcript, and links to a message by #seq", async () => {
    const { page, errors, close } = await open(`/ui/s/${alice}#3`, "tk-alice");
    const call = page.locator('details.tool[data-call="call_w1"]');
    await call.waitFor();
    // The deep link to the tool result (#3) opened the call it belongs to and marked it.
    expect(await call.evaluate((d) => (d as unknown as { open: boolean }).open)).toBe(true);
    expect(await call.locator(".tool-name").textContent()).toBe("⚙ get_weather");
    expect(await call.locator('.tool-part.result[data-seq="3"]').textContent()).toContain('{"celsius":14,"sky":"dry"}');
    expect(await call.locator(".target").count()).toBe(1);
    // The result is not shown again on its own.
    expect(await page.locator('article[data-seq="3"]').count()).toBe(0);
    const reply = page.locator('article[data-seq="4"]');
    expect(await reply.locator(".model").textContent()).toBe("demo-model");
    expect(await reply.locator(".content").textContent()).toBe("It is 14 °C and dry in Utrecht.");
    expect(errors).toEqual([]);
    await close();
  });

  it("shows what the context leaves out once the window is exceeded, and previews another window without storing it", async () => {
    const stateBefore = await (
      await stack.request("GET", `/v1/sessions/${alice}/state`, { headers: { authorization: "Bearer tk-alice" } })
    ).json();
    const { page, close } = await open(`/ui/s/${alice}/context`, "tk-alice");
    const window = page.locator('.left-out li[data-reason="window"]');
    await window.waitFor();
    // 10 stored messages, a window of 6: #1–#4 are older than the window.
    expect(await window.textContent()).toBe("4 older than the message window: #1–#4");
    expect(await page.locator(".sent-msg").count()).toBe(6);
    expect(await page.locator('.parts tr[data-part="history"] .num').textContent()).not.toBe("0");
    await page.locator("#window").fill("2");
    await page.locator("#window").press("Enter");
    await expect.poll(() => window.textContent()).toBe("8 older than the message window: #1–#8");
    await page.locator('.left-out a[data-seq-link="1"]').click();
    await page.waitForURL(`**/ui/s/${alice}#1`);
    expect(await page.locator('article[data-seq="1"].target').count()).toBe(1);
    await close();
    const stateAfter = await (
      await stack.request("GET", `/v1/sessions/${alice}/state`, { headers: { authorization: "Bearer tk-alice" } })
    ).json();
    expect(stateAfter).toEqual(stateBefore);
  });

  it("shows stored markup and markdown images as text: nothing runs and nothing loads", async () => {
    const id = randomUUID();
    const hostile = [
      `<img src=x onerror="window.__pwned = 'img'">`,
      `<script>window.__pwned = 'script'</script>`,
      `![tracker](${stack.fake.url}/track.png)`,
    ].join("\n");
    await turn(stack, "tk-alice", id, [{ role: "user", content: hostile }]);
    const { page, errors, close } = await open(`/ui/s/${id}`, "tk-alice");
    const content = page.locator('article[data-seq="1"] .content');
    await content.waitFor();
    expect(await content.textContent()).toBe(hostile);
    expect(await page.locator("#view img, #view script").count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as { __pwned?: string }).__pwned)).toBeUndefined();
    // The title in the list and the header are text too.
    expect(await page.locator("#session-title").textContent()).toContain("<img src=x onerror=");
    expect(stack.fake.requests.some((r) => r.path.includes("track.png"))).toBe(false);
    expect(errors).toEqual([]);
    await close();
  });

  it("deletes a session only after confirmation", async () => {
    const id = randomUUID();
    await turn(stack, "tk-alice", id, [{ role: "user", content: "Delete me later" }]);
    const { page, close } = await open(`/ui/s/${id}`, "tk-alice");
    await page.locator('article[data-seq="1"]').waitFor();
    await page.locator('.actions button[data-action="delete"]').click();
    await page.locator('dialog#confirm button[data-action="cancel"]').click();
    const status = () =>
      stack
        .request("GET", `/v1/sessions/${id}`, { headers: { authorization: "Bearer tk-alice" } })
        .then((r) => r.status);
    expect(await status()).toBe(200);
    await page.locator('.actions button[data-action="delete"]').click();
    expect(await page.locator("dialog#confirm h2").textContent()).toBe("Delete this session?");
    await page.locator('dialog#confirm button[data-action="confirm"]').click();
    await page.waitForURL(`${stack.url}/ui`);
    expect(await status()).toBe(404);
    await expect.poll(() => titles(page)).not.toContain("Delete me later");
    await close();
  });

  it("forks at a message, undoes the last turn and exports JSONL, each after confirmation", async () => {
    const id = randomUUID();
    await turn(stack, "tk-alice", id, [{ role: "user", content: "First question" }]);
    await turn(stack, "tk-alice", id, [{ role: "user", content: "Second question" }]);
    const { page, close } = await open(`/ui/s/${id}`, "tk-alice");
    await page.locator('article[data-seq="4"]').waitFor();

    const download = page.waitForEvent("download");
    await page.locator('.actions button[data-action="export"]').click();
    await page.locator('dialog#confirm button[data-action="confirm"]').click();
    const file = await (await download).path();
    const lines = readFileSync(file, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.type)).toEqual([
      "threadkeep-export",
      "session",
      "message",
      "message",
      "message",
      "message",
    ]);

    await page.locator('.actions button[data-action="undo"]').click();
    await page.locator('dialog#confirm button[data-action="confirm"]').click();
    await expect.poll(() => page.locator("article.msg").count()).toBe(2);

    await page.locator('article[data-seq="1"] button.fork').click();
    expect(await page.locator("dialog#confirm h2").textContent()).toBe("Fork at #1?");
    await page.locator('dialog#confirm button[data-action="confirm"]').click();
    await page.waitForURL((url) => url.pathname.startsWith("/ui/s/") && !url.pathname.includes(id));
    await expect.poll(() => page.locator("article.msg").count()).toBe(1);
    expect(await page.locator("#session-meta").textContent()).toContain("forked from");
    await close();
  });

  it("shows new turns as they arrive", async () => {
    const { page, close } = await open(`/ui/s/${bob}`, "tk-bob");
    // The page looks for new turns every POLL_MS: under a fake clock (the page reloaded under it, the
    // key kept by the tab) the test moves to the next look instead of waiting up to 3 s for it.
    const pollMs = Number(
      /const POLL_MS = (\d+);/.exec(readFileSync(new URL("../../src/server/ui/app.js", import.meta.url), "utf8"))![1],
    );
    await page.clock.install();
    await page.reload();
    await page.locator('article[data-seq="2"]').waitFor();
    await turn(stack, "tk-bob", bob, [{ role: "user", content: "A later question" }]);
    await page.clock.fastForward(pollMs);
    await page.locator('article[data-seq="4"]').waitFor({ timeout: 10_000 });
    expect(await page.locator('article[data-seq="3"] .content').textContent()).toBe("A later question");
    await close();
  });

  it("shows a regenerated answer as a branch and switches to it", async (ctx) => {
    const doc = (await (await stack.request("GET", "/openapi.json")).json()) as { paths: Record<string, unknown> };
    if (!doc.paths["/v1/sessions/{id}/branches"]) {
      console.log("[skip] branch switching in the inspector: this server has no /v1/sessions/{id}/branches yet");
      ctx.skip();
    }
    const id = randomUUID();
    let answer = 0;
    stack.fake.setReply(() => ({ content: `Name ${++answer}` }));
    try {
      await turn(stack, "tk-alice", id, [{ role: "user", content: "Suggest a name for a cat." }]);
      // A whole-history client asks a second question, then regenerates its answer: it sends the same
      // conversation again, without the answer it replaces.
      const history = [
        { role: "user", content: "Suggest a name for a cat." },
        { role: "assistant", content: "Name 1" },
        { role: "user", content: "And one for a dog?" },
      ];
      await turn(stack, "tk-alice", id, history);
      await turn(stack, "tk-alice", id, history);
    } finally {
      scriptReplies(stack);
    }
    const { page, close } = await open(`/ui/s/${id}`, "tk-alice");
    const branch = page.locator("details.branch");
    await branch.waitFor();
    expect(await branch.locator("summary").textContent()).toContain("regenerate");
    expect(await page.locator('.transcript > article[data-seq="4"] .content').textContent()).toBe("Name 3");
    await branch.locator("summary").click();
    await expect.poll(() => branch.locator(".branch-messages .content").allTextContents()).toEqual(["Name 2"]);
    await branch.locator('button[data-action="switch-branch"]').click();
    await page.locator('dialog#confirm button[data-action="confirm"]').click();
    await expect.poll(() => page.locator('.transcript > article[data-seq="4"] .content').textContent()).toBe("Name 2");
    await page.locator("details.branch summary").first().click();
    await expect
      .poll(() => page.locator("details.branch .branch-messages .content").allTextContents())
      .toContain("Name 3");
    await close();
  });

  it("shows an answer corrected in place as an edit branch, the corrected line as the transcript", async () => {
    const id = randomUUID();
    stack.fake.setReply(() => ({ content: "17 × 3 = 41" }));
    try {
      await turn(stack, "tk-alice", id, [{ role: "user", content: "What is 17 × 3?" }]);
      stack.fake.setReply(() => ({ content: "17 × 4 = 68" }));
      const view = [
        { role: "user", content: "What is 17 × 3?" },
        { role: "assistant", content: "17 × 3 = 41" },
        { role: "user", content: "And 17 × 4?" },
      ];
      await turn(stack, "tk-alice", id, view);
      // A whole-history client (not declared) lets the person fix the wrong answer, and asks on.
      stack.fake.setReply(() => ({ content: "119" }));
      await turn(stack, "tk-alice", id, [
        view[0],
        { role: "assistant", content: "17 × 3 = 51" },
        view[2],
        { role: "assistant", content: "17 × 4 = 68" },
        { role: "user", content: "Sum?" },
      ]);
    } finally {
      scriptReplies(stack);
    }
    const { page, close } = await open(`/ui/s/${id}`, "tk-alice");
    const branch = page.locator("details.branch");
    await branch.waitFor();
    const summary = await branch.locator("summary").textContent();
    expect(summary).toContain("after #1");
    expect(summary).toContain("edit");
    expect(await page.locator('.transcript > article[data-seq="2"] .content').textContent()).toBe("17 × 3 = 51");
    await branch.locator("summary").click();
    await expect
      .poll(() => branch.locator(".branch-messages .content").allTextContents())
      .toEqual(["17 × 3 = 41", "And 17 × 4?", "17 × 4 = 68"]);
    await close();
  });

  it("is usable by keyboard", async () => {
    const { page, close } = await open("/ui", "tk-alice");
    await page.locator("#sessions a.session").first().waitFor();
    await page.keyboard.press("j");
    await page.waitForURL(/\/ui\/s\//);
    await page.locator("article.msg").first().waitFor();
    await page.keyboard.press("c");
    await page.waitForURL(/\/context$/);
    await page.locator(".tokens").waitFor();
    await page.keyboard.press("s");
    await page.waitForURL(/\/state$/);
    await page.locator(".state").waitFor();
    await page.keyboard.press("/");
    expect(await page.evaluate("document.activeElement && document.activeElement.id")).toBe("q");
    await page.keyboard.type("canal");
    await page.keyboard.press("Enter");
    await expect
      .poll(() => page.locator("#sessions .hit .title").allTextContents())
      .toEqual(["echo: Along the canal", "Along the canal"]);
    await close();
  });
});
