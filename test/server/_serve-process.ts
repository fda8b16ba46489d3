/**
 * `threadkeep serve` as a real child process, for tests of several processes: workers on one port,
 * instances sharing a store, an instance killed mid-turn. The CLI runs from `dist/` when that build is
 * up to date, else from `src/` through tsx (`cliArgs`).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { cliArgs } from "../_dist.js";
import type { FakeUpstream } from "../_fake-upstream.js";

/** A started `serve` process. */
export interface ServeProcess {
  child: ChildProcess;
  /** The URL it prints once listening; rejects if it exits first. */
  listening: Promise<string>;
  /** Its exit code. */
  exited: Promise<number | null>;
  output(): { stdout: string; stderr: string };
}

/** Every process started here, so a test's cleanup can kill what is left. */
export const serveProcesses: ChildProcess[] = [];

/** Kills (SIGKILL) every started process still running. */
export function killServeProcesses(): void {
  for (const child of serveProcesses.splice(0)) if (child.exitCode === null) child.kill("SIGKILL");
}

/** `threadkeep serve --port 0 …args` against `upstream`, with no host, port or key from the environment. */
export function startServe(args: string[], upstream: FakeUpstream): ServeProcess {
  const child = spawn(process.execPath, [...cliArgs(), "serve", "--port", "0", ...args], {
    // No fair-share limits: these tests flood one user on purpose (fair-share.test.ts tests the limits).
    env: {
      ...process.env,
      THREADKEEP_HOST: "",
      THREADKEEP_PORT: "",
      THREADKEEP_API_KEYS: "",
      THREADKEEP_UPSTREAM_URL: upstream.url,
      THREADKEEP_USER_CONCURRENCY: "0",
      THREADKEEP_USER_RATE: "off",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  serveProcesses.push(child);
  let stdout = "";
  let stderr = "";
  child.stderr?.on("data", (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const listening = new Promise<string>((resolve, reject) => {
    child.stdout?.on("data", (d) => {
      stdout += d;
      const match = /listening on (http:\/\/\S+)/.exec(stdout);
      if (match) resolve(match[1]);
    });
    exited.then((code) => reject(new Error(`serve exited ${code}: ${stderr}`)));
  });
  listening.catch(() => {});
  return { child, listening, exited, output: () => ({ stdout, stderr }) };
}

/** A thin client's chat turn on `sessionId` (one user message): status, warning header and body. */
export async function chatTurn(url: string, sessionId: string, content: string) {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": sessionId },
    body: JSON.stringify({ model: "m", messages: [{ role: "user", content }] }),
  });
  return { status: res.status, warning: res.headers.get("x-threadkeep-warning"), body: await res.text() };
}
