import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { Counter, EventLoopDelay, Histogram, ServerMetrics } from "./metrics.js";

describe("metrics", () => {
  it("renders labelled counters with escaped values", () => {
    const counter = new Counter("c_total", "help");
    counter.inc({ code: 'a"b' });
    counter.inc({ code: 'a"b' }, 2);
    expect(counter.get({ code: 'a"b' })).toBe(3);
    expect(counter.render()).toBe('# HELP c_total help\n# TYPE c_total counter\nc_total{code="a\\"b"} 3');
  });

  it("renders cumulative histogram buckets, sum and count", () => {
    const histogram = new Histogram("h_seconds", "help", [0.1, 1]);
    histogram.observe(0.05);
    histogram.observe(0.5);
    histogram.observe(5);
    expect(histogram.render().split("\n").slice(2)).toEqual([
      'h_seconds_bucket{le="0.1"} 1',
      'h_seconds_bucket{le="1"} 2',
      'h_seconds_bucket{le="+Inf"} 3',
      "h_seconds_sum 5.55",
      "h_seconds_count 3",
    ]);
  });

  it("exposes every server metric", () => {
    const text = new ServerMetrics().render();
    for (const name of [
      "threadkeep_turns_total",
      "threadkeep_store_load_seconds",
      "threadkeep_upstream_seconds",
      "threadkeep_commit_seconds",
      "threadkeep_errors_total",
      "threadkeep_uptime_seconds",
      "threadkeep_event_loop_delay_seconds",
      "threadkeep_event_loop_delay_max_seconds",
    ]) {
      expect(text).toContain(`# TYPE ${name} `);
    }
  });

  it("are each listed in docs/observability.md's /metrics row", () => {
    const names = [...new ServerMetrics().render().matchAll(/^# TYPE (\w+) /gm)].map((m) => m[1]);
    expect(names.length).toBeGreaterThan(10);
    const doc = readFileSync(new URL("../../docs/observability.md", import.meta.url), "utf8");
    const row = doc.split("\n").find((line) => line.startsWith("| `GET /metrics` |")) ?? "";
    expect(names.filter((name) => !row.includes(`\`${name}`))).toEqual([]);
  });

  it("reports a held event loop as its longest delay", async () => {
    const delay = new EventLoopDelay();
    // Let the monitor take samples, then hold the loop for 120 ms.
    await new Promise((resolve) => setTimeout(resolve, 40));
    const until = performance.now() + 120;
    while (performance.now() < until);
    await new Promise((resolve) => setTimeout(resolve, 40));
    const text = delay.render();
    const max = Number(/^threadkeep_event_loop_delay_max_seconds (\S+)$/m.exec(text)![1]);
    expect(max).toBeGreaterThanOrEqual(0.1);
    expect(Number(/^threadkeep_event_loop_delay_seconds_count (\d+)$/m.exec(text)![1])).toBeGreaterThan(0);
    expect(text).toMatch(/^threadkeep_event_loop_delay_seconds\{quantile="0.99"\} \d/m);
  });
});
