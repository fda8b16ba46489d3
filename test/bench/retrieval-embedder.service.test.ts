/**
 * `npm run bench -- retrieval --fake-embedder` end to end, as a user runs it (the script in a child
 * process), on a tiny sample in LoCoMo's format written here: every turn is embedded through the fake
 * upstream on 127.0.0.1, and hybrid search (what `auto` is with an embedder) answers instead of being
 * the lexical ranking alone.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, expect, it } from "vitest";
import { ROOT } from "../_dist.js";

const dir = mkdtempSync(join(tmpdir(), "tk-retrieval-embedder-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const data = join(dir, "tiny.json");
writeFileSync(
  data,
  JSON.stringify([
    {
      sample_id: "t1",
      conversation: {
        speaker_a: "Ann",
        speaker_b: "Bob",
        session_1_date_time: "1:56 pm on 8 May, 2023",
        session_1: [
          { speaker: "Ann", dia_id: "D1:1", text: "My automobile broke down on the highway yesterday." },
          { speaker: "Bob", dia_id: "D1:2", text: "Oh no, did you call someone?" },
        ],
        session_2_date_time: "2:00 pm on 20 May, 2023",
        session_2: [{ speaker: "Bob", dia_id: "D2:1", text: "I adopted a beagle puppy named Rex." }],
      },
      qa: [
        // Its answer says "automobile": the fake's embeddings put it near "car".
        { question: "What happened to Ann's car?", evidence: ["D1:1"], category: 4 },
        { question: "Which puppy did Bob adopt?", evidence: ["D2:1"], category: 4 },
      ],
    },
  ]),
);

it("embeds every turn and searches hybrid with the fake embedder", { timeout: 60_000 }, async () => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ["--import", "tsx", join(ROOT, "bench/retrieval.ts"), "--data", data, "--store", "memory", "--fake-embedder"],
    { cwd: ROOT },
  );
  expect(stdout).toMatch(/embedder: fake \(test\/_fake-upstream\.ts at http:\/\/127\.0\.0\.1:\d+\/v1/);
  expect(stdout).toMatch(/embedded 3 turns with fake-embedding in /);
  expect(stdout).toContain("store memory, embedder fake-embedding,");
  const cells = (label: string) =>
    stdout
      .split("\n")
      .find((l) => l.startsWith(`| ${label} `))
      ?.split("|")
      .map((c) => c.trim());
  // | search | questions | answer turn in top 5 | … | refused | …
  expect(cells("threadkeep mode=hybrid")?.slice(2, 4)).toEqual(["2", "100.0%"]);
  expect(cells("threadkeep mode=auto (default)")?.[3]).toBe("100.0%");
  // The embeddings alone: the fake's synonym groups find both answers, no refusal.
  expect(cells("threadkeep mode=semantic")?.slice(3, 4)).toEqual(["100.0%"]);
  expect(cells("threadkeep mode=semantic")?.[6]).toBe("–");
  // The lexical ranking alone (what auto is without an embedder) answers too, and is measured beside it.
  expect(cells("threadkeep mode=substring&ranking=relevance (auto without an embedder)")?.[6]).toBe("–");
});
