/**
 * `npm run bench -- recall`: (1) search latency per store (memory, file, SQLite, PostgreSQL, Redis) for
 * fulltext, semantic and hybrid, at 100K and 1M messages (10K sessions, 1,000 owners), searching a
 * random owner's 10 sessions; (2) recall@5 on generated questions whose answers lie outside the window,
 * substring vs fulltext vs semantic vs hybrid; (3) tokens sent per turn over a 200-turn conversation:
 * the whole history, the window alone, and summaries plus the window.
 * Embeddings come from the test suite's synonym model (in process, no HTTP), so the ranking is real
 * but the vectors are small (16 dimensions); a production model's 768–3072 dimensions cost more per
 * scanned vector. Stores are filled through their own API in bulk (bench/_recall-data.ts).
 * `BENCH_RECALL_STORES=sqlite,postgres` and `BENCH_RECALL_SIZES=100000,1000000` narrow a run;
 * `BENCH_RECALL_SESSIONS_PER_OWNER=10000` puts every session under one owner (a server without API
 * keys), `BENCH_RECALL_ITERATIONS` sets the searches per cell; `BENCH_QUICK=1` builds 4K and 20K messages.
 */
import type { Embedder } from "../src/core/embeddings.js";
import { createMemory } from "../src/create-memory.js";
import type { SearchMode } from "../src/core/search.js";
import type { MessageInput } from "../src/core/types.js";
import { createMemoryStore } from "../src/stores/in-process/index.js";
import { createSqliteStore } from "../src/stores/sqlite/index.js";
import { fakeEmbedding, SYNONYM_GROUPS } from "../test/_fake-upstream.js";
import { collectGarbage, formatMicros, measure, printTable, QUICK, seededRandom } from "./_harness.js";
import { BENCH_EMBEDDING_MODEL, bulkLoad, FILLER, sentences } from "./_recall-data.js";
import { benchStoreNames, openBenchStore } from "./_recall-stores.js";

const embedder: Embedder = { model: BENCH_EMBEDDING_MODEL, embed: async (texts) => texts.map(fakeEmbedding) };
const sentence = sentences(13);
// Seeded like the sentences, so every run asks the same questions.
const codes = seededRandom(1_313);

/**
 * (1) Search latency at two store sizes, built one after the other (100K, then 1M messages; BENCH_QUICK:
 * 4K, then 20K): sessions of 100 messages, 10 sessions an owner, so every owner holds 1,000 messages at
 * every size and only the store grows. Each search is by a random owner across their 10 sessions.
 */
async function latency(): Promise<void> {
  const perSession = 100;
  const sessionsPerOwner = Number(process.env.BENCH_RECALL_SESSIONS_PER_OWNER ?? 10);
  const sizes =
    process.env.BENCH_RECALL_SIZES?.split(",").map(Number) ?? (QUICK ? [4_000, 20_000] : [100_000, 1_000_000]);
  const iterations = Number(process.env.BENCH_RECALL_ITERATIONS ?? (QUICK ? 20 : 200));
  const rows: string[][] = [];
  for (const name of benchStoreNames()) {
    const opened = await openBenchStore(name);
    if (typeof opened === "string") {
      console.log(`Skipping ${name}: ${opened}`);
      continue;
    }
    const { store } = opened;
    const memory = createMemory({ store, embedder, ttlMs: 0 });
    const queryRandom = seededRandom(1313);
    const qpick = <T>(items: readonly T[]) => items[Math.floor(queryRandom() * items.length)];
    let built = 0;
    try {
      for (const size of sizes) {
        const to = size / perSession;
        const seconds = await bulkLoad(
          store,
          { from: built, to, perSession, sessionsPerOwner },
          { concurrency: opened.concurrency },
        );
        built = to;
        await opened.settle?.();
        const owners = to / sessionsPerOwner;
        const cells = [name, size.toLocaleString("en"), `${seconds.toFixed(0)} s`];
        for (const mode of ["fulltext", "semantic", "hybrid"] as SearchMode[]) {
          if (mode === "fulltext" && !store.capabilities.fullTextSearch) {
            cells.push("–");
            continue;
          }
          const query = () => `${qpick(qpick(SYNONYM_GROUPS))} ${qpick(FILLER).split(" ")[0]}`;
          const search = () =>
            memory.search(query(), { userId: `owner-${Math.floor(queryRandom() * owners)}`, mode, limit: 5 });
          try {
            const m = await measure(`${name} ${mode}`, search, iterations, { warmup: Math.min(20, iterations) });
            cells.push(`${formatMicros(m.p50)} / ${formatMicros(m.p99)}`);
          } catch (error) {
            // A search past the store's timeout is a result too (one owner holding everything).
            cells.push(`failed: ${(error as { code?: string }).code ?? (error as Error).message}`);
          }
        }
        rows.push(cells);
        console.error(`  ${cells.join(" | ")}`);
      }
    } finally {
      await memory.close();
      await opened.remove();
      collectGarbage();
    }
  }
  console.log(
    `\nSearch latency, p50 / p99, limit 5 (a random owner's ${sessionsPerOwner} sessions × 100 messages; the store holds the total):\n`,
  );
  printTable(["store", "messages", "build", "fulltext", "semantic", "hybrid"], rows);
}

/** (2) recall@5 on questions whose answers lie outside the window. */
async function recallAtFive(): Promise<void> {
  const memory = createMemory({ store: createSqliteStore({ path: ":memory:" }), embedder, ttlMs: 0 });
  const facts: [fact: string, question: string][] = [
    ["My car is a blue Volvo, plate KX-{code}", "which automobile do I drive"],
    ["I buy groceries at the market on Saturdays, order {code}", "where do I do my supermarket shopping"],
    ["Our puppy is called Bruno, chip {code}", "what is the name of my dog"],
    ["The invoice {code} has to be paid by Friday", "when is the bill due"],
    ["Our flight to Lisbon is booked, reference {code}", "what is the reference of my {code} trip"],
    ["The doctor moved my appointment, case {code}", "case {code}"],
    ["I play the guitar in a band called {code}", "what music do I play"],
    ["Forecast says rain all week, alert {code}", "do I need an umbrella"],
  ];
  const questions: { sessionId: string; seq: number; question: string }[] = [];
  const sessions = QUICK ? 10 : 40;
  for (let s = 0; s < sessions; s++) {
    const session = await memory.startSession({ userId: "rq" });
    const [fact, question] = facts[s % facts.length];
    const code = Math.floor(codes() * 0x10000)
      .toString(16)
      .padStart(4, "0")
      .toUpperCase();
    const messages: MessageInput[] = [
      { role: "user", content: `${sentence()}` },
      { role: "assistant", content: "ok" },
    ];
    messages.push({ role: "user", content: fact.replace("{code}", code) }, { role: "assistant", content: "Noted." });
    for (let i = 0; i < 40; i++) messages.push({ role: i % 2 ? "assistant" : "user", content: sentence() });
    await memory.addMessages(session.id, messages, { userId: "rq" });
    // The answer is message 3: 40 messages before the end, outside a window of 20.
    questions.push({ sessionId: session.id, seq: 3, question: question.replaceAll("{code}", code) });
  }
  await memory.idle();
  const rows: string[][] = [];
  for (const mode of ["substring", "fulltext", "semantic", "hybrid"] as SearchMode[]) {
    let found = 0;
    for (const q of questions) {
      const hits = await memory.search(q.question, { userId: "rq", sessionId: q.sessionId, mode, limit: 5 });
      if (hits.some((h) => h.seq === q.seq)) found++;
    }
    rows.push([mode, `${found}/${questions.length}`, (found / questions.length).toFixed(2)]);
  }
  await memory.close();
  console.log("\nrecall@5, one question per session, answer 40 messages back (outside a window of 20):\n");
  printTable(["mode", "found", "recall@5"], rows);
}

/** (3) Tokens per turn over 200 turns. */
async function tokensPerTurn(): Promise<void> {
  const summary =
    "The user asked a long series of numbered questions about topics and their details; answers were given. ".repeat(4);
  const variants: [string, Partial<Parameters<typeof createMemory>[0]>][] = [
    [
      "whole history (what a client re-sending everything sends)",
      { window: 1000, tokenBudget: 1_000_000, maxMessages: 0 },
    ],
    ["window of 20, no summaries", {}],
    ["summaries + window (serve's default)", { summarizer: { summarize: async () => summary } }],
  ];
  const rows: string[][] = [];
  for (const [label, options] of variants) {
    const memory = createMemory({ store: createMemoryStore(), ...options });
    const session = await memory.startSession();
    const tokens: number[] = [];
    for (let i = 1; i <= 200; i++) {
      const input = [
        { role: "user" as const, content: `Question ${i}: what do you make of topic number ${i} and its details?` },
      ];
      const context = await memory.buildContext(session.id, { input, tokenBudget: options.tokenBudget });
      tokens.push(context.tokens);
      await memory.addMessages(session.id, [
        ...input,
        { role: "assistant", content: `Answer ${i}: topic ${i} is interesting, and here are some details about it.` },
      ]);
    }
    await memory.close();
    const at = (n: number) => String(tokens[n - 1]);
    const late = tokens.slice(100);
    rows.push([
      label,
      at(10),
      at(50),
      at(100),
      at(200),
      String(Math.max(...late)),
      String(tokens.reduce((a, b) => a + b, 0)),
    ]);
  }
  console.log("\nTokens sent per turn over a 200-turn conversation (tokenizer o200k; ~30 tokens a message):\n");
  printTable(["context", "turn 10", "turn 50", "turn 100", "turn 200", "max 101–200", "total 200 turns"], rows);
}

await tokensPerTurn();
await recallAtFive();
await latency();
