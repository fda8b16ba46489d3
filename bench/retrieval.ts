/**
 * `npm run bench -- retrieval --data <locomo.json> [--store sqlite|postgres|memory|file|redis]`: how
 * much of what people ask about their past conversations search finds, on real long multi-session
 * dialogues in LoCoMo's format (bench/_locomo.ts), not on keyword queries written to match.
 *
 * Method (issue 24, so figures compare between runs and versions): each conversation is one user
 * (an API key of its own); each of its sessions is one threadkeep session of that user, appended
 * through the library's `Memory` (one `addMessages` per session; the time is reported apart); each
 * question of categories 1–4 goes as written to `GET /v1/search?q=<question>&limit=10` of the real
 * server (`createServer`, in process, on 127.0.0.1), in each mode: the default (`auto`), `fulltext`,
 * `hybrid` (no embedder: the lexical ranking alone) and `substring`. With an embedder (`--embedding-url`
 * and `--embedding-model`, or `--fake-embedder`: bench/_retrieval-embedder.ts) every stored turn is
 * embedded after the import (`Memory.reindex`, timed apart), `auto` is `hybrid`, and two rows more:
 * `semantic` and `ranking=relevance` (the lexical ranking `auto` gives without an embedder). A
 * question scores at 5 when any of its evidence turns is among the first 5 turns returned (a hit's
 * neighbouring turns count, in rank order: k counts turns, not hits; bench/_retrieval-score.ts). Beside it, in the same run over the
 * same stored turns of the same user, the plain BM25 floor (bench/_bm25.ts), in process.
 *
 * Latency is per query: the HTTP round trip for threadkeep, the in-process ranking for BM25. Before
 * timing, one untimed search per user lets a store that indexes in the background catch up.
 * Without `--data` it prints where to get a dataset and exits 0; a `--data` file that is missing or
 * unreadable is an error.
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { isAbsolute, resolve } from "node:path";
import { parseArgs } from "node:util";
import type { Message } from "../src/core/types.js";
import { createMemory } from "../src/create-memory.js";
import { createServer } from "../src/server/index.js";
import { elapsedMs, printTable } from "./_harness.js";
import { Bm25Index } from "./_bm25.js";
import { type BenchConversation, type BenchDataset, readLocomo } from "./_locomo.js";
import { openBenchStore } from "./_recall-stores.js";
import { recallMode } from "./_retrieval-recall.js";
import { EMBEDDER_ARGS, type EmbedderChoice, embedderChoice, openBenchEmbedder } from "./_retrieval-embedder.js";
import { importSessionBundle } from "../src/transfer/session-copy.js";
import {
  AT_DEPTH,
  formatShare,
  refusedAll,
  scoreQuestion,
  summaryCells,
  Tally,
  turnKey,
  turnsOfHits,
} from "./_retrieval-score.js";

const USAGE = `The retrieval benchmark needs a dataset in LoCoMo's format (Maharana et al., 2024, "Evaluating
Very Long-Term Conversational Memory of LLM Agents"; data/locomo10.json of snap-research/LoCoMo,
CC BY-NC 4.0: do not commit or ship it). Put the file anywhere outside the repository and pass it:

  npm run bench -- retrieval --data path/to/locomo10.json [--store sqlite|postgres|memory|file|redis]
      [--mode search|recall] [--shares 5,10,15] [--embedding-url URL --embedding-model NAME | --fake-embedder]

With an embedder (any OpenAI-compatible /embeddings; a key, if it needs one, from
THREADKEEP_EMBEDDING_API_KEY), search and recall fuse its ranking with the lexical one, e.g. Ollama:
--embedding-url http://127.0.0.1:11434/v1 --embedding-model nomic-embed-text. --fake-embedder uses the
test suite's fake embeddings (no model): it measures the plumbing, not a model's quality.

Format: a JSON array of samples { sample_id, conversation, qa }, where conversation holds speaker_a,
speaker_b, session_N_date_time and session_N = [{ speaker, dia_id: "D<N>:<turn>", text, blip_caption? }],
and qa = [{ question, answer, evidence: ["D<N>:<turn>", ...], category }] (categories 1-4 are scored).`;

/** What `--store` may name (bench/_recall-stores.ts opens each on a place of its own, removed afterwards). */
const STORES = ["sqlite", "postgres", "memory", "file", "redis"];

/** The search modes asked of the server, in table order. */
const MODES = ["auto", "fulltext", "hybrid", "substring"];
/** With an embedder (`auto` is then `hybrid`): also the embeddings alone, and the lexical ranking alone. */
const EMBEDDER_MODES = ["auto", "relevance", "fulltext", "hybrid", "semantic", "substring"];

/** Where a conversation's turns went: its user, API key, and LoCoMo turn id → scoring key. */
interface Loaded {
  conversation: BenchConversation;
  userId: string;
  apiKey: string;
  keys: Map<string, string>;
  /** Every stored turn, in order, for the BM25 floor. */
  documents: { id: string; text: string }[];
}

function options(): { data?: string; store: string; mode: string; shares: number[]; embedder: EmbedderChoice } {
  const { values } = parseArgs({
    options: {
      data: { type: "string" },
      store: { type: "string", default: "sqlite" },
      mode: { type: "string", default: "search" },
      shares: { type: "string", default: "5,10,15,20,25" },
      ...EMBEDDER_ARGS,
    },
    strict: true,
  });
  const shares = (values.shares ?? "").split(",").map(Number);
  if (shares.some((s) => !(s > 0 && s <= 100)))
    throw new Error(`--shares takes percentages of the token budget, e.g. 5,10,15; got ${values.shares}`);
  return {
    data: values.data,
    store: values.store ?? "sqlite",
    mode: values.mode ?? "search",
    shares,
    embedder: embedderChoice(values),
  };
}

/** LoCoMo's `session_N_date_time` (`1:56 pm on 8 May, 2023`) as ms since the epoch (UTC), or undefined. */
function locomoTime(dateTime: string | undefined): number | undefined {
  const m = /^(\d{1,2}):(\d{2}) ?(am|pm) on (\d{1,2}) (\w+),? (\d{4})$/i.exec(dateTime?.trim() ?? "");
  if (!m) return undefined;
  const month = new Date(`${m[5]} 1, 2000 00:00 UTC`).getUTCMonth();
  if (Number.isNaN(month)) return undefined;
  const hour = (Number(m[1]) % 12) + (m[3].toLowerCase() === "pm" ? 12 : 0);
  return Date.UTC(Number(m[6]), month, Number(m[4]), hour, Number(m[2]));
}

function readDataset(path: string): BenchDataset {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new Error(`Cannot read --data ${path}: ${(error as Error).message}\n\n${USAGE}`, { cause: error });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new Error(`--data ${path} is not JSON: ${(error as Error).message}\n\n${USAGE}`, { cause: error });
  }
  return readLocomo(json);
}

/** Searches with `GET /v1/search` as a client would; the body's `data`, or the refusal's status and code. */
async function search(
  base: string,
  apiKey: string,
  q: string,
  mode: string,
): Promise<{ hits: unknown[] } | { error: string }> {
  const params = new URLSearchParams({ q, limit: String(AT_DEPTH) });
  // `relevance`: the lexical ranking `auto` gives without an embedder (the same under substring or fulltext).
  if (mode === "relevance") {
    params.set("mode", "substring");
    params.set("ranking", "relevance");
  } else if (mode !== "auto") params.set("mode", mode);
  const response = await fetch(`${base}/v1/search?${params}`, { headers: { authorization: `Bearer ${apiKey}` } });
  const body = (await response.json()) as { data?: unknown[]; error?: { code?: string } };
  if (response.status !== 200 || !Array.isArray(body.data))
    return { error: `${response.status} ${body.error?.code ?? "error"}` };
  return { hits: body.data };
}

async function main(): Promise<void> {
  const args = options();
  if (!args.data) {
    console.log(USAGE);
    return;
  }
  if (!STORES.includes(args.store)) throw new Error(`Unknown --store ${args.store}: one of ${STORES.join(", ")}`);
  if (args.mode !== "search" && args.mode !== "recall")
    throw new Error(`Unknown --mode ${args.mode}: search or recall`);
  const path = isAbsolute(args.data) ? args.data : resolve(process.env.INIT_CWD ?? process.cwd(), args.data);
  const dataset = readDataset(path);
  const { conversations } = dataset;
  const sessions = conversations.reduce((n, c) => n + c.sessions.length, 0);
  const turns = conversations.reduce((n, c) => n + c.sessions.reduce((m, s) => m + s.turns.length, 0), 0);
  const questions = conversations.reduce((n, c) => n + c.questions.length, 0);
  console.log(
    `${conversations.length} conversations, ${sessions} sessions, ${turns} turns; ${questions} questions (categories 1–4) scored` +
      (dataset.unscoredQuestions > 0 ? `, ${dataset.unscoredQuestions} not (no evidence id names a turn)` : "") +
      (dataset.unmappedEvidence.length > 0
        ? `; evidence ids naming no turn: ${dataset.unmappedEvidence.join(", ")}`
        : ""),
  );

  const opened = await openBenchStore(args.store);
  if (typeof opened === "string") throw new Error(`--store ${args.store} is not available: ${opened}`);
  const embedding = await openBenchEmbedder(args.embedder);
  const { embedder } = embedding;
  const memory = createMemory({ store: opened.store, ttlMs: 0, embedder });
  const loaded: Loaded[] = [];
  let server: Awaited<ReturnType<typeof createServer>> | undefined;
  try {
    const ingestStart = performance.now();
    for (const conversation of conversations) {
      const userId = `locomo-${conversation.id}`;
      const entry: Loaded = {
        conversation,
        userId,
        apiKey: `bench-${conversation.id}`,
        keys: new Map(),
        documents: [],
      };
      for (const session of conversation.sessions) {
        const metadata = {
          locomo: { sample: conversation.id, session: session.number, dateTime: session.dateTime ?? null },
        };
        // Imported as the export format carries sessions, so each keeps its date as its time.
        const at = locomoTime(session.dateTime) ?? Date.now();
        const id = randomUUID();
        const messages = session.turns.map(({ role, content }, i): Message => ({
          seq: i + 1,
          createdAt: at + i * 1000,
          role,
          content,
        }));
        await importSessionBundle(opened.store, {
          session: { id, userId, createdAt: at, lastActivityAt: at + messages.length * 1000, metadata },
          messages,
          summaries: [],
          state: null,
        });
        messages.forEach((message, i) => {
          const key = turnKey(id, message.seq);
          entry.keys.set(session.turns[i].id, key);
          entry.documents.push({ id: key, text: message.content as string });
        });
      }
      loaded.push(entry);
    }
    await memory.idle();
    await opened.settle?.();
    const ingestion = elapsedMs(ingestStart);
    console.log(`embedder: ${embedding.label}`);
    if (embedder) {
      const embedStart = performance.now();
      const { embedded } = await memory.reindex();
      console.log(`embedded ${embedded} turns with ${embedder.model} in ${elapsedMs(embedStart)} (Memory.reindex)`);
    }
    if (args.mode === "recall") {
      console.log(`store ${args.store}: ingestion ${ingestion} (import of each session with its date)`);
      const recallLoaded = loaded.map((l) => ({
        conversation: l.conversation,
        userId: l.userId,
        now: locomoTime(l.conversation.sessions.at(-1)?.dateTime),
        texts: new Map(l.conversation.sessions.flatMap((s) => s.turns.map((t) => [t.id, t.content] as const))),
      }));
      await recallMode({ store: opened.store, ttlMs: 0, embedder }, recallLoaded, {
        shares: args.shares,
        dateShare: 10,
        dataName: path.split("/").at(-1) ?? path,
        store: args.store,
      });
      return;
    }

    server = await createServer({
      memory,
      apiKeys: Object.fromEntries(loaded.map((l) => [l.apiKey, l.userId])),
      host: "127.0.0.1",
      port: 0,
    });
    const base = await server.listen();
    const warmStart = performance.now();
    for (const entry of loaded) await search(base, entry.apiKey, "hello", "auto");
    const warm = elapsedMs(warmStart);
    console.log(
      `store ${args.store}: ingestion ${ingestion} (Memory.addMessages, one call a session), first search per user ${warm}`,
    );

    const variants: [
      label: string,
      run: (entry: Loaded, q: string) => Promise<{ turns: string[] } | { error: string }>,
    ][] = [];
    const floors = new Map<Loaded, Bm25Index<string>>();
    const buildStart = performance.now();
    for (const entry of loaded) floors.set(entry, new Bm25Index(entry.documents));
    console.log(`BM25 floor: indexes built in ${elapsedMs(buildStart)}`);
    variants.push([
      "plain BM25 floor (in process)",
      async (entry, q) => ({
        turns: floors
          .get(entry)!
          .search(q, AT_DEPTH)
          .map((h) => h.id),
      }),
    ]);
    for (const mode of embedder ? EMBEDDER_MODES : MODES) {
      variants.push([
        mode === "relevance"
          ? "threadkeep mode=substring&ranking=relevance (auto without an embedder)"
          : `threadkeep mode=${mode}${mode === "auto" ? " (default)" : ""}`,
        async (entry, q) => {
          const result = await search(base, entry.apiKey, q, mode);
          return "error" in result ? result : { turns: turnsOfHits(result.hits) };
        },
      ]);
    }
    // Question by question, every variant in turn, so a change in the machine's load hits them alike.
    const tallies = variants.map(() => ({ all: new Tally(), categories: new Map<number, Tally>() }));
    for (const entry of loaded) {
      for (const question of entry.conversation.questions) {
        const evidence = new Set(question.evidence.map((id) => entry.keys.get(id)!));
        for (const [v, [, run]] of variants.entries()) {
          const start = performance.now();
          const result = await run(entry, question.text);
          const micros = (performance.now() - start) * 1000;
          const { all, categories } = tallies[v];
          const category = categories.get(question.category) ?? new Tally();
          categories.set(question.category, category);
          for (const t of [all, category]) {
            if ("error" in result) t.addError(result.error, evidence.size, micros);
            else t.add(scoreQuestion(result.turns, evidence), micros);
          }
        }
      }
    }
    const rows = variants.map(([label], v) => [label, ...summaryCells(tallies[v].all.summary())]);
    const byCategory = variants.map(([label], v) => {
      const { categories } = tallies[v];
      return [
        label,
        ...[1, 2, 3, 4].map((c) => {
          const summary = categories.get(c)?.summary();
          return summary && !refusedAll(summary) ? formatShare(summary.atFirst) : "–";
        }),
      ];
    });

    console.log(
      `\nRetrieval on ${path.split("/").at(-1)}, store ${args.store}, embedder ${embedder?.model ?? "none"}, ${new Date().toISOString()}, load ${loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")}:\n`,
    );
    printTable(
      [
        "search",
        "questions",
        "answer turn in top 5",
        "share of answer turns in top 10",
        "no hit at all",
        "refused",
        "p50",
        "p90",
      ],
      rows,
    );
    console.log("\nAnswer turn in top 5, by LoCoMo category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop):\n");
    printTable(["search", "1", "2", "3", "4"], byCategory);
  } finally {
    await server?.close();
    await memory.close();
    await opened.remove();
    await embedding.close();
  }
}

main().catch((error: Error) => {
  console.error(error.message);
  process.exitCode = 1;
});
