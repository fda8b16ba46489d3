/**
 * The time a question points at: "yesterday", "last week", "in May", "on 3 June, 2023", "two years
 * ago" read as a span of days relative to `now`, so recall can prefer what was said then. English
 * only; a question with no such phrase, or one read two ways, points at no time.
 */

/** A span of time, ms since the epoch: `from` inclusive, `to` exclusive. */
export interface TimeSpan {
  from: number;
  to: number;
  /** The words it was read from, for the inspector. */
  phrase: string;
}

const DAY = 86_400_000;

const MONTHS = [
  "january",
  "february",
  "march",
  "april",
  "may",
  "june",
  "july",
  "august",
  "september",
  "october",
  "november",
  "december",
];
const MONTH = `(${MONTHS.join("|")}|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)`;
const NUMBERS: Record<string, number> = {
  a: 1,
  an: 1,
  one: 1,
  two: 2,
  three: 3,
  four: 4,
  five: 5,
  six: 6,
  seven: 7,
  eight: 8,
  nine: 9,
  ten: 10,
};

const monthIndex = (word: string): number => MONTHS.findIndex((m) => m.startsWith(word.slice(0, 3)));
const startOfDay = (t: number): number => Math.floor(t / DAY) * DAY;
const utc = (year: number, month: number, day = 1): number => Date.UTC(year, month, day);

/** A month named without a year: the latest one that began before `now`. */
function latestMonth(month: number, now: Date): number {
  const year = now.getUTCFullYear();
  return utc(year, month) <= now.getTime() ? year : year - 1;
}

/** The span a question's words point at, relative to `now`; undefined when it names no time. */
export function questionTimeSpan(question: string, now: number): TimeSpan | undefined {
  const q = question.toLowerCase();
  const today = startOfDay(now);
  const at = new Date(now);
  const found: TimeSpan[] = [];
  const add = (from: number, to: number, phrase: string) => found.push({ from, to, phrase });

  // "3 June, 2023", "June 3, 2023", "3 June", "June 3rd".
  const dayFirst = new RegExp(`\\b(\\d{1,2})(?:st|nd|rd|th)? (?:of )?${MONTH},? ?(\\d{4})?\\b`, "g");
  const monthFirst = new RegExp(`\\b${MONTH} (\\d{1,2})(?:st|nd|rd|th)?(?:,? (\\d{4}))?\\b`, "g");
  for (const m of q.matchAll(dayFirst)) {
    const month = monthIndex(m[2]);
    const year = m[3] ? Number(m[3]) : latestMonth(month, at);
    add(utc(year, month, Number(m[1])), utc(year, month, Number(m[1]) + 1), m[0]);
  }
  for (const m of q.matchAll(monthFirst)) {
    if (Number(m[2]) > 31) continue;
    const month = monthIndex(m[1]);
    const year = m[3] ? Number(m[3]) : latestMonth(month, at);
    add(utc(year, month, Number(m[2])), utc(year, month, Number(m[2]) + 1), m[0]);
  }
  if (found.length === 0) {
    // "in May", "May 2023", "in May of 2023".
    for (const m of q.matchAll(
      new RegExp(`\\b(?:in |during |early |late |mid-?)?${MONTH}(?:,? (?:of )?(\\d{4}))?\\b`, "g"),
    )) {
      const bare = !m[2] && !/^(in|during|early|late|mid)/.test(m[0]);
      // A bare "may" is a verb far more often than a month.
      if (bare && m[1] === "may") continue;
      if (bare && m[1].length <= 3) continue;
      const month = monthIndex(m[1]);
      const year = m[2] ? Number(m[2]) : latestMonth(month, at);
      add(utc(year, month), utc(year, month + 1), m[0]);
    }
  }
  if (found.length === 0) {
    for (const m of q.matchAll(/\b(?:in |during )(\d{4})\b/g))
      add(utc(Number(m[1]), 0), utc(Number(m[1]) + 1, 0), m[0]);
  }
  const relative: [RegExp, (m: RegExpMatchArray) => [number, number]][] = [
    [/\byesterday\b/, () => [today - DAY, today]],
    [/\btoday\b/, () => [today, today + DAY]],
    [/\blast weekend\b/, () => [today - 9 * DAY, today]],
    [/\blast week\b/, () => [today - 14 * DAY, today]],
    [
      /\blast month\b/,
      () => [utc(at.getUTCFullYear(), at.getUTCMonth() - 1), utc(at.getUTCFullYear(), at.getUTCMonth())],
    ],
    [/\blast year\b/, () => [utc(at.getUTCFullYear() - 1, 0), utc(at.getUTCFullYear(), 0)]],
    [/\bthis year\b/, () => [utc(at.getUTCFullYear(), 0), now + DAY]],
    [
      /\b(a|an|one|two|three|four|five|six|seven|eight|nine|ten|\d+) (day|week|month|year)s? ago\b/,
      (m) => {
        const n = NUMBERS[m[1]] ?? Number(m[1]);
        const unit = { day: DAY, week: 7 * DAY, month: 30 * DAY, year: 365 * DAY }[m[2] as "day"];
        // "Two weeks ago" is about then, give or take half a unit.
        return [today - (n + 0.5) * unit, today - (n - 0.5) * unit + DAY];
      },
    ],
  ];
  if (found.length === 0) {
    for (const [pattern, span] of relative) {
      const m = q.match(pattern);
      if (m) add(...span(m), m[0]);
    }
  }
  const distinct = found.filter((f, i) => found.findIndex((g) => g.from === f.from && g.to === f.to) === i);
  if (distinct.length !== 1) return undefined;
  return distinct[0].from < distinct[0].to ? distinct[0] : undefined;
}

/**
 * Whether something said at `time` is about the span: said within it, or soon after (people tell of
 * last weekend's trip a few days later), up to `slack` after its end.
 */
export function saidAbout(time: number, span: TimeSpan, slack = 14 * DAY): boolean {
  return time >= span.from && time < span.to + slack;
}
