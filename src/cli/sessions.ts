/**
 * `threadkeep sessions list | show | delete | prune`: looking after stored sessions. A table on a
 * terminal, tab-separated rows in a pipe, `--json` for scripts.
 */
import type { Command } from "commander";
import { describeCommand } from "./_commands.js";
import { iterateAllSessions } from "../core/enumerate.js";
import { SessionNotFoundError } from "../core/errors.js";
import { parseSessionId } from "../core/ids.js";
import { contentText } from "../core/messages.js";
import { parseDuration, parsePositiveInt } from "../core/policies.js";
import type { Session, FullStore } from "../core/types.js";
import { ago, oneLine, paintFor, table } from "./_format.js";
import { formatDuration } from "./_progress.js";
import { forEachConcurrent, readSessionBundle } from "../transfer/session-copy.js";
import { addStoreUrlOption, withStore } from "./_store.js";
import { resolveConfig } from "./options.js";

/** A session as `sessions list` shows it. */
export interface SessionSummaryRow {
  id: string;
  userId: string;
  createdAt: number;
  lastActivityAt: number;
  messages: number;
  /** The first user message still stored, on one line. */
  title: string;
}

/** Adds the message count and title to each session (a few sessions at a time). */
export async function describeSessions(store: FullStore, sessions: Session[]): Promise<SessionSummaryRow[]> {
  const rows = new Map<string, SessionSummaryRow>();
  await forEachConcurrent(sessions, 8, async (s) => {
    const [messages, head] = await Promise.all([store.countMessages(s.id), store.getMessages(s.id, { limit: 10 })]);
    const first = head.find((m) => m.role === "user");
    rows.set(s.id, {
      id: s.id,
      userId: s.userId,
      createdAt: s.createdAt,
      lastActivityAt: s.lastActivityAt,
      messages,
      title: first ? oneLine(contentText(first.content), 50) : "",
    });
  });
  return sessions.map((s) => rows.get(s.id)!);
}

/** The most recently active sessions: one owner's, or everyone's (scanning them all). `limit` 0: no limit. */
export async function recentSessions(
  store: FullStore,
  options: { userId?: string; limit: number },
): Promise<Session[]> {
  const wanted = options.limit > 0 ? options.limit : Number.POSITIVE_INFINITY;
  const found: Session[] = [];
  if (options.userId !== undefined) {
    let cursor: string | null = null;
    do {
      const page = await store.listSessions(options.userId, { limit: Math.min(200, wanted), cursor });
      found.push(...page.sessions);
      cursor = page.nextCursor;
    } while (cursor && found.length < wanted);
    return found.slice(0, wanted);
  }
  for await (const session of iterateAllSessions(store)) found.push(session);
  found.sort((a, b) => b.lastActivityAt - a.lastActivityAt || (a.id < b.id ? 1 : -1));
  return found.slice(0, wanted);
}

const json = (value: unknown) => process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
const date = (ms: number) => `${new Date(ms).toISOString().replace("T", " ").slice(0, 19)} (${ago(ms)})`;

async function list(opts: { store?: string; user?: string; limit: string; json?: boolean }) {
  const limit = opts.limit === "0" ? 0 : parsePositiveInt(opts.limit, "--limit");
  await withStore(opts, async (store) => {
    const rows = await describeSessions(store, await recentSessions(store, { userId: opts.user, limit }));
    if (opts.json) return json(rows);
    if (rows.length === 0) return void process.stdout.write("no sessions\n");
    const header = ["ID", "USER", "MESSAGES", "LAST ACTIVITY", "TITLE"];
    const cells = rows.map((r) => [r.id, r.userId, String(r.messages), ago(r.lastActivityAt), r.title]);
    process.stdout.write(table(header, cells, process.stdout.isTTY === true, paintFor(process.stdout)));
  });
}

async function show(id: string, opts: { store?: string; last?: string; json?: boolean }) {
  const last = opts.last ? parsePositiveInt(opts.last, "--last") : undefined;
  await withStore(opts, async (store) => {
    const bundle = await readSessionBundle(store, parseSessionId(id));
    if (!bundle) throw new SessionNotFoundError(id);
    const messages = last ? bundle.messages.slice(-last) : bundle.messages;
    if (opts.json) return json({ ...bundle, messages });
    const { session } = bundle;
    const range = bundle.messages.length > 0 ? ` (seq ${bundle.messages[0].seq}–${bundle.messages.at(-1)!.seq})` : "";
    const info = [
      ["session", session.id],
      ["user", session.userId],
      ["created", date(session.createdAt)],
      ["active", date(session.lastActivityAt)],
      ["messages", `${bundle.messages.length}${range}`],
      ["summaries", String(bundle.summaries.length)],
      ["branches", String(bundle.branches?.length ?? 0)],
      ["state", bundle.state ? JSON.stringify(bundle.state) : "none"],
      ["metadata", JSON.stringify(session.metadata)],
    ];
    process.stdout.write(`${info.map(([k, v]) => `${k.padEnd(10)}${v}`).join("\n")}\n\n`);
    const paint = paintFor(process.stdout);
    for (const m of messages) {
      const text = m.tool_calls ? `→ ${m.tool_calls.map((c) => c.function.name).join(", ")}` : oneLine(m.content, 100);
      process.stdout.write(
        `${paint.dim(`#${m.seq}`.padEnd(6))}${m.role.padEnd(10)}${text}${m.incomplete ? paint.yellow(" [incomplete]") : ""}\n`,
      );
    }
    for (const b of bundle.branches ?? []) {
      const from = b.parentId === null ? "" : ` (inside branch ${b.parentId})`;
      const first = b.messages[0] ? oneLine(b.messages[0].content, 60) : "";
      process.stdout.write(
        `${paint.dim(`branch ${b.id}`)} after #${b.atSeq}, ${b.reason}${from}: ${b.messages.length} messages ${first}\n`,
      );
    }
  });
}

async function prune(opts: { store?: string; ttl?: string; olderThan?: string; dryRun?: boolean; json?: boolean }) {
  const olderThanMs = opts.olderThan
    ? parseDuration(opts.olderThan)
    : resolveConfig({ store: opts.store, ttl: opts.ttl }).ttlMs;
  const cutoff = Date.now() - olderThanMs;
  await withStore(opts, async (store) => {
    let ids: string[];
    if (opts.dryRun) {
      ids = [];
      for await (const s of iterateAllSessions(store)) if (s.lastActivityAt < cutoff) ids.push(s.id);
    } else {
      ids = await store.expire(cutoff);
    }
    if (opts.json) return json({ dryRun: opts.dryRun === true, olderThanMs, sessions: ids });
    const verb = opts.dryRun ? "would delete" : "deleted";
    process.stdout.write(`${verb} ${ids.length} session(s) inactive for more than ${formatDuration(olderThanMs)}\n`);
    if (opts.dryRun) for (const id of ids) process.stdout.write(`${id}\n`);
  });
}

/** Adds `threadkeep sessions …`. */
export function register(program: Command): void {
  const sessions = program.command("sessions").description(describeCommand("sessions"));

  addStoreUrlOption(
    sessions
      .command("list")
      .description(
        "Most recently active sessions first: id, owner, message count, last activity, title (first user message)",
      )
      .option("--user <id>", "only this owner's sessions (default: every owner)")
      .option("--limit <n>", "show at most n sessions; 0 for all", "50")
      .option("--json", "print JSON"),
  ).action(list);

  addStoreUrlOption(
    sessions
      .command("show")
      .description("A session's details, state and messages (in original numbering)")
      .argument("<id>", "session id")
      .option("--last <n>", "only the last n messages")
      .option("--json", "print JSON (the export format's fields)"),
  ).action(show);

  addStoreUrlOption(
    sessions
      .command("delete")
      .description("Delete a session with its messages, summaries and state")
      .argument("<id>", "session id"),
  ).action(async (id: string, opts: { store?: string }) => {
    await withStore(opts, async (store) => {
      if (!(await store.deleteSession(parseSessionId(id)))) throw new SessionNotFoundError(id);
      process.stdout.write(`deleted ${id}\n`);
    });
  });

  addStoreUrlOption(
    sessions
      .command("prune")
      .description("Delete sessions inactive for longer than --older-than")
      .option(
        "--older-than <duration>",
        "e.g. 7d, 12h, 30m (default: --ttl, env THREADKEEP_TTL, else 7d; 30m for memory:)",
      )
      .option("--ttl <duration>", "inactivity expiry used when --older-than is not given")
      .option("--dry-run", "only list what would be deleted")
      .option("--json", "print JSON"),
  ).action(prune);
}
