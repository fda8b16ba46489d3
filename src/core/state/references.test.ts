import { describe, expect, it } from "vitest";
import {
  type ConversationState,
  newPending,
  parseConversationPatch,
  parseConversationState,
  renderConversationNote,
  withIntent,
  withReference,
} from "./conversation.js";
import { createResolver, normalizePhrase, resolveMessage } from "./references.js";

const NOW = 1_700_000_000_000;
const task42 = withReference({ references: [] }, { type: "task", id: 42, label: "buy groceries" }, NOW - 5000);
const withNote = withReference(task42, { type: "note", id: "n7" }, NOW - 1000);
const pendingDelete = (ttlMs = 60_000): ConversationState => ({
  ...task42,
  pending: newPending({ action: "delete_task", args: { id: 42 }, ttlMs }, NOW),
});

describe("resolveMessage", () => {
  it.each([
    ["yes", "en"],
    ["Yes!", "en"],
    ["do it", "en"],
    ["confirm", "en"],
    ["yes, do it please", "en"],
    ["OK, go ahead.", "en"],
    ["ja", "nl"],
    ["doe maar", "nl"],
    ["Ja, doe maar graag", "nl"],
    ["Oké", "nl"],
    ["akkoord", "nl"],
    ["ga je gang", "nl"],
  ])("confirms the pending action on %j", (text, language) => {
    const state = pendingDelete();
    const resolution = resolveMessage(text, state, NOW + 1000);
    expect(resolution).toMatchObject({ kind: "confirm", pending: state.pending, language });
  });

  it.each([
    ["no", "en"],
    ["Cancel", "en"],
    ["no, don't", "en"],
    ["never mind", "en"],
    ["forget it", "en"],
    ["nee", "nl"],
    ["annuleer", "nl"],
    ["laat maar", "nl"],
    ["doe maar niet", "nl"],
    ["Nee, toch niet.", "nl"],
  ])("cancels the pending action on %j", (text, language) => {
    expect(resolveMessage(text, pendingDelete(), NOW + 1000)).toMatchObject({ kind: "cancel", language });
  });

  it("never confirms an expired confirmation", () => {
    const state = pendingDelete(60_000);
    expect(resolveMessage("yes", state, NOW + 60_000)).toMatchObject({
      kind: "expired",
      pending: state.pending,
    });
    expect(resolveMessage("ja", state, NOW + 61_000)).toMatchObject({ kind: "expired" });
    expect(resolveMessage("yes", state, NOW + 59_999)).toMatchObject({ kind: "confirm" });
  });

  it("reads a yes without a pending action, or a longer sentence, as no confirmation", () => {
    expect(resolveMessage("yes", { references: [] }, NOW)).toEqual({ kind: "none" });
    expect(resolveMessage("yes but first tell me about the weather", pendingDelete(), NOW)).not.toMatchObject({
      kind: "confirm",
    });
    expect(resolveMessage("no yes", pendingDelete(), NOW)).not.toMatchObject({ kind: "confirm" });
  });

  it.each([
    ["Actually, make that due tomorrow", "note"],
    ["delete that task", "task"],
    ["mark it as done", "note"],
    ["the one I mentioned", "note"],
    ["Verwijder die taak", "task"],
    ["zet het op morgen", "note"],
    ["what was in my task?", "task"],
  ])("resolves %j to the latest fitting entity", (text, type) => {
    const resolution = resolveMessage(text, withNote, NOW);
    expect(resolution).toMatchObject({ kind: "reference", entity: { type } });
  });

  it("does not point a reference to a type nobody mentioned at another entity", () => {
    expect(resolveMessage("delete that reminder", task42, NOW)).toEqual({ kind: "none" });
    expect(resolveMessage("add it to the list", task42, NOW)).toMatchObject({
      kind: "reference",
      entity: { id: 42 },
    });
    expect(resolveMessage("hello there", task42, NOW)).toEqual({ kind: "none" });
    expect(resolveMessage("delete that", { references: [] }, NOW)).toEqual({ kind: "none" });
  });

  it("takes phrase lists per language, replacing or adding", () => {
    const german = createResolver({
      phrases: {
        de: {
          confirm: ["ja", "mach das"],
          cancel: ["nein"],
          filler: ["bitte"],
          reference: ["das"],
          typedReference: ["die {type}"],
          nouns: { task: ["aufgabe"] },
        },
      },
      languages: ["de"],
    });
    expect(german.resolve("Ja, mach das bitte", pendingDelete(), NOW)).toMatchObject({
      kind: "confirm",
      language: "de",
    });
    expect(german.resolve("yes", pendingDelete(), NOW)).toMatchObject({ kind: "none" });
    expect(german.resolve("lösche die Aufgabe", withNote, NOW)).toMatchObject({
      kind: "reference",
      entity: { type: "task" },
    });
    const strict = createResolver({ phrases: { en: { confirm: ["confirm"] } } });
    expect(strict.resolve("yes", pendingDelete(), NOW)).toMatchObject({ kind: "none" });
    expect(strict.resolve("no", pendingDelete(), NOW)).toMatchObject({ kind: "cancel" });
    expect(() => createResolver({ languages: ["xx"] })).toThrow(/xx/);
  });

  it("normalises case, accents and punctuation", () => {
    expect(normalizePhrase("  Oké, DOE   maar!! ")).toBe("oke doe maar");
    expect(normalizePhrase("Don't")).toBe("dont");
  });
});

describe("conversation state", () => {
  it("keeps references most recent first, without duplicates, at most ten", () => {
    let state: ConversationState = { references: [] };
    for (let i = 0; i < 12; i++) state = withReference(state, { type: "task", id: i }, NOW + i);
    state = withReference(state, { type: "task", id: 5 }, NOW + 100);
    expect(state.references.map((r) => r.id)).toEqual([5, 11, 10, 9, 8, 7, 6, 4, 3, 2]);
  });

  it("renders a short note, leaving out expired confirmations", () => {
    const state = withIntent(pendingDelete(120_000), "delete_task", NOW);
    const note = renderConversationNote(state, NOW);
    expect(note).toContain("Recently referenced: task 42 (buy groceries)");
    expect(note).toContain("Last intent: delete_task");
    expect(note).toContain('Waiting for the user to confirm: delete_task {"id":42}, expires in 2 min');
    expect(renderConversationNote(state, NOW + 120_000)).not.toContain("Waiting");
    expect(renderConversationNote({ references: [] }, NOW)).toBeNull();
  });

  it("validates shapes with coded errors naming the field", () => {
    expect(() => parseConversationState({ references: [{ type: "task", id: 1 }] })).toThrow(
      expect.objectContaining({
        code: "invalid_request",
        details: { field: "conversation.references.0.at" },
      }),
    );
    expect(() => parseConversationPatch({ pending: { action: "x" }, extra: 1 })).toThrow(
      expect.objectContaining({ code: "invalid_request" }),
    );
    expect(() => parseConversationPatch({ color: "red" })).toThrow(
      expect.objectContaining({ details: { field: "conversation.color" } }),
    );
    expect(parseConversationPatch({ pending: null, lastIntent: null })).toEqual({
      pending: null,
      lastIntent: null,
    });
    expect(() => withReference({ references: [] }, { type: "", id: 1 })).toThrow(/entity.type/);
  });
});
