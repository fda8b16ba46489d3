/**
 * The retrieval benchmark's own arithmetic, on tiny samples written here (never LoCoMo's data): the
 * plain BM25 floor, reading LoCoMo's format into stored turns and evidence, and the scoring that
 * counts turns (with the neighbours a hit carries), not hits.
 */
import { describe, expect, it } from "vitest";
import { BM25_B, BM25_K1, Bm25Index, tokenize } from "../../bench/_bm25.js";
import { evidenceIds, readLocomo, turnContent } from "../../bench/_locomo.js";
import { refusedAll, scoreQuestion, Tally, turnKey, turnsOfHits } from "../../bench/_retrieval-score.js";

describe("the BM25 floor", () => {
  it("tokenizes to lowercase alphanumeric runs, drops stopwords, and does not stem", () => {
    expect(tokenize("What did Ann's PAINTING class cost in 2023?")).toEqual([
      "ann",
      "painting",
      "class",
      "cost",
      "2023",
    ]);
    expect(tokenize("what is the")).toEqual([]);
  });

  it("scores with k1 1.2, b 0.75 and Lucene's IDF", () => {
    expect([BM25_K1, BM25_B]).toEqual([1.2, 0.75]);
    const index = new Bm25Index([
      { id: "a", text: "cat cat dog" },
      { id: "b", text: "dog bird" },
      { id: "c", text: "fish" },
    ]);
    // N 3, n 1: idf ln(1 + 2.5 / 1.5); length 3 against an average of 2.
    const idf = Math.log(1 + 2.5 / 1.5);
    const norm = 1 - BM25_B + BM25_B * (3 / 2);
    const [hit] = index.search("cat", 10);
    expect(hit.id).toBe("a");
    expect(hit.score).toBeCloseTo((idf * 2 * (BM25_K1 + 1)) / (2 + BM25_K1 * norm), 12);
    expect(index.idf("cat")).toBeCloseTo(idf, 12);
    expect(index.idf("unknown")).toBe(0);
  });

  it("matches any of the query's words, ranks rare words and short documents first, and honours the limit", () => {
    const index = new Bm25Index([
      { id: "common-long", text: "the pottery class was on a long rainy Tuesday afternoon" },
      { id: "rare", text: "kiln" },
      { id: "common-short", text: "pottery class" },
      { id: "other", text: "pottery" },
      { id: "nothing", text: "swimming" },
    ]);
    // kiln is in one document of five; pottery and class in the short one weigh more than in the long one;
    // two matching words beat one.
    const ids = index.search("Where is the kiln for my pottery class?", 10).map((h) => h.id);
    expect(ids).toEqual(["rare", "common-short", "common-long", "other"]);
    expect(index.search("pottery kiln class", 2)).toHaveLength(2);
    expect(index.search("what did they do", 10)).toEqual([]);
  });

  it("keeps index order between equal scores", () => {
    const index = new Bm25Index([
      { id: 1, text: "tea" },
      { id: 2, text: "tea" },
      { id: 3, text: "tea" },
    ]);
    expect(index.search("tea", 10).map((h) => h.id)).toEqual([1, 2, 3]);
  });
});

describe("reading LoCoMo's format", () => {
  const sample = {
    sample_id: "conv-x",
    conversation: {
      speaker_a: "Ann",
      speaker_b: "Bob",
      session_2_date_time: "2 May 2023",
      session_2: [{ speaker: "Bob", dia_id: "D2:1", text: "Saw a heron." }],
      session_1_date_time: "1 May 2023",
      session_1: [
        { speaker: "Ann", dia_id: "D1:1", text: "Hi Bob!" },
        { speaker: "Bob", dia_id: "D1:2", text: "Look at this.", img_url: ["x"], blip_caption: "a photo of a dog" },
      ],
      session_3_date_time: "3 May 2023",
      session_3: [],
    },
    qa: [
      { question: "What did Bob see?", answer: "a heron", evidence: ["D1:2; D2:1", "D9:9"], category: 1 },
      { question: "Who is Ann?", answer: "?", evidence: ["D:1:1"], category: 4 },
      { question: "What did Bob never say?", adversarial_answer: "x", evidence: ["D1:1"], category: 5 },
    ],
  };

  it("stores speaker A as user and B as assistant, as `Name: text` plus the photo's caption, sessions in order", () => {
    const { conversations } = readLocomo([sample]);
    expect(conversations).toHaveLength(1);
    const [conversation] = conversations;
    expect(conversation.id).toBe("conv-x");
    expect(conversation.sessions.map((s) => [s.number, s.dateTime])).toEqual([
      [1, "1 May 2023"],
      [2, "2 May 2023"],
    ]);
    expect(conversation.sessions[0].turns).toEqual([
      { id: "D1:1", role: "user", content: "Ann: Hi Bob!" },
      { id: "D1:2", role: "assistant", content: "Bob: Look at this. [shares a photo: a photo of a dog]" },
    ]);
    expect(turnContent({ speaker: "Ann", dia_id: "D1:1", text: "Hi" })).toBe("Ann: Hi");
  });

  it("scores categories 1–4 only, splits joined evidence ids, and reports ids that name no turn", () => {
    const dataset = readLocomo([sample]);
    expect(dataset.conversations[0].questions).toEqual([
      { text: "What did Bob see?", category: 1, evidence: ["D1:2", "D2:1"] },
    ]);
    expect(dataset.unscoredQuestions).toBe(1);
    expect(dataset.unmappedEvidence).toEqual(["conv-x/D9:9", "conv-x/D:1:1"]);
    expect(evidenceIds(["D1:2; D2:1", "D3:4,D3:5"])).toEqual(["D1:2", "D2:1", "D3:4", "D3:5"]);
  });

  it("refuses what is not LoCoMo's shape", () => {
    expect(() => readLocomo({ samples: [] })).toThrow(/expected an array/);
    expect(() => readLocomo([{ sample_id: "a", conversation: { speaker_b: "B" }, qa: [] }])).toThrow(/no speaker_a/);
  });
});

describe("scoring", () => {
  const hit = (sessionId: string, seq: number, extra: Record<string, unknown> = {}) => ({
    sessionId,
    seq,
    snippet: "",
    message: { seq },
    ...extra,
  });

  it("lists the turns of plain hits in rank order, each once", () => {
    expect(turnsOfHits([hit("s", 9), hit("t", 2), hit("s", 9), { nonsense: true }])).toEqual([
      turnKey("s", 9),
      turnKey("t", 2),
    ]);
  });

  it("counts the neighbouring turns a hit carries, so k counts turns and not hits", () => {
    const hits = [
      hit("s", 5, { neighbours: [{ role: "user", content: "", seq: 4 }, { seq: 6 }] }),
      hit("s", 6),
      hit("t", 3, { context: { before: [{ message: { seq: 2 } }], after: [] } }),
      hit("u", 8),
    ];
    const turns = turnsOfHits(hits);
    expect(turns).toEqual(["s#4", "s#5", "s#6", "t#2", "t#3", "u#8"]);
    // The fourth hit is the sixth turn shown: past the first 5, though it is within the first 5 hits.
    expect(scoreQuestion(turns, new Set(["u#8"]))).toEqual({ atFirst: false, found: 1, evidence: 1, empty: false });
    expect(scoreQuestion(turns, new Set(["s#6", "t#2", "x#1"]))).toEqual({
      atFirst: true,
      found: 2,
      evidence: 3,
      empty: false,
    });
    expect(scoreQuestion([], new Set(["s#1"]))).toEqual({ atFirst: false, found: 0, evidence: 1, empty: true });
  });

  it("looks no deeper than 10 turns", () => {
    const turns = Array.from({ length: 12 }, (_, i) => `s#${i + 1}`);
    expect(scoreQuestion(turns, new Set(["s#10", "s#11"])).found).toBe(1);
  });

  it("averages the share of answer turns per question, and counts refusals as finding nothing", () => {
    const tally = new Tally();
    tally.add({ atFirst: true, found: 1, evidence: 1, empty: false }, 100);
    tally.add({ atFirst: false, found: 1, evidence: 4, empty: false }, 300);
    tally.add({ atFirst: false, found: 0, evidence: 2, empty: true }, 200);
    tally.addError("400 not_supported", 1, 50);
    const summary = tally.summary();
    expect(summary.questions).toBe(4);
    expect(summary.atFirst).toBe(0.25);
    expect(summary.found).toBeCloseTo((1 + 0.25 + 0 + 0) / 4, 12);
    expect(summary.empty).toBe(0.5);
    expect(summary.errors).toEqual(new Map([["400 not_supported", 1]]));
    expect([summary.p50, summary.p90]).toEqual([100, 300]);
    expect(refusedAll(summary)).toBe(false);

    const refused = new Tally();
    refused.addError("400 not_supported", 1, 10);
    expect(refusedAll(refused.summary())).toBe(true);
  });
});
