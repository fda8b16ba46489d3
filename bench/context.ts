/**
 * Context assembly benchmark: p50/p99 of `assembleContext` on a 200-message session (user turns,
 * answers, tool calls with results, at realistic lengths) with an 8,000-token budget, with the
 * token-count cache warm (every turn after the first) and cold, next to `Memory.buildContext` on the
 * in-memory store and the store reads it makes, so the cost beyond the store read shows.
 *
 * Every timed call gets freshly parsed messages, as a store read delivers them (untimed), so string
 * hashes cached on reused objects do not flatter the warm numbers. `BENCH_QUICK=1` runs fewer rounds.
 */
import { assembleContext } from "../src/core/context/assemble.js";
import { clearTokenCache } from "../src/core/context/tokens.js";
import type { ContextInput } from "../src/core/context/types.js";
import { createMemory } from "../src/create-memory.js";
import type { Message, MessageInput, FullStore } from "../src/core/types.js";
import { createMemoryStore } from "../src/stores/in-process/index.js";
import { collectGarbage, formatMicros, percentile, printTable, QUICK, seededRandom } from "./_harness.js";

const WORDS = (
  "please add a task to buy groceries tomorrow morning and remind me about the meeting with the team on friday " +
  "which products do you need for that recipe milk eggs flour sugar butter sure I added it to your list anything " +
  "else delete that task yes do it thanks the weather in Amsterdam is mild with rain expected later this week"
).split(" ");

/** 200 messages: about a third user turns, answers of a few sentences, a fifth of turns using a tool. */
function session(count: number): Message[] {
  const rand = seededRandom(42);
  const text = (min: number, max: number) =>
    Array.from({ length: min + Math.floor(rand() * (max - min)) }, () => WORDS[Math.floor(rand() * WORDS.length)]).join(
      " ",
    );
  const out: MessageInput[] = [];
  let call = 0;
  while (out.length < count) {
    out.push({ role: "user", content: text(6, 50) });
    if (rand() < 0.2) {
      const id = `call_${call++}_${Math.floor(rand() * 1e9).toString(36)}`;
      out.push({
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id,
            type: "function",
            function: { name: "search_tasks", arguments: JSON.stringify({ query: text(2, 6), limit: 5 }) },
          },
        ],
      });
      out.push({
        role: "tool",
        tool_call_id: id,
        content: JSON.stringify({ results: [text(10, 40), text(10, 40), text(10, 40)] }),
      });
    }
    out.push({ role: "assistant", content: text(25, 220) });
  }
  return out.slice(0, count).map((m, i) => ({ ...m, seq: i + 1, createdAt: 1_700_000_000_000 + i }) as Message);
}

const history = session(200);
const base: Omit<ContextInput, "history" | "window"> = {
  system: [{ role: "system", content: "You are a helpful assistant that manages the user's tasks. Be brief." }],
  summaries: [{ id: 1, fromSeq: 1, toSeq: 120, content: WORDS.slice(0, 60).join(" "), createdAt: 1 }],
  state: {
    version: 3,
    data: { conversation: { references: [{ type: "task", id: 42, label: "buy groceries", at: 1 }] } },
  },
  input: [{ role: "user", content: "Actually, make that due tomorrow" }],
  tokenBudget: 8000,
  model: "gpt-4o-mini",
};

interface Row {
  name: string;
  samples: number[];
  note: string;
}

/** Times `fn` on a fresh copy of `messages` per call; `cold` forgets cached token counts first. */
function time(name: string, messages: Message[], window: number, iterations: number, cold: boolean): Row {
  const json = JSON.stringify(messages);
  let last = assembleContext({ ...base, history: JSON.parse(json), window });
  for (let i = 0; i < 500; i++) assembleContext({ ...base, history: JSON.parse(json), window });
  const samples: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const copy = JSON.parse(json) as Message[];
    if (cold) clearTokenCache();
    const start = performance.now();
    last = assembleContext({ ...base, history: copy, window });
    samples.push((performance.now() - start) * 1000);
  }
  const note = `${last.includedSeqs.length} msgs, ${last.tokens} tokens, left out ${last.omitted.messages} (budget ${last.omitted.reasons?.budget})`;
  return { name, samples, note };
}

async function timeAsync(name: string, iterations: number, fn: () => Promise<unknown>, note: string): Promise<Row> {
  for (let i = 0; i < 100; i++) await fn();
  const samples: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const start = performance.now();
    await fn();
    samples.push((performance.now() - start) * 1000);
  }
  return { name, samples, note };
}

const warmRounds = QUICK ? 300 : 3000;
const coldRounds = QUICK ? 30 : 300;
const rows: Row[] = [];
const last20 = history.slice(-20);
rows.push(time("window 20, the 20 read (as buildContext), warm", last20, 20, warmRounds, false));
rows.push(time("window 20, all 200 passed in, warm", history, 20, warmRounds, false));
rows.push(time("window 200 (budget bites), warm", history, 200, warmRounds, false));
collectGarbage();
rows.push(time("window 20, the 20 read, cold", last20, 20, coldRounds, true));
rows.push(time("window 200 (budget bites), cold", history, 200, coldRounds, true));
collectGarbage();

// The same turn through Memory on the in-memory store, and the store reads alone.
const store: FullStore = createMemoryStore({ ttlMs: 0 });
const memory = createMemory({ store });
const chat = await memory.startSession({ id: "00000000-0000-4000-8000-00000000c0de" });
await chat.addMessages(history.map(({ seq: _s, createdAt: _c, ...m }) => m));
await store.saveSummary(chat.id, base.summaries[0]);
await memory.updateState(chat.id, () => base.state!.data);
const reads = () =>
  Promise.all([store.getMessages(chat.id, { last: 20 }), store.listSummaries(chat.id), store.getState(chat.id)]);
const turn = { system: base.system, input: base.input, model: base.model };
rows.push(await timeAsync("store reads of a turn (memory store)", warmRounds, reads, "last 20 + summaries + state"));
rows.push(
  await timeAsync(
    "Memory.buildContext (memory store), warm",
    warmRounds,
    () => chat.context(turn),
    "reads + ownership check + assembly",
  ),
);
await memory.close();

console.log(
  `Context assembly, 200-message session, budget 8,000 tokens (${history.filter((m) => m.tool_calls).length} tool calls)\n`,
);
printTable(
  ["case", "p50", "p99", "result"],
  rows.map((r) => {
    const sorted = [...r.samples].sort((a, b) => a - b);
    return [r.name, formatMicros(percentile(sorted, 50)), formatMicros(percentile(sorted, 99)), r.note];
  }),
);
