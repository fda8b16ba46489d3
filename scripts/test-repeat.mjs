#!/usr/bin/env node
/* global console, process */
/**
 * The flake hunter: `npm run test:repeat -- --runs N [--busy-cores K] [vitest arguments or files…]`
 * runs `vitest run` (the whole suite, or the named files) N times back to back, optionally with K
 * cores kept busy by busy-looping child processes (killed at the end), and prints each test that
 * failed, how many times, and its first error. A test that passes alone and fails here assumes an
 * idle machine, shares something with another file, or has found a race. Every run's JSON report
 * and console output stay in a temporary directory, printed at the start.
 *
 * Each run sees `THREADKEEP_REPEAT_RUN` (1 to N), so a fixture can fail on a chosen run (the test of
 * this script does). Exit code: 0 when every run passed, 1 otherwise, 2 on bad arguments.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, openSync, readFileSync, closeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";

const USAGE = "usage: npm run test:repeat -- --runs N [--busy-cores K] [vitest arguments or files…]";

/** `--runs`, `--busy-cores`, and what is passed on to vitest. */
function parseArgs(argv) {
  let runs;
  let busy = 0;
  const rest = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const [name, inline] =
      arg.startsWith("--") && arg.includes("=")
        ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)]
        : [arg, undefined];
    if (name === "--runs" || name === "--busy-cores") {
      const value = inline ?? argv[++i];
      const n = Number(value);
      if (!Number.isInteger(n) || n < (name === "--runs" ? 1 : 0))
        throw new Error(`${name} needs a whole number${name === "--runs" ? " ≥ 1" : " ≥ 0"}, got ${value}`);
      if (name === "--runs") runs = n;
      else busy = n;
    } else rest.push(arg);
  }
  if (runs === undefined) throw new Error("--runs N is required");
  return { runs, busy, rest };
}

/** K processes that each keep a core busy until killed. */
function busyCores(count) {
  return Array.from({ length: count }, () => spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" }));
}

/** Runs vitest once; resolves to its exit code. Output goes to `log`, the JSON report to `json`. */
function runVitest(args, run, log, json) {
  const out = openSync(log, "w");
  const vitest = join(process.cwd(), "node_modules", "vitest", "vitest.mjs");
  const child = spawn(
    process.execPath,
    [vitest, "run", ...args, "--reporter=default", "--reporter=json", `--outputFile.json=${json}`],
    {
      stdio: ["ignore", out, out],
      env: { ...process.env, THREADKEEP_REPEAT_RUN: String(run), FORCE_COLOR: "0" },
    },
  );
  current = child;
  return new Promise((resolve) => {
    child.once("exit", (code, signal) => {
      current = undefined;
      closeSync(out);
      resolve(code ?? (signal ? 128 : 1));
    });
  });
}

/** The failed tests of one run's JSON report: `file > suite > test` and the first line(s) of its first error. */
function failuresOf(json) {
  const failed = [];
  const report = JSON.parse(readFileSync(json, "utf8"));
  for (const file of report.testResults ?? []) {
    const name = relative(process.cwd(), file.name);
    const tests = (file.assertionResults ?? []).filter((test) => test.status === "failed");
    for (const test of tests) {
      failed.push({
        test: [name, ...(test.ancestorTitles ?? []), test.title].join(" > "),
        error: firstError(test.failureMessages?.[0]),
      });
    }
    // A file that failed without a failed test: it did not load, or a hook failed.
    if (tests.length === 0 && file.status === "failed")
      failed.push({ test: `${name} (the file itself)`, error: firstError(file.message) });
  }
  return { failed, total: report.numTotalTests ?? 0 };
}

/** The message of an error, without its stack, at most 5 lines. */
function firstError(message = "") {
  // Vitest's JSON report keeps no message for a test or hook time-out ("Test timed out in N ms" is
  // in the console output only).
  if (/^Error: STACK_TRACE_ERROR/.test(message))
    return "a time-out, most likely (the JSON report keeps no message: see the run's log)";
  const lines = String(message).split("\n");
  const stack = lines.findIndex((line) => /^\s+at /.test(line));
  return lines
    .slice(0, stack === -1 ? lines.length : stack)
    .filter((line) => line.trim())
    .slice(0, 5)
    .join("\n");
}

/** The vitest process of the run in progress, killed with the busy loops on Ctrl-C. */
let current;

async function main() {
  let options;
  try {
    options = parseArgs(process.argv.slice(2));
  } catch (error) {
    console.error(`${error.message}\n${USAGE}`);
    return 2;
  }
  const { runs, busy, rest } = options;
  const dir = mkdtempSync(join(tmpdir(), "threadkeep-test-repeat-"));
  const loops = busyCores(busy);
  const cleanup = () => {
    for (const loop of loops) loop.kill("SIGKILL");
  };
  process.once("exit", cleanup);
  for (const signal of ["SIGINT", "SIGTERM"]) {
    process.once(signal, () => {
      current?.kill(signal);
      cleanup();
      process.exit(130);
    });
  }
  console.log(
    `test:repeat: ${runs} run(s) of vitest run ${rest.join(" ") || "(the whole suite)"}${busy ? `, ${busy} core(s) kept busy` : ""}; logs in ${dir}`,
  );
  /** Per test: how many runs it failed in, and its first error. */
  const counts = new Map();
  let redRuns = 0;
  for (let run = 1; run <= runs; run++) {
    const log = join(dir, `run-${run}.log`);
    const json = join(dir, `run-${run}.json`);
    const started = Date.now();
    const code = await runVitest(rest, run, log, json);
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    let failed = [];
    let total = 0;
    if (existsSync(json)) ({ failed, total } = failuresOf(json));
    // A red exit without a failed test: an unhandled error, or vitest could not start (see the log).
    if (code !== 0 && failed.length === 0) {
      const tail = readFileSync(log, "utf8")
        .split("\n")
        .filter((line) => /error/i.test(line))
        .slice(0, 3)
        .join("\n");
      failed.push({
        test: "(the run itself: exit code without a failed test; an unhandled error?)",
        error: tail || `exit code ${code}, see ${log}`,
      });
    }
    if (failed.length > 0) redRuns++;
    for (const { test, error } of failed) {
      const entry = counts.get(test) ?? { times: 0, firstRun: run, error };
      entry.times++;
      counts.set(test, entry);
    }
    console.log(
      `run ${run}/${runs}: ${failed.length === 0 ? "green" : `${failed.length} failed`} (${total} tests, ${seconds} s, exit code ${code})`,
    );
  }
  cleanup();
  console.log(`\n${runs - redRuns} of ${runs} runs green${busy ? ` (${busy} core(s) kept busy)` : ""}`);
  if (counts.size > 0) {
    console.log("\nfailed tests (runs failed / runs):");
    for (const [test, { times, firstRun, error }] of [...counts].sort(
      (a, b) => b[1].times - a[1].times || a[0].localeCompare(b[0]),
    )) {
      console.log(`  ${times}/${runs}  ${test}`);
      console.log(`        first error (run ${firstRun}): ${error.split("\n").join("\n        ")}`);
    }
  }
  return redRuns === 0 ? 0 : 1;
}

process.exitCode = await main();
