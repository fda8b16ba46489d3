import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { cliArgs } from "../_dist.js";
import { startFakeUpstream } from "../_fake-upstream.js";

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill("SIGKILL");
});

/** Runs `threadkeep serve …` and resolves with the URL it prints, or its exit when it refuses. */
function serve(args: string[], env: Record<string, string> = {}, cwd?: string) {
  const child = spawn(process.execPath, [...cliArgs(), "serve", ...args], {
    cwd,
    env: {
      ...process.env,
      THREADKEEP_HOST: "",
      THREADKEEP_PORT: "",
      THREADKEEP_API_KEYS: "",
      THREADKEEP_UPSTREAM_URL: "",
      THREADKEEP_STORE: "",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (d) => (stdout += d));
  child.stderr?.on("data", (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const listening = new Promise<string>((resolve, reject) => {
    child.stdout?.on("data", () => {
      const match = /listening on (http:\/\/\S+)/.exec(stdout);
      if (match) resolve(match[1]);
    });
    exited.then((code) => reject(new Error(`exited ${code}: ${stderr}`)));
  });
  listening.catch(() => {});
  return { child, listening, exited, output: () => ({ stdout, stderr }) };
}

describe("threadkeep serve", { timeout: 60_000 }, () => {
  it("refuses a non-loopback address without API keys (exit code 2)", async () => {
    const run = serve(["--host", "0.0.0.0", "--port", "0", "--store", "memory:"]);
    expect(await run.exited).toBe(2);
    expect(run.output().stderr).toContain("Refusing to listen on 0.0.0.0 without API keys");
  });

  it("prints where it listens, serves turns, and shuts down cleanly on SIGTERM", async () => {
    const fake = await startFakeUpstream();
    try {
      const run = serve(["--port", "0", "--store", "memory:"], {
        THREADKEEP_UPSTREAM_URL: fake.url,
        THREADKEEP_API_KEYS: "tk-1:alice",
      });
      const url = await run.listening;
      expect(run.output().stdout).toContain(`store: memory:  upstream: ${fake.url}`);
      expect(run.output().stdout).toContain("identity: api key only (forwarded user headers ignored)");
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer tk-1" },
        body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-session-id")).toBeTruthy();
      run.child.kill("SIGTERM");
      expect(await run.exited).toBe(0);
    } finally {
      await fake.close();
    }
  });

  it("says at start which end-user identity it trusts, and checks the token", async () => {
    const run = serve(["--port", "0", "--store", "memory:", "--user-header", "X-OpenWebUI-User-Id"], {
      THREADKEEP_API_KEYS: "tk-gw:acme",
      THREADKEEP_USER_JWT_SECRET: "a-secret-shared-with-open-webui",
    });
    const url = await run.listening;
    expect(run.output().stdout).toContain(
      "identity: end users from signed X-OpenWebUI-User-Jwt (HS256, iss open-webui) (X-OpenWebUI-User-Id without it: 401)",
    );
    expect(run.output().stdout).not.toContain("a-secret-shared-with-open-webui");
    const res = await fetch(`${url}/v1/sessions`, {
      headers: { authorization: "Bearer tk-gw", "x-openwebui-user-jwt": "forged" },
    });
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("invalid_user_token");
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
  });

  it("runs on the embedded SQLite default, creating ./data", async () => {
    const dir = mkdtempSync(join(tmpdir(), "threadkeep-serve-"));
    try {
      const run = serve(["--port", "0"], {}, dir);
      const url = await run.listening;
      expect(run.output().stdout).toContain("store: sqlite:./data/threadkeep.db");
      expect(existsSync(join(dir, "data", "threadkeep.db"))).toBe(true);
      expect((await fetch(`${url}/readyz`)).status).toBe(200);
      run.child.kill("SIGINT");
      expect(await run.exited).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
