/**
 * Inspector benchmark: what the page's calls cost on a server holding 10,000 sessions of one user.
 * The sidebar's listing (`GET /v1/sessions?overview=true&limit=50`, titles and message counts) at the
 * first page and deep in the cursor walk, the plain listing for comparison, a search across every
 * session, and the page's own static files, over keep-alive HTTP on loopback, per store.
 *
 * `BENCH_QUICK=1` uses 1,000 sessions.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createMemory } from "../src/create-memory.js";
import { createServer } from "../src/server/index.js";
import { formatMicros, type Measurement, measure, printTable, QUICK } from "./_harness.js";

const SESSIONS = QUICK ? 1_000 : 10_000;
const MESSAGES = 4;
const PAGE = 50;
const USER = "bench";

async function seed(memory: ReturnType<typeof createMemory>): Promise<void> {
  const store = await memory.store();
  const base = Date.now() - SESSIONS * 1000;
  for (let i = 0; i < SESSIONS; i++) {
    const id = crypto.randomUUID();
    await store.createSession({ id, userId: USER, createdAt: base + i * 1000 });
    await store.appendMessages(id, [
      { role: "user", content: `Question ${i}: how do I plan trip number ${i}?` },
      { role: "assistant", content: `Here is a plan for trip ${i}.` },
      { role: "user", content: "Thanks, and the budget?" },
      { role: "assistant", content: "About 300 euros." },
    ]);
    await store.touchSession(id, base + i * 1000);
  }
}

async function run(name: string, storeUrl: string): Promise<Measurement[]> {
  // Without API keys every caller is the default user: the seeded one.
  const memory = createMemory({ store: storeUrl, ttlMs: 0, defaultUserId: USER });
  const start = performance.now();
  await seed(memory);
  console.log(
    `${name}: seeded ${SESSIONS.toLocaleString("en")} sessions × ${MESSAGES} messages in ${Math.round(performance.now() - start)} ms`,
  );
  const server = await createServer({ memory, port: 0 });
  const url = await server.listen();
  const get = async (path: string) => {
    const res = await fetch(`${url}${path}`);
    if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
    return res.text();
  };
  // Cursors of every page, walked once, so deep pages can be measured directly.
  const cursors: string[] = [];
  let cursor: string | null = null;
  const walkStart = performance.now();
  do {
    const page = JSON.parse(
      await get(`/v1/sessions?overview=true&limit=${PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`),
    );
    cursor = page.nextCursor;
    if (cursor) cursors.push(cursor);
  } while (cursor);
  const walkMs = performance.now() - walkStart;
  console.log(`${name}: walked ${cursors.length + 1} pages of ${PAGE} in ${Math.round(walkMs)} ms`);
  const last = encodeURIComponent(cursors.at(-1) ?? "");
  const results = [
    await measure(`${name}: list page 1, overview`, () => get(`/v1/sessions?overview=true&limit=${PAGE}`), 200),
    await measure(
      `${name}: list last page, overview`,
      () => get(`/v1/sessions?overview=true&limit=${PAGE}&cursor=${last}`),
      200,
    ),
    await measure(`${name}: list page 1, plain`, () => get(`/v1/sessions?limit=${PAGE}`), 200),
    await measure(
      `${name}: search all sessions`,
      () => get(`/v1/search?q=${encodeURIComponent("trip number 4321")}&limit=50`),
      50,
    ),
    await measure(`${name}: GET /ui`, () => get("/ui"), 500),
    await measure(`${name}: GET /ui/assets/app.js`, () => get("/ui/assets/app.js"), 500),
  ];
  await server.close();
  await memory.close();
  return results;
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "threadkeep-bench-inspector-"));
  try {
    const rows: Measurement[] = [];
    rows.push(...(await run("memory", "memory:")));
    rows.push(...(await run("sqlite", `sqlite:${join(dir, "threadkeep.db")}`)));
    console.log(`\n## Inspector calls at ${SESSIONS.toLocaleString("en")} sessions (pages of ${PAGE})\n`);
    printTable(
      ["call", "p50", "p99"],
      rows.map((m) => [m.name, formatMicros(m.p50), formatMicros(m.p99)]),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
