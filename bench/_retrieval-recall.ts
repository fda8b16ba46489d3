/**
 * The retrieval benchmark's `--mode recall`: does a new session of the user get an answer turn into
 * the model's context? For each question, a new session of the conversation's user is opened and the
 * question is asked through the context engine (`Memory.buildContext`, `recall.scope: "user"`, the
 * default 8,000-token budget), at the time of the conversation's last session; the question scores
 * when the full text of one of its evidence turns is in the assembled context (in a message, or quoted
 * in the recall note). Run at each budget share asked for, and with dates off at the default share;
 * with an embedder (which recall fuses with the lexical ranking), also without it at the default share.
 */
import { loadavg } from "node:os";
import type { MemoryOptions } from "../src/core/memory/memory-options.js";
import { RECALLED_CLOSE, RECALLED_OPEN } from "../src/core/context/recall-user.js";
import { questionTimeSpan } from "../src/core/context/recall-dates.js";
import { contentText } from "../src/core/messages.js";
import type { ChatMessage } from "../src/core/types.js";
import { createMemory } from "../src/create-memory.js";
import { median, percentile, printTable } from "./_harness.js";
import type { BenchConversation } from "./_locomo.js";
import { formatShare } from "./_retrieval-score.js";

/** A conversation as stored: its user, when it was last talked, and its turns' texts by LoCoMo id. */
export interface RecallLoaded {
  conversation: BenchConversation;
  userId: string;
  /** The time questions are asked at: the last session's date (ms), when the data has one. */
  now?: number;
  texts: Map<string, string>;
}

/** The texts a context shows: each message's, and each line quoted in a recall note. */
export function contextTexts(messages: readonly ChatMessage[]): string[] {
  const texts: string[] = [];
  for (const message of messages) {
    const text = contentText(message.content);
    const open = text.indexOf(RECALLED_OPEN);
    if (message.role !== "system" || open === -1) {
      texts.push(text);
      continue;
    }
    for (const line of text.slice(open + RECALLED_OPEN.length, text.lastIndexOf(RECALLED_CLOSE)).split("\n")) {
      if (line.trim()) texts.push(String((JSON.parse(line) as { text: unknown }).text));
    }
  }
  return texts;
}

/** One configuration's figures. */
interface RecallRow {
  label: string;
  found: number;
  questions: number;
  byCategory: Map<number, [found: number, of: number]>;
  tokens: number[];
  noteTokens: number[];
  micros: number[];
  /** Per question, in order: whether an evidence turn was in the context. */
  hits: boolean[];
}

async function runOne(
  memoryOptions: Omit<MemoryOptions, "recall">,
  loaded: readonly RecallLoaded[],
  label: string,
  recall: MemoryOptions["recall"],
): Promise<RecallRow> {
  const memory = createMemory({ ...memoryOptions, recall });
  const row: RecallRow = {
    label,
    found: 0,
    questions: 0,
    byCategory: new Map(),
    tokens: [],
    noteTokens: [],
    micros: [],
    hits: [],
  };
  try {
    for (const entry of loaded) {
      for (const question of entry.conversation.questions) {
        const session = await memory.startSession({ userId: entry.userId });
        const start = performance.now();
        const context = await memory.buildContext(session.id, {
          userId: entry.userId,
          input: [{ role: "user", content: question.text }],
          now: entry.now,
        });
        row.micros.push((performance.now() - start) * 1000);
        const texts = contextTexts(context.messages);
        const hit = question.evidence.some((id) => {
          const text = entry.texts.get(id);
          return text !== undefined && texts.some((t) => t.includes(text));
        });
        row.questions++;
        row.hits.push(hit);
        if (hit) row.found++;
        const [f, of] = row.byCategory.get(question.category) ?? [0, 0];
        row.byCategory.set(question.category, [f + (hit ? 1 : 0), of + 1]);
        row.tokens.push(context.tokens);
        row.noteTokens.push(context.parts?.system ?? 0);
        await memory.deleteSession(session.id, { userId: entry.userId });
      }
    }
  } finally {
    // The store is the run's, shared by every configuration: closed by the caller.
    await memory.idle();
  }
  return row;
}

/** Runs recall at each share (in %), and without date handling at `dateShare`, and prints the tables. */
export async function recallMode(
  memoryOptions: Omit<MemoryOptions, "recall">,
  loaded: readonly RecallLoaded[],
  options: { shares: number[]; dateShare: number; dataName: string; store: string },
): Promise<void> {
  // One untimed search per user first, so a store that indexes in the background has caught up.
  const warm = createMemory(memoryOptions);
  for (const entry of loaded) await warm.search("hello", { userId: entry.userId, limit: 1 });
  await warm.idle();
  const rows: RecallRow[] = [];
  for (const share of options.shares) {
    rows.push(await runOne(memoryOptions, loaded, `${share}%`, { scope: "user", budgetShare: share / 100 }));
    console.error(`  share ${share}%: ${formatShare(rows.at(-1)!.found / rows.at(-1)!.questions)}`);
  }
  rows.push(
    await runOne(memoryOptions, loaded, `${options.dateShare}%, dates off`, {
      scope: "user",
      budgetShare: options.dateShare / 100,
      dates: false,
    }),
  );
  const { embedder, ...lexical } = memoryOptions;
  if (embedder) {
    rows.push(
      await runOne(lexical, loaded, `${options.dateShare}%, no embedder`, {
        scope: "user",
        budgetShare: options.dateShare / 100,
      }),
    );
  }
  const ms = (us: number) => `${(us / 1000).toFixed(1)} ms`;
  console.log(
    `\nRecall into a new session's context on ${options.dataName}, store ${options.store}, embedder ${embedder?.model ?? "none"}, ${new Date().toISOString()}, load ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}:\n`,
  );
  printTable(
    [
      "share of the 8,000-token budget",
      "questions",
      "evidence turn in context",
      "median context tokens",
      "median recall note tokens",
      "p90 note tokens",
      "p50 build",
      "p90 build",
    ],
    rows.map((r) => {
      const sortedMicros = [...r.micros].sort((a, b) => a - b);
      const sortedNotes = [...r.noteTokens].sort((a, b) => a - b);
      return [
        r.label,
        String(r.questions),
        formatShare(r.found / r.questions),
        String(median(r.tokens)),
        String(median(r.noteTokens)),
        String(percentile(sortedNotes, 90)),
        ms(percentile(sortedMicros, 50)),
        ms(percentile(sortedMicros, 90)),
      ];
    }),
  );
  const dated = loaded.flatMap((entry) =>
    entry.conversation.questions.map((q) => questionTimeSpan(q.text, entry.now ?? Date.now()) !== undefined),
  );
  const count = (row: RecallRow) => row.hits.filter((hit, i) => hit && dated[i]).length;
  const on = rows.find((r) => r.label === `${options.dateShare}%`);
  const off = rows.find((r) => r.label === `${options.dateShare}%, dates off`)!;
  const n = dated.filter(Boolean).length;
  console.log(
    `\nQuestions naming a time (recall-dates.ts): ${n} of ${dated.length}; evidence turn in context at ${options.dateShare}%: ` +
      `${on ? `${count(on)} with dates` : "–"}, ${count(off)} with dates off.`,
  );
  console.log(
    "\nEvidence turn in context, by LoCoMo category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop):\n",
  );
  printTable(
    ["share", "1", "2", "3", "4"],
    rows.map((r) => [
      r.label,
      ...[1, 2, 3, 4].map((c) => {
        const [f, of] = r.byCategory.get(c) ?? [0, 0];
        return of > 0 ? formatShare(f / of) : "–";
      }),
    ]),
  );
}
