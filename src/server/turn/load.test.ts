import { describe, expect, it } from "vitest";
import { splitMessages } from "./load.js";

describe("splitMessages", () => {
  it("takes the messages after the last assistant message as the new turn, system messages apart", () => {
    const split = splitMessages([
      { role: "system", content: "s" },
      { role: "user", content: "u1" },
      { role: "assistant", content: "a1" },
      { role: "developer", content: "d" },
      { role: "user", content: "u2" },
    ]);
    expect(split.system.map((m) => m.content)).toEqual(["s", "d"]);
    expect(split.conversation.map((m) => m.content)).toEqual(["u1", "a1", "u2"]);
    expect(split.newTurn.map((m) => m.content)).toEqual(["u2"]);
  });

  it("treats a request without an assistant message as all new", () => {
    expect(
      splitMessages([
        { role: "user", content: "a" },
        { role: "user", content: "b" },
      ]).newTurn,
    ).toHaveLength(2);
  });
});
