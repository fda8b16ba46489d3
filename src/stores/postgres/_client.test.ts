import { describe, expect, it } from "vitest";
import { parseArray, serializeArray } from "./_client.js";

describe("the array types declared in place of the driver's lookup", () => {
  it("writes PostgreSQL array literals that keep quotes, backslashes, commas, braces and nulls", () => {
    expect(serializeArray([])).toBe("{}");
    expect(serializeArray(["a", 'say "hi"', "back\\slash", "a,b", "{x}", "", null])).toBe(
      '{"a","say \\"hi\\"","back\\\\slash","a,b","{x}","",NULL}',
    );
    expect(serializeArray([1, 2.5, -3])).toBe('{"1","2.5","-3"}');
    expect(serializeArray(Float32Array.of(0.5, 1))).toBe('{"0.5","1"}');
    expect(serializeArray("{1,2}")).toBe("{1,2}");
  });

  it("reads what PostgreSQL prints back, quoted or not", () => {
    expect(parseArray("{}", String)).toEqual([]);
    expect(parseArray('{a,"say \\"hi\\"","back\\\\slash","a,b",NULL,""}', String)).toEqual([
      "a",
      'say "hi"',
      "back\\slash",
      "a,b",
      null,
      "",
    ]);
    expect(parseArray("{1,22,-3}", Number)).toEqual([1, 22, -3]);
    expect(parseArray(serializeArray(["x", null, "y,z"]), String)).toEqual(["x", null, "y,z"]);
  });
});
