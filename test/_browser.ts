/**
 * Launches Debian's chromium through playwright-core for the inspector's browser tests. Outside CI a
 * missing browser skips those tests with a printed reason; under CI=true it fails the run.
 */
import { existsSync, readFileSync } from "node:fs";
import type { Browser, BrowserContext, BrowserContextOptions, Page } from "playwright-core";

/** Where the browser is looked for; THREADKEEP_TEST_CHROMIUM overrides. */
export const CHROMIUM_PATH = process.env.THREADKEEP_TEST_CHROMIUM ?? "/usr/bin/chromium";

/** `true` when the browser is there; otherwise the reason to skip. Under CI=true a missing browser throws. */
export function browserAvailable(): true | string {
  if (existsSync(CHROMIUM_PATH)) return true;
  const reason = `no browser at ${CHROMIUM_PATH} (apt-get install chromium, or set THREADKEEP_TEST_CHROMIUM)`;
  if (process.env.CI === "true") throw new Error(`CI=true and ${reason}`);
  return reason;
}

/**
 * A headless browser. playwright gives each launch a fresh temporary profile (its own
 * --user-data-dir, removed on close), so no state leaks between runs.
 */
export async function launchBrowser(): Promise<Browser> {
  const { chromium } = await import("playwright-core");
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
}

/**
 * How long one browser step (a navigation, a wait for an element) may take in these tests: below the
 * tests' own 30 s, so a step that never completes fails with Playwright's account of what it waited
 * for instead of a bare test time-out (one such time-out, 2026-12-07, said nothing of where it hung).
 */
const STEP_TIMEOUT_MS = 15_000;

/** Gives every step of `context`'s pages {@link STEP_TIMEOUT_MS}. */
function boundSteps(context: BrowserContext): BrowserContext {
  context.setDefaultTimeout(STEP_TIMEOUT_MS);
  context.setDefaultNavigationTimeout(STEP_TIMEOUT_MS);
  return context;
}

/** Where the inspector keeps the key in the tab (`KEY_STORAGE` in the inspector's `api.js`). */
const KEY_STORAGE = /const KEY_STORAGE = "([^"]+)";/.exec(
  readFileSync(new URL("../src/server/ui/api.js", import.meta.url), "utf8"),
)![1];

/**
 * Answers the inspector's key dialog with `key` and resolves once the tab holds it. The dialog's
 * `close` event, after which the page stores the key, is a task of its own: a reload or navigation
 * straight after the Enter could leave before it and find the tab without a key.
 */
async function enterKey(page: Page, key: string): Promise<void> {
  await page.locator("#key-input").fill(key);
  await page.locator("#key-input").press("Enter");
  // A function, not an expression string: Playwright evaluates a string anew on every poll, and the
  // inspector's Content-Security-Policy (no 'unsafe-eval') refuses every evaluation after the first,
  // so a key not yet stored at the first look failed the test with an EvalError; a function is
  // evaluated once and then called. It runs in the page, whose DOM types these tests are not compiled with.
  await page.waitForFunction(
    ([storageKey, expected]) =>
      (globalThis as unknown as { sessionStorage: { getItem(name: string): string | null } }).sessionStorage.getItem(
        storageKey,
      ) === expected,
    [KEY_STORAGE, key] as const,
  );
}

/**
 * Opens `url`, a page of the inspector, in a browser context of its own (every step bounded by
 * {@link STEP_TIMEOUT_MS}) and, when `key` is given, answers the key dialog with it; errors the page
 * throws are collected in `errors`.
 */
export async function openInspector(
  browser: Browser,
  url: string,
  key: string | null,
  options: BrowserContextOptions = {},
): Promise<{ page: Page; errors: string[]; close: () => Promise<void> }> {
  const context = boundSteps(
    await browser.newContext({
      viewport: { width: 1280, height: 800 },
      timezoneId: "UTC",
      locale: "en-GB",
      ...options,
    }),
  );
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  await page.goto(url);
  if (key) await enterKey(page, key);
  return { page, errors, close: () => context.close() };
}
