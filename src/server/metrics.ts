/**
 * A small Prometheus text exposition (format 0.0.4): labelled counters and histograms, enough for
 * turns, latencies and errors without a dependency.
 */
import { type IntervalHistogram, monitorEventLoopDelay } from "node:perf_hooks";
import { StoreWrites } from "./store-writes.js";

type Labels = Record<string, string>;

const escapeLabel = (value: string) => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
const labelText = (labels: Labels) => {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`);
  return parts.length ? `{${parts.join(",")}}` : "";
};
const keyOf = (labels: Labels) => JSON.stringify(labels);

/**
 * How long the event loop was held (`perf_hooks.monitorEventLoopDelay`, sampled every 10 ms): one
 * user's heavy work that held it delays every other user's request by as much. A summary of the
 * delays since the server started (`threadkeep_event_loop_delay_seconds`) and the longest
 * (`threadkeep_event_loop_delay_max_seconds`).
 */
export class EventLoopDelay {
  readonly #histogram: IntervalHistogram = monitorEventLoopDelay({ resolution: 10 });
  constructor() {
    this.#histogram.enable();
  }
  render(): string {
    const h = this.#histogram;
    const seconds = (ns: number) => (Number.isFinite(ns) ? ns / 1e9 : 0);
    const name = "threadkeep_event_loop_delay_seconds";
    const lines = [
      `# HELP ${name} Delays of the event loop past its 10 ms sampling timer (how long a ready request waited for the loop), since the server started.`,
      `# TYPE ${name} summary`,
      ...[0.5, 0.9, 0.99, 0.999].map(
        (q) => `${name}{quantile="${q}"} ${seconds(h.count > 0 ? h.percentile(q * 100) : 0)}`,
      ),
      `${name}_sum ${seconds(h.count > 0 ? h.mean * h.count : 0)}`,
      `${name}_count ${h.count}`,
      "# HELP threadkeep_event_loop_delay_max_seconds The longest the event loop was held since the server started.",
      "# TYPE threadkeep_event_loop_delay_max_seconds gauge",
      `threadkeep_event_loop_delay_max_seconds ${seconds(h.count > 0 ? h.max : 0)}`,
    ];
    return lines.join("\n");
  }
}

/** A monotonically increasing count, per label set. */
export class Counter {
  readonly #values = new Map<string, { labels: Labels; value: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}

  inc(labels: Labels = {}, by = 1): void {
    const key = keyOf(labels);
    const entry = this.#values.get(key);
    if (entry) entry.value += by;
    else this.#values.set(key, { labels, value: by });
  }

  /** The current value for a label set (0 when never counted). */
  get(labels: Labels = {}): number {
    return this.#values.get(keyOf(labels))?.value ?? 0;
  }

  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    for (const { labels, value } of this.#values.values()) lines.push(`${this.name}${labelText(labels)} ${value}`);
    return lines.join("\n");
  }
}

/** A value that goes up and down (no labels). */
export class Gauge {
  #value = 0;
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}

  set(value: number): void {
    this.#value = value;
  }

  get(): number {
    return this.#value;
  }

  render(): string {
    return `# HELP ${this.name} ${this.help}\n# TYPE ${this.name} gauge\n${this.name} ${this.#value}`;
  }
}

/** Latency buckets in seconds: 0.5 ms to 60 s, covering a store read and a slow model. */
export const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** A distribution of observed values (seconds), per label set. */
export class Histogram {
  readonly #series = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: readonly number[] = LATENCY_BUCKETS,
  ) {}

  observe(seconds: number, labels: Labels = {}): void {
    const key = keyOf(labels);
    let series = this.#series.get(key);
    if (!series) {
      series = { labels, counts: new Array(this.buckets.length).fill(0), sum: 0, count: 0 };
      this.#series.set(key, series);
    }
    // Counts are kept per bucket and made cumulative when rendered, so an observation is one increment.
    const at = this.buckets.findIndex((bound) => seconds <= bound);
    if (at >= 0) series.counts[at]++;
    series.sum += seconds;
    series.count++;
  }

  /** Number of observations for a label set. */
  count(labels: Labels = {}): number {
    return this.#series.get(keyOf(labels))?.count ?? 0;
  }

  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const { labels, counts, sum, count } of this.#series.values()) {
      let cumulative = 0;
      this.buckets.forEach((bound, i) => {
        cumulative += counts[i];
        lines.push(`${this.name}_bucket${labelText({ ...labels, le: String(bound) })} ${cumulative}`);
      });
      lines.push(`${this.name}_bucket${labelText({ ...labels, le: "+Inf" })} ${count}`);
      lines.push(`${this.name}_sum${labelText(labels)} ${sum}`);
      lines.push(`${this.name}_count${labelText(labels)} ${count}`);
    }
    return lines.join("\n");
  }
}

/** Seconds since a `performance.now()` value. */
export const secondsSince = (start: number) => (performance.now() - start) / 1000;

/** The metrics the server keeps. */
export class ServerMetrics {
  readonly turns = new Counter(
    "threadkeep_turns_total",
    "Chat turns by outcome (ok, not_saved, save_unconfirmed, incomplete, upstream_error, error) and streaming.",
  );
  readonly turnSeconds = new Histogram("threadkeep_turn_duration_seconds", "Whole turn, from request to last byte.");
  readonly storeLoadSeconds = new Histogram(
    "threadkeep_store_load_seconds",
    "Loading a session and assembling its context.",
  );
  readonly upstreamSeconds = new Histogram(
    "threadkeep_upstream_seconds",
    "Upstream model call, to the full reply (streams: to the last event).",
  );
  readonly commitSeconds = new Histogram("threadkeep_commit_seconds", "Committing a turn's messages to the store.");
  readonly requests = new Counter("threadkeep_http_requests_total", "HTTP requests by method, route and status.");
  readonly errors = new Counter("threadkeep_errors_total", "Error responses and degraded turns by code.");
  readonly sideRequests = new Counter(
    "threadkeep_side_requests_total",
    "A front-end's background tasks (title, tags, follow_ups, queries, autocomplete, emoji, image_prompt, function_calling, moa, other), answered and not stored, by kind.",
  );
  readonly readings = new Counter(
    "threadkeep_request_readings_total",
    "How chat requests were read against their session (new, continue, overlap, thin, regenerate, edit).",
  );
  readonly temporaryRequests = new Counter(
    "threadkeep_temporary_chat_requests_total",
    "Requests of temporary chats (Open WebUI local: ids), answered and not stored.",
  );
  readonly memoryExtractions = new Counter(
    "threadkeep_memory_extractions_total",
    "Background memory extractions (--memories auto) by outcome (applied, nothing, malformed, retry, failed).",
  );
  readonly memoryOperations = new Counter(
    "threadkeep_memory_operations_total",
    "Memory operations from extraction answers by op (add, update, contradiction, delete) and result (applied, duplicate, rejected).",
  );
  readonly fairShareRefusals = new Counter(
    "threadkeep_fair_share_refusals_total",
    "Requests refused with 429 by a fair-share limit (user_concurrency, user_rate, key_concurrency, key_rate), by kind (turn, side).",
  );
  /** Whether the store had room for the last turn's commit (`threadkeep_store_full`, `/readyz`). */
  readonly storeWrites = new StoreWrites();
  readonly connectionsOpen = new Gauge(
    "threadkeep_connections_open",
    "Client connections open, within the connection limit.",
  );
  readonly connectionsRefused = new Counter(
    "threadkeep_connections_refused_total",
    "Connections past the limit: answered 503 too_many_connections, or dropped unanswered past the refusal room.",
  );
  readonly clientTimeouts = new Counter(
    "threadkeep_client_timeouts_total",
    "Connections closed on a slow client, by kind: headers, body (408), idle (a kept-alive connection unused), stream_stall (a streamed reply not read), reply_stall (a whole reply not read).",
  );
  readonly eventLoopDelay = new EventLoopDelay();
  readonly started = Date.now();

  /** Counts an error code. */
  error(code: string): void {
    this.errors.inc({ code });
  }

  /** The exposition text served at GET /metrics. */
  render(): string {
    const uptime = `# HELP threadkeep_uptime_seconds Seconds since the server started.\n# TYPE threadkeep_uptime_seconds gauge\nthreadkeep_uptime_seconds ${(Date.now() - this.started) / 1000}`;
    const all = [
      this.turns,
      this.turnSeconds,
      this.storeLoadSeconds,
      this.upstreamSeconds,
      this.commitSeconds,
      this.requests,
      this.errors,
      this.sideRequests,
      this.temporaryRequests,
      this.readings,
      this.memoryExtractions,
      this.memoryOperations,
      this.fairShareRefusals,
      this.storeWrites,
      this.connectionsOpen,
      this.connectionsRefused,
      this.clientTimeouts,
      this.eventLoopDelay,
    ];
    return `${[...all.map((m) => m.render()), uptime].join("\n")}\n`;
  }
}
