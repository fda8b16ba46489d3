/**
 * The cross-process turn-ordering check shared by the backends whose leases hold across processes:
 * two Node processes open the same store and each runs 100 concurrent turns (load the window, think,
 * commit the question, commit the answer) on one session, under the turn lease. On a store with
 * `capabilities.combinedTurn` every other turn is taken as the proxy takes it: `openTurn` (lease and
 * window in one call) and an answer that releases the lease (`releaseLease`), in line with the others.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { expect } from "vitest";
import type { FullStore } from "../../src/core/types.js";

/** How a child process opens the store: `(await import(module))[factory](options)`. */
export interface StoreRecipe {
  /** A module path relative to the repository root, e.g. `src/stores/redis/index.ts`. */
  module: string;
  factory: string;
  options: Record<string, unknown>;
}

const root = fileURLToPath(new URL("../..", import.meta.url));

/** One process: 100 concurrent turns, started when the parent says go. */
const TURN_WORKER = `
const [recipe, sessionId, name] = process.argv.slice(1);
const { module, factory, options } = JSON.parse(recipe);
const store = (await import(new URL(module, "file://" + process.cwd() + "/").href))[factory](options);
const { userId } = await store.getSession(sessionId);
// Connected: say so, and start when the parent says go (it waits for both processes).
process.stdout.write("ready\\n");
await new Promise((resolve) => process.stdin.once("data", resolve));
process.stdout.write("started " + Date.now() + "\\n");
await Promise.all(Array.from({ length: 100 }, async (_, i) => {
  // Requests trickle in over 200 ms, as they would from clients, so the two processes' turns interleave
  // even when one of them starts late on a busy machine.
  await new Promise((resolve) => setTimeout(resolve, Math.random() * 200));
  const combined = store.capabilities.combinedTurn && i % 2 === 1;
  let lease, history;
  if (combined) {
    ({ lease, messages: history } = await store.openTurn(sessionId, { owner: { userId }, last: 20, lease: { waitMs: 60000 } }));
  } else {
    lease = await store.acquireLease(sessionId, { waitMs: 60000 });
  }
  try {
    history ??= await store.getMessages(sessionId, { last: 20 });
    await new Promise((resolve) => setTimeout(resolve, Math.random() * 2));
    const turn = name + i;
    await store.appendMessages(sessionId, [{ role: "user", content: turn }], { fence: lease.fence });
    const seen = history.length ? history[history.length - 1].seq : 0;
    await store.appendMessages(sessionId, [{ role: "assistant", content: turn + " saw " + seen }], { fence: lease.fence, releaseLease: combined });
  } finally {
    await lease.release();
  }
}));
await store.close();
`;

/**
 * Runs two processes × 100 turns on `sessionId` (already created in `store`) and asserts: contiguous
 * seq, each turn's question and answer adjacent, each turn saw exactly the turn before it, none lost
 * or duplicated, and the processes really took turns with each other.
 */
export async function expectTwoProcessTurnOrder(
  store: FullStore,
  recipe: StoreRecipe,
  sessionId: string,
): Promise<void> {
  const args = ["--import", "tsx", "--input-type=module", "-e", TURN_WORKER, JSON.stringify(recipe), sessionId];
  const children = ["a", "b"].map((name) => spawn(process.execPath, [...args, name], { cwd: root }));
  const exits = children.map(
    (child) =>
      new Promise<{ code: number | null; stderr: string; stdout: string }>((resolve) => {
        let stderr = "";
        let stdout = "";
        child.stderr.on("data", (chunk) => (stderr += chunk));
        child.stdout.on("data", (chunk) => (stdout += chunk));
        child.on("close", (code) => resolve({ code, stderr, stdout }));
      }),
  );
  await Promise.race([
    Promise.all(children.map((child) => new Promise((resolve) => child.stdout.once("data", resolve)))),
    Promise.all(exits),
  ]);
  for (const child of children) child.stdin.end("go\n");
  const exited = await Promise.all(exits);
  for (const exit of exited) expect(exit.code, exit.stderr).toBe(0);
  // When each process began its turns (a late start leaves its turns behind all of the other's).
  const startedAt = exited.map((exit) => Number(/started (\d+)/.exec(exit.stdout)?.[1]));
  const all = await store.getMessages(sessionId);
  expect(all.map((m) => m.seq)).toEqual(Array.from({ length: 400 }, (_, i) => i + 1));
  const turns = all.filter((m) => m.role === "user").map((m) => String(m.content));
  expect(new Set(turns).size).toBe(200);
  for (let i = 0; i < 400; i += 2) {
    expect(all[i].role).toBe("user");
    // Adjacent, and each turn saw exactly the history before it: the previous turn's reply.
    expect(all[i + 1].content).toBe(`${all[i].content} saw ${i}`);
  }
  // The processes took turns with each other, not one after the other: at least one process's turns
  // are split by the other's (two switches). More are usual, but how many depends on how the scheduler
  // runs the two processes while they join the line (a×57 b×100 a×43 is correct FIFO when a stalls).
  const switches = turns.filter((t, i) => i > 0 && t[0] !== turns[i - 1][0]).length;
  const order = runsOf(turns.map((t) => t[0]));
  expect(
    switches,
    `turns in order, by process: ${order}; b began ${startedAt[1] - startedAt[0]} ms after a`,
  ).toBeGreaterThanOrEqual(2);
}

/** `a×3 b×1 a×2` for a, a, a, b, a, a. */
function runsOf(names: string[]): string {
  const runs: [string, number][] = [];
  for (const name of names) {
    const last = runs.at(-1);
    if (last?.[0] === name) last[1]++;
    else runs.push([name, 1]);
  }
  return runs.map(([name, n]) => `${name}×${n}`).join(" ");
}
