import { describe, expect, it } from "vitest";
import { questionTimeSpan, saidAbout } from "./recall-dates.js";

const now = Date.UTC(2023, 7, 20, 15); // Sunday 20 August 2023, 15:00 UTC
const day = (y: number, m: number, d: number) => Date.UTC(y, m - 1, d);
const span = (q: string) => {
  const s = questionTimeSpan(q, now);
  return s && [new Date(s.from).toISOString().slice(0, 10), new Date(s.to).toISOString().slice(0, 10)];
};

describe("the time a question names", () => {
  it("reads dates and months, with or without a year (a bare month is the latest one begun)", () => {
    expect(span("What did Maria donate on 3 June, 2023?")).toEqual(["2023-06-03", "2023-06-04"]);
    expect(span("What painting did she show on October 13, 2022?")).toEqual(["2022-10-13", "2022-10-14"]);
    expect(span("When did Melanie go camping in June?")).toEqual(["2023-06-01", "2023-07-01"]);
    expect(span("What setback did she face in October 2023?")).toEqual(["2023-10-01", "2023-11-01"]);
    expect(span("Where did we eat in September?")).toEqual(["2022-09-01", "2022-10-01"]);
    expect(span("How many beach trips in 2022?")).toEqual(["2022-01-01", "2023-01-01"]);
  });

  it("reads days, weeks, months and years relative to now", () => {
    expect(span("What did I cook yesterday?")).toEqual(["2023-08-19", "2023-08-20"]);
    expect(span("Where did I go last week?")).toEqual(["2023-08-06", "2023-08-20"]);
    expect(span("What did we plan last month?")).toEqual(["2023-07-01", "2023-08-01"]);
    expect(span("Where did John travel last year?")).toEqual(["2022-01-01", "2023-01-01"]);
    expect(span("What did she buy two weeks ago?")).toEqual(["2023-08-02", "2023-08-10"]);
  });

  it("names no time without such words, for a bare 'may', or when two times are named", () => {
    expect(span("What is my dog called?")).toBeUndefined();
    expect(span("May I ask what my dog is called?")).toBeUndefined();
    expect(span("Did I go in May or in June?")).toBeUndefined();
    expect(span("What did we say in May?")).toEqual(["2023-05-01", "2023-06-01"]);
  });

  it("counts what was said within the span, or up to two weeks after it, as about it", () => {
    const june = questionTimeSpan("in June", now)!;
    expect(saidAbout(day(2023, 6, 15), june)).toBe(true);
    expect(saidAbout(day(2023, 7, 10), june)).toBe(true);
    expect(saidAbout(day(2023, 7, 20), june)).toBe(false);
    expect(saidAbout(day(2023, 5, 31), june)).toBe(false);
  });
});
