/**
 * Launches Debian's chromium through playwright-core for the inspector's browser tests. Outside CI a
 * missing browser skips those tests with a printed reason; under CI=true it fails the run.
 */
import { existsSync } from "node:fs";
import type { Browser } from "playwright-core";

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
