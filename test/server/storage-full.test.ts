/**
 * `threadkeep serve` on the SQLite and file stores when the disk fills up, for real: the child's
 * file-size limit (RLIMIT_FSIZE, lowered and raised again with `prlimit --pid`) makes every write
 * past 64 KiB of a file fail with EFBIG, as a full disk fails it with ENOSPC (Node ignores SIGXFSZ,
 * so the write returns the error instead of killing the process). The turn is answered `not-saved`,
 * `/readyz` and `/metrics` show the condition, the history stays readable, and writes resume by
 * themselves once the limit is raised; afterwards the file opens with every saved turn and no trace
 * of the refused ones.
 */
import { randomUUID } from "node:crypto";
import { spawnSync } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { contentText } from "../../src/core/messages.js";
import { createStore } from "../../src/stores/url.js";
import { startFakeUpstream } from "../_fake-upstream.js";
import { chatTurn, killServeProcesses, startServe } from "./_serve-process.js";

/** How far a file may grow while the "disk" is full: less than a turn of {@link BIG} needs. */
const FULL_AT = 64 * 1024;
/** A message larger than {@link FULL_AT}, so its write must grow a file past the limit. */
const BIG = "y".repeat(300_000);

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  killServeProcesses();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** `true` when `prlimit` can change a child's limits; otherwise why not (thrown under CI=true). */
function prlimitAvailable(): true | string {
  if (process.platform === "linux" && spawnSync("prlimit", ["--version"]).status === 0) return true;
  const reason = "prlimit (util-linux) is not available: the file-size limit of a running process cannot be changed here";
  if (process.env.CI === "true") throw new Error(`CI=true and ${reason}`);
  return reason;
}

/** Sets the soft file-size limit of `pid` (the hard one stays), as `prlimit` takes it: bytes or `unlimited`. */
function setFileSizeLimit(pid: number, soft: string): void {
  const run = spawnSync("prlimit", ["--pid", String(pid), `--fsize=${soft}:`], { encoding: "utf8" });
  if (run.status !== 0) throw new Error(`prlimit failed: ${run.stderr}`);
}

/** The soft file-size limit of `pid`, as `prlimit` prints it (`unlimited` or bytes). */
function fileSizeLimit(pid: number): string {
  const run = spawnSync("prlimit", ["--pid", String(pid), "--fsize", "--raw", "--noheadings", "--output=SOFT"], { encoding: "utf8" });
  if (run.status !== 0) throw new Error(`prlimit failed: ${run.stderr}`);
  return run.stdout.trim();
}

async function readyz(url: string) {
  const res = await fetch(`${url}/readyz`);
  return { status: res.status, body: (await res.json()) as { status: string; storageFull?: { since: string; error: string } } };
}

async function metric(url: string, series: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line ? Number(line.split(" ").at(-1)) : 0;
}

const STORES = [
  {
    name: "sqlite",
    url: (dir: string) => `sqlite:${join(dir, "threadkeep.db")}`,
    // SQLite reports EFBIG as SQLITE_IOERR_WRITE (ENOSPC as SQLITE_FULL).
    error: /SQLITE_IOERR_WRITE|SQLITE_FULL/,
    /** The database passes SQLite's own check. */
    async intact(dir: string) {
      const db = new Database(join(dir, "threadkeep.db"), { readonly: true });
      try {
        expect(db.pragma("integrity_check", { simple: true })).toBe("ok");
      } finally {
        db.close();
      }
    },
  },
  {
    name: "file",
    url: (dir: string) => `file:${dir}`,
    error: /EFBIG|ENOSPC/,
    /** Every line of every session file is whole, and nothing was moved to quarantine. */
    async intact(dir: string) {
      for (const name of await readdir(join(dir, "sessions"))) {
        const text = await readFile(join(dir, "sessions", name), "utf8");
        expect(text.endsWith("\n")).toBe(true);
        for (const line of text.split("\n").filter(Boolean)) expect(() => JSON.parse(line)).not.toThrow();
      }
      expect(await readdir(dir)).not.toContain("quarantine");
    },
  },
];

describe.each(STORES)("serve on a full disk ($name store)", { timeout: 30_000 }, (store) => {
  it("answers not-saved, shows it in /readyz and /metrics, keeps reading, and saves again once space returns", async (ctx) => {
    const available = prlimitAvailable();
    if (available !== true) ctx.skip(available);
    const dir = await mkdtemp(join(tmpdir(), `threadkeep-full-${store.name}-`));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const fake = await startFakeUpstream();
    cleanups.push(() => fake.close());
    fake.setReply((body) => ({ content: `re: ${String(body.messages.at(-1).content).slice(0, 12)}` }));
    // A budget that holds the large messages whole: the test is about saving them, not about cutting them.
    const serve = startServe(["--store", store.url(dir), "--token-budget", "1000000"], fake);
    const url = await serve.listening;
    const pid = serve.child.pid!;
    const session = randomUUID();

    for (const text of ["one", "two", "three"]) {
      expect(await chatTurn(url, session, text)).toMatchObject({ status: 200, warning: null });
    }
    expect((await readyz(url)).body.status).toBe("ok");

    // The disk fills up: no file of the process may grow past FULL_AT.
    const before = fileSizeLimit(pid);
    setFileSizeLimit(pid, String(FULL_AT));
    cleanups.push(async () => {
      if (serve.child.exitCode === null) setFileSizeLimit(pid, before);
    });

    const refused = await chatTurn(url, session, `full 1 ${BIG}`);
    expect(refused).toMatchObject({ status: 200, warning: "not-saved" });
    expect(JSON.parse(refused.body).choices[0].message.content).toBe("re: full 1 yyyyy");
    const ready = await readyz(url);
    expect(ready.status).toBe(200);
    expect(ready.body.status).toBe("degraded");
    expect(ready.body.storageFull?.error).toMatch(store.error);
    expect(await metric(url, "threadkeep_store_full")).toBe(1);
    expect(await metric(url, 'threadkeep_errors_total{code="storage_full"}')).toBe(1);

    // Reads go on: the next turn gets the saved history (and not the refused turn), and is refused too.
    const again = await chatTurn(url, session, `full 2 ${BIG}`);
    expect(again).toMatchObject({ status: 200, warning: "not-saved" });
    expect(fake.chatRequests().at(-1)!.body.messages.map((m: { content: string }) => m.content.slice(0, 12))).toEqual([
      "one",
      "re: one",
      "two",
      "re: two",
      "three",
      "re: three",
      "full 2 yyyyy",
    ]);
    expect(await metric(url, 'threadkeep_errors_total{code="storage_full"}')).toBe(2);
    expect(serve.child.exitCode).toBeNull();

    // Space returns: the next turn is saved, with nothing else to do, and the condition clears.
    setFileSizeLimit(pid, before);
    expect(await chatTurn(url, session, `after ${BIG}`)).toMatchObject({ status: 200, warning: null });
    expect(await readyz(url)).toMatchObject({ status: 200, body: { status: "ok" } });
    expect(await metric(url, "threadkeep_store_full")).toBe(0);

    serve.child.kill("SIGTERM");
    expect(await serve.exited).toBe(0);

    // The file opens again and holds every turn answered as saved, and nothing of the refused ones.
    await store.intact(dir);
    const reopened = await createStore(store.url(dir));
    try {
      const stored = await reopened.getMessages(session);
      expect(stored.map((m) => contentText(m.content).slice(0, 12))).toEqual([
        "one",
        "re: one",
        "two",
        "re: two",
        "three",
        "re: three",
        "after yyyyyy",
        "re: after yy",
      ]);
      expect(contentText(stored[6].content)).toBe(`after ${BIG}`);
    } finally {
      await reopened.close();
    }
  });
});
