/**
 * Summarises a V8 `.cpuprofile` (from `node --cpu-prof`, e.g. bench/_cpu-probe.ts with CPU_PROF_DIR):
 * the share of samples by function (self time), by file or package, and by "owner", the innermost
 * threadkeep frame on the stack (so time spent in node:http or better-sqlite3 on threadkeep's behalf
 * is billed to the threadkeep function that asked for it; samples with no threadkeep frame are
 * "[outside]" and billed to their leaf's file).
 *
 *   npx tsx bench/_cpuprofile-top.ts CPU.….cpuprofile [--from 0.5] [--top 40]
 *
 * `--from` skips the first part of the recording (0.5: its second half), to leave out start-up and
 * warm-up. Idle samples are left out; percentages are of the rest.
 */
import { readFileSync } from "node:fs";

const args = process.argv.slice(2);
const option = (name: string, fallback: number) => {
  const at = args.indexOf(name);
  return at >= 0 ? Number(args.splice(at, 2)[1]) : fallback;
};
const from = option("--from", 0);
const top = option("--top", 40);
const [file] = args;
if (!file) {
  console.error("usage: npx tsx bench/_cpuprofile-top.ts <file.cpuprofile> [--from 0.5] [--top 40]");
  process.exit(2);
}

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
const parents = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id);

const short = (url: string) => url.replace(/^file:\/\/.*?\/(src|dist)\//, "$1/").replace(/^.*node_modules\//, "npm:");
const isOwn = (url: string) => /\/(src|dist)\//.test(url) && !url.includes("node_modules");
const nameOf = (frame: CallFrame) => `${frame.functionName || "(anonymous)"} ${short(frame.url)}${frame.url ? `:${frame.lineNumber + 1}` : ""}`;
const fileOf = (frame: CallFrame) => {
  const url = short(frame.url);
  if (!url) return `(${frame.functionName})`;
  return url.startsWith("npm:") ? url.split("/").slice(0, url.startsWith("npm:@") ? 2 : 1).join("/") : url;
};

const bySelf = new Map<string, number>();
const byFile = new Map<string, number>();
const byOwner = new Map<string, number>();
const add = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
const start = profile.startTime + (profile.endTime - profile.startTime) * from;
let time = profile.startTime;
let counted = 0;
profile.samples.forEach((id, i) => {
  time += profile.timeDeltas[i];
  const leaf = nodes.get(id)!;
  if (time < start || leaf.callFrame.functionName === "(idle)") return;
  counted++;
  add(bySelf, nameOf(leaf.callFrame));
  add(byFile, fileOf(leaf.callFrame));
  let owner = `[outside] ${fileOf(leaf.callFrame)}`;
  for (let at: number | undefined = id; at !== undefined; at = parents.get(at)) {
    const frame = nodes.get(at)!.callFrame;
    if (isOwn(frame.url)) {
      owner = nameOf(frame);
      break;
    }
  }
  add(byOwner, owner);
});

const print = (title: string, map: Map<string, number>) => {
  console.log(`\n== ${title} ==`);
  for (const [key, n] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`${((100 * n) / counted).toFixed(1).padStart(5)}%  ${key}`);
  }
};
console.log(`${counted} samples (idle left out), from ${Math.round(from * 100)}% of the recording`);
print("self time by function", bySelf);
print("self time by file or package", byFile);
print("by innermost threadkeep frame", byOwner);
