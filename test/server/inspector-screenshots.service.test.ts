/**
 * Screenshots of each inspector view, light and dark, for docs/inspector.md. The content is fixed:
 * session ids, texts and (through a frozen Date in this process and a fixed clock in the page) every
 * time shown, so a run on the same machine writes the same pictures again. They go to docs/inspector/
 * only with UPDATE_SCREENSHOTS=1 (a plain test run leaves the checkout clean); otherwise to a
 * temporary folder, and the test still takes and checks every one.
 */
import { mkdirSync, mkdtempSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { browserAvailable, launchBrowser } from "../_browser.js";
import { type Stack, startStack } from "./_stack.js";

const available = browserAvailable();
if (available !== true) console.log(`[skip] inspector screenshots: ${available}`);

const OUT =
  process.env.UPDATE_SCREENSHOTS === "1"
    ? fileURLToPath(new URL("../../docs/inspector/", import.meta.url))
    : `${mkdtempSync(join(tmpdir(), "threadkeep-shots-"))}/`;
const T0 = Date.UTC(2026, 10, 20, 9, 0, 0);
const TRIP = "3f2b8c1e-6d1a-4c3e-9f7a-2b9d8e1c0a55";
const EMAIL = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
const RECIPE = "a3bb189e-8bf9-4888-9912-ace4e6543002";
const MOVE = "5d2c4b7a-1e3f-4a6b-8c9d-0e1f2a3b4c5d";
const AUTH = { authorization: "Bearer tk-demo" };

const hotels = {
  id: "call_h1",
  type: "function",
  function: { name: "search_hotels", arguments: '{"near":"Dom tower","nights":1}' },
};
const weather = {
  id: "call_w1",
  type: "function",
  function: { name: "get_weather", arguments: '{"city":"Utrecht","day":"Saturday"}' },
};
const REPLIES: Record<string, { content?: string; tool_calls?: unknown[] }> = {
  "Plan a weekend trip to Utrecht for two": { content: "Happy to. Are you arriving on Saturday morning?" },
  "Yes, by train from Amsterdam": { content: "The 9:12 intercity from Amsterdam Centraal arrives at 9:39." },
  "Find a hotel near the Dom tower": { tool_calls: [hotels] },
  call_h1: { content: "Canal House (€114) and Hotel Dom (€129) both have a room on Saturday." },
  "Book the Canal House": { content: "Booked: Canal House, Saturday, one night. Confirmation TK-4821." },
  "What's the weather on Saturday?": { tool_calls: [weather] },
  call_w1: { content: "14 °C and dry, a light breeze in the afternoon." },
  "Cancel that booking": { content: "Cancel booking TK-4821 at Canal House? Reply yes to confirm." },
};

describe.skipIf(available !== true)("inspector screenshots", () => {
  let stack: Stack;
  let browser: Browser;
  let clock = T0;
  const tick = (minutes = 1) => vi.setSystemTime((clock += minutes * 60_000));

  async function turn(session: string, message: Record<string, unknown>) {
    tick();
    await stack
      .client("tk-demo")
      .chat.completions.create(
        { model: "gpt-4o-mini", messages: [message as never] },
        { headers: { "X-Session-ID": session } },
      );
  }

  beforeAll(async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: T0 });
    stack = await startStack({
      apiKeys: { "tk-demo": "demo" },
      memoryOptions: {
        window: 8,
        summarizer: {
          summarize: async () =>
            "Planning a weekend in Utrecht for two: arriving Saturday by the 9:12 intercity from Amsterdam; hotels near the Dom tower compared.",
        },
        compaction: { threshold: 4, maxBatch: 100, background: false },
      },
    });
    stack.fake.setReply((body) => {
      const last = body.messages.at(-1);
      return REPLIES[last.role === "tool" ? last.tool_call_id : last.content] ?? { content: "Done." };
    });
    await turn(RECIPE, { role: "user", content: "A vegetarian recipe for four, under 30 minutes" });
    await turn(EMAIL, { role: "user", content: "Draft a short email to the landlord about the heating" });
    for (const text of [
      "Plan a weekend trip to Utrecht for two",
      "Yes, by train from Amsterdam",
      "Find a hotel near the Dom tower",
    ]) {
      await turn(TRIP, { role: "user", content: text });
    }
    await turn(TRIP, {
      role: "tool",
      tool_call_id: "call_h1",
      content: '{"hotels":[{"name":"Hotel Dom","price":129},{"name":"Canal House","price":114}]}',
    });
    await turn(TRIP, { role: "user", content: "Book the Canal House" });
    await turn(TRIP, { role: "user", content: "What's the weather on Saturday?" });
    await turn(TRIP, { role: "tool", tool_call_id: "call_w1", content: '{"celsius":14,"sky":"dry","wind":"light"}' });
    await turn(TRIP, { role: "user", content: "Cancel that booking" });
    tick(0);
    const at = clock;
    await stack.request("PATCH", `/v1/sessions/${TRIP}/state`, {
      headers: AUTH,
      body: {
        data: {
          conversation: {
            lastIntent: { name: "cancel_booking", at },
            references: [
              { type: "booking", id: "TK-4821", label: "Canal House, Saturday, one night", at },
              { type: "hotel", id: "canal-house", label: "Canal House", at: at - 240_000 },
            ],
            pending: {
              id: "c1",
              action: "cancel_booking",
              args: { id: "TK-4821" },
              prompt: "Cancel booking TK-4821?",
              createdAt: at,
              expiresAt: at + 300_000,
            },
          },
        },
      },
    });
    await stack.request("PUT", `/v1/sessions/${TRIP}/preferences`, {
      headers: AUTH,
      body: { pinnedSeqs: [1], sticky: true },
    });
    // Memories, at the same moment (the clock does not move, so the other pictures keep their times):
    // fixed ids order them, newest first by id.
    const demo = { userId: "demo" };
    const remember = (id: string, text: string, source?: { kind: "session"; sessionId: string; seqs: number[] }) =>
      stack.memory.memories.add(
        { id: `00000000-0000-4000-8000-00000000000${id}`, text, ...(source ? { source } : {}) },
        demo,
      );
    await stack.memory.addMessages(MOVE, [{ role: "user", content: "We are moving to Utrecht in March" }], demo);
    await remember("1", "is moving to Utrecht in March", { kind: "session", sessionId: MOVE, seqs: [1] });
    await stack.memory.deleteSession(MOVE, demo);
    await remember("2", "prefers short answers");
    await remember("3", "travels by train", { kind: "session", sessionId: TRIP, seqs: [3, 4] });
    await remember("4", "cooks for four", { kind: "session", sessionId: RECIPE, seqs: [1] });
    await stack.memory.memories.update(
      "00000000-0000-4000-8000-000000000004",
      { text: "is vegetarian, cooks for four", reason: "contradiction" },
      demo,
    );
    tick(2);
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
    await stack?.close();
    vi.useRealTimers();
  });

  async function shoot(name: string, path: string, scheme: "light" | "dark", prepare?: (page: Page) => Promise<void>) {
    const context = await browser.newContext({
      viewport: { width: 1280, height: 860 },
      colorScheme: scheme,
      timezoneId: "UTC",
      locale: "en-GB",
    });
    await context.addInitScript("sessionStorage.setItem('threadkeep.apiKey', 'tk-demo')");
    const page = await context.newPage();
    await page.clock.setFixedTime(new Date(clock));
    await page.goto(`${stack.url}${path}`);
    await page.locator("#sessions a.session").first().waitFor();
    await prepare?.(page);
    // No hover state, and every pending frame painted, so a rerun paints the same pixels.
    await page.mouse.move(0, 0);
    await page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))");
    mkdirSync(OUT, { recursive: true });
    const file = `${OUT}${name}-${scheme}.png`;
    await page.screenshot({ path: file, animations: "disabled", caret: "hide" });
    await context.close();
    expect(statSync(file).size).toBeGreaterThan(10_000);
  }

  it("takes the transcript, context, state, memories, search and confirmation views in light and dark", async () => {
    for (const scheme of ["light", "dark"] as const) {
      await shoot("transcript", `/ui/s/${TRIP}`, scheme, async (page) => {
        await page.locator('details.tool[data-call="call_h1"] summary').click();
      });
      await shoot("context", `/ui/s/${TRIP}/context`, scheme, async (page) => {
        await page.locator(".left-out").waitFor();
      });
      await shoot("state", `/ui/s/${TRIP}/state`, scheme, async (page) => {
        await page.locator(".state .pending").waitFor();
      });
    }
    await shoot("context-preview", `/ui/s/${TRIP}/context`, "light", async (page) => {
      await page.locator("#budget").fill("200");
      await page.locator("#budget").press("Enter");
      await page.locator('.left-out li[data-reason="budget"]').waitFor();
    });
    await shoot("search", `/ui/s/${TRIP}`, "light", async (page) => {
      await page.locator("#q").fill("canal");
      await page.locator("#q").press("Enter");
      await page.locator("#sessions .hit").first().waitFor();
    });
    for (const scheme of ["light", "dark"] as const) {
      await shoot("memories", "/ui/memories", scheme, async (page) => {
        await page.locator(".memory details.history summary").click();
        await page.locator(".memory details.history[open] li").waitFor();
      });
    }
    await shoot("confirm", `/ui/s/${TRIP}`, "dark", async (page) => {
      await page.locator('article[data-seq="1"]').waitFor();
      await page.locator('.actions button[data-action="delete"]').click();
      await page.locator("dialog#confirm[open]").waitFor();
    });
  }, 150_000); // twenty-two full-page screenshots in a real browser
});
