/**
 * `threadkeep serve` on the SQLite and file stores when the disk fills up, for real, two ways: the
 * child's file-size limit (RLIMIT_FSIZE, lowered and raised again with `prlimit --pid`) makes every
 * write past 64 KiB of a file fail with EFBIG (Node ignores SIGXFSZ, so the write returns the error
 * instead of killing the process); and, where the test may mount one (root), a small tmpfs filled by
 * another file fails writes with ENOSPC until that file is deleted. The turn is answered `not-saved`,
 * `/readyz` and `/metrics` show the condition, the history stays readable, and writes resume by
 * themselves once the limit is raised; afterwards the file opens with every saved turn and no trace
 * of the refused ones.
 */
import { randomUUID } from "node:crypto";
import { spawnSync } from "node:child_process";
import { appendFile, mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
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
const BIG = "y".repeat(100_000);

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  killServeProcesses();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** `true` when `prlimit` can change a child's limits; otherwise why not (thrown under CI=true). */
function prlimitAvailable(): true | string {
  if (process.platform === "linux" && spawnSync("prlimit", ["--version"]).status === 0) return true;
  const reason =
    "prlimit (util-linux) is not available: the file-size limit of a running process cannot be changed here";
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
  const run = spawnSync("prlimit", ["--pid", String(pid), "--fsize", "--raw", "--noheadings", "--output=SOFT"], {
    encoding: "utf8",
  });
  if (run.status !== 0) throw new Error(`prlimit failed: ${run.stderr}`);
  return run.stdout.trim();
}

async function readyz(url: string) {
  const res = await fetch(`${url}/readyz`);
  return {
    status: res.status,
    body: (await res.json()) as { status: string; storageFull?: { since: string; error: string } },
  };
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
    // SQLite reports ENOSPC as SQLITE_FULL, EFBIG as SQLITE_IOERR_WRITE.
    errors: { EFBIG: /SQLITE_IOERR_WRITE/, ENOSPC: /SQLITE_FULL/ },
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
    errors: { EFBIG: /EFBIG/, ENOSPC: /ENOSPC/ },
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

/** How a test fills the disk under a running `serve` and gives the space back. */
interface Disk {
  /** The folder the store lives in. */
  dir: string;
  /** The errno the full disk answers writes with. */
  errno: "EFBIG" | "ENOSPC";
  fill(pid: number): Promise<void>;
  free(pid: number): Promise<void>;
}

/**
 * Three turns saved; the disk fills; two large turns are answered `not-saved` (the second reading the
 * saved history); space returns and a large turn is saved; the store then opens with exactly the
 * turns answered as saved.
 */
async function fullDiskScenario(store: (typeof STORES)[number], disk: Disk): Promise<void> {
  const { dir } = disk;
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

  await disk.fill(pid);
  const refused = await chatTurn(url, session, `full 1 ${BIG}`);
  expect(refused).toMatchObject({ status: 200, warning: "not-saved" });
  expect(JSON.parse(refused.body).choices[0].message.content).toBe("re: full 1 yyyyy");
  const ready = await readyz(url);
  expect(ready.status).toBe(200);
  expect(ready.body.status).toBe("degraded");
  expect(ready.body.storageFull?.error).toMatch(store.errors[disk.errno]);
  expect(await metric(url, "threadkeep_store_full")).toBe(1);
  expect(await metric(url, 'threadkeep_errors_total{code="storage_full"}')).toBe(1);

  // Reads go on: the next turn gets the saved history (and not the refused turn), and is refused too.
  const again = await chatTurn(url, session, `full 2 ${BIG}`);
  expect(again).toMatchObject({ status: 200, warning: "not-saved" });
  expect(
    fake
      .chatRequests()
      .at(-1)!
      .body.messages.map((m: { content: string }) => m.content.slice(0, 12)),
  ).toEqual(["one", "re: one", "two", "re: two", "three", "re: three", "full 2 yyyyy"]);
  expect(await metric(url, 'threadkeep_errors_total{code="storage_full"}')).toBe(2);
  expect(serve.child.exitCode).toBeNull();

  // Space returns: the next turn is saved, with nothing else to do, and the condition clears.
  await disk.free(pid);
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
}

// A serve child costs ~2.5 s of CPU to start; the limit leaves room for a loaded machine (25 s seen at load 12 on 2 cores).
describe.each(STORES)("serve past its file-size limit ($name store)", { timeout: 60_000 }, (store) => {
  it("answers not-saved, shows it in /readyz and /metrics, keeps reading, and saves again once the limit is raised", async (ctx) => {
    const available = prlimitAvailable();
    if (available !== true) ctx.skip(available);
    const dir = await mkdtemp(join(tmpdir(), `threadkeep-full-${store.name}-`));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    let before = "";
    await fullDiskScenario(store, {
      dir,
      errno: "EFBIG",
      // No file of the process may grow past FULL_AT: its writes there fail with EFBIG.
      async fill(pid) {
        before = fileSizeLimit(pid);
        setFileSizeLimit(pid, String(FULL_AT));
      },
      async free(pid) {
        setFileSizeLimit(pid, before);
      },
    });
  });
});

/** A tmpfs of `size` mounted on a new folder; otherwise why not (mounting takes root, or CAP_SYS_ADMIN). */
async function mountTmpfs(size: string): Promise<string | { skip: string }> {
  if (process.platform !== "linux") return { skip: "a tmpfs can be mounted only on Linux" };
  const dir = await mkdtemp(join(tmpdir(), "threadkeep-tmpfs-"));
  const run = spawnSync("mount", ["-t", "tmpfs", "-o", `size=${size},mode=0700`, "tmpfs", dir], { encoding: "utf8" });
  if (run.status !== 0) {
    await rm(dir, { recursive: true, force: true });
    return {
      skip: `cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): ${(run.stderr || String(run.error)).trim()}`,
    };
  }
  cleanups.push(async () => {
    // Lazy: the killed serve may still hold files in it for a moment.
    spawnSync("umount", ["-l", dir]);
    await rm(dir, { recursive: true, force: true });
  });
  return dir;
}

/** Fills the filesystem of `dir` with one file of chunks until the disk says ENOSPC. */
async function fillUp(path: string): Promise<void> {
  const chunk = Buffer.alloc(16 * 1024, 0x66);
  for (;;) {
    try {
      await appendFile(path, chunk);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOSPC") return;
      throw error;
    }
  }
}

describe.each(STORES)("serve on a full tmpfs ($name store)", { timeout: 60_000 }, (store) => {
  it("answers not-saved on ENOSPC, and saves again once another file is deleted", async (ctx) => {
    const mounted = await mountTmpfs("4m");
    if (typeof mounted !== "string") return ctx.skip(mounted.skip);
    const dir = join(mounted, "store");
    await mkdir(dir);
    const filler = join(mounted, "filler");
    await fullDiskScenario(store, { dir, errno: "ENOSPC", fill: () => fillUp(filler), free: () => rm(filler) });
  });
});
