/**
 * Replays what real client libraries sent (the fixtures in test/fixtures/clients/, recorded by
 * `npx tsx test/fixtures/clients/record.ts` and the other recorders there) against threadkeep, on the
 * SQLite and the memory store, and checks that every model call carried the conversation the app
 * had (`expected`) and that the session's main line ends as the app's transcript. Every change to
 * how a request is read must pass it.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Memory } from "../../src/core/memory/memory.js";
import { createMemory } from "../../src/create-memory.js";
import { createServer, type ThreadkeepServer } from "../../src/server/index.js";
import { createSqliteStore } from "../../src/stores/sqlite/index.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { type FakeReply, type FakeUpstream, startFakeUpstream } from "../_fake-upstream.js";
import { type ClientFixture, isInstruction } from "../fixtures/clients/_format.js";

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), "../fixtures/clients");
const fixtureFiles = readdirSync(FIXTURES)
  .filter((file) => file.endsWith(".json"))
  .sort();

/** A message as compared: only what the wire may not vary. */
interface Comparable {
  role: string;
  content: string;
  tool_calls?: { id: string; name: string; arguments: unknown }[];
  tool_call_id?: string;
}

const parsedArguments = (raw: unknown): unknown => {
  if (typeof raw !== "string") return raw;
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
};

/**
 * What a message is to the model: content null, "" and absent are the same, text parts read as
 * their text, and tool call arguments as the JSON they encode (clients re-serialise them).
 */
function comparable(message: any): Comparable {
  const content = message.content;
  const text =
    typeof content === "string"
      ? content
      : Array.isArray(content)
        ? content.map((p: any) => p?.text ?? "").join("")
        : "";
  const out: Comparable = { role: message.role, content: text };
  if (Array.isArray(message.tool_calls) && message.tool_calls.length > 0) {
    out.tool_calls = message.tool_calls.map((c: any) => ({
      id: c.id,
      name: c.function?.name,
      arguments: parsedArguments(c.function?.arguments),
    }));
  }
  if (typeof message.tool_call_id === "string") out.tool_call_id = message.tool_call_id;
  return out;
}

const conversation = (messages: any[]): Comparable[] => messages.filter((m) => !isInstruction(m)).map(comparable);

/** Sends one recorded request as it was recorded and reads the whole answer (streamed or not). */
function send(
  baseUrl: string,
  exchange: ClientFixture["exchanges"][number],
): Promise<{ status: number; body: string }> {
  const url = new URL(exchange.request.path, baseUrl);
  const raw = JSON.stringify(exchange.request.body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        method: exchange.request.method,
        path: url.pathname + url.search,
        headers: { ...exchange.request.headers, "content-length": Buffer.byteLength(raw) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(raw);
  });
}

interface Target {
  memory: Memory;
  server: ThreadkeepServer;
  url: string;
}

let fake: FakeUpstream;
let reply: FakeReply | undefined;
const dir = mkdtempSync(join(tmpdir(), "threadkeep-client-replay-"));
const targets: Record<string, Target> = {};
const STORES = {
  sqlite: () => createSqliteStore({ path: join(dir, "replay.db") }),
  memory: () => createMemoryStore(),
};

beforeAll(async () => {
  fake = await startFakeUpstream();
  fake.setReply(() => {
    if (!reply) throw new Error("the model was called without an exchange to answer");
    return structuredClone(reply);
  });
  for (const [name, store] of Object.entries(STORES)) {
    const memory = createMemory({ store: store() });
    const server = await createServer({ upstream: { baseUrl: fake.url, apiKey: "sk-upstream" }, memory, port: 0 });
    targets[name] = { memory, server, url: await server.listen() };
  }
});

afterAll(async () => {
  for (const target of Object.values(targets)) {
    await target.server.close();
    await target.memory.close();
  }
  await fake?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Replays one fixture on one store; the first difference fails it, naming the fixture and exchange. */
async function replay(file: string, fixture: ClientFixture, target: Target) {
  const sessionId = fixture.sessionHeaders["x-session-id"];
  const rewrites: string[] = [];
  let lastResponseId: string | undefined;
  for (const [i, recorded] of fixture.exchanges.entries()) {
    const where = `${file} exchange #${i} (turn ${recorded.turn}, ${recorded.action})`;
    // A previous_response_id names the response of the request before (the recorder checks that):
    // this replay's response, not the recording's.
    const body = recorded.request.body?.previous_response_id
      ? { ...recorded.request.body, previous_response_id: lastResponseId }
      : recorded.request.body;
    const exchange = { ...recorded, request: { ...recorded.request, body } };
    const before = fake.chatRequests().length;
    reply = exchange.reply as FakeReply;
    const answer = await send(target.url, exchange);
    reply = undefined;
    expect(answer.status, `${where}: threadkeep answered ${answer.body.slice(0, 300)}`).toBe(200);
    lastResponseId = /"id":"(resp_[0-9a-zA-Z_-]+)"/.exec(answer.body)?.[1];
    const calls = fake.chatRequests().slice(before);
    expect(calls.length, `${where}: model calls`).toBe(1);
    expect(conversation(calls[0].body.messages), `${where}: what the model received`).toEqual(
      conversation(exchange.expected),
    );
    if (Array.isArray(exchange.request.body?.messages)) {
      // A chat request's system messages go first, as the app sent them; threadkeep adds none with its defaults.
      const instructions = exchange.request.body.messages.filter(isInstruction).map(comparable);
      expect(calls[0].body.messages.filter(isInstruction).map(comparable), `${where}: the system messages`).toEqual(
        instructions,
      );
      expect(
        calls[0].body.messages.slice(0, instructions.length).map(comparable),
        `${where}: the system messages come first`,
      ).toEqual(instructions);
    }
    if (exchange.action === "regenerate" || exchange.action === "edit") rewrites.push(exchange.action);
    const branches = await target.memory.listBranches(sessionId);
    const reasons = branches.sort((a, b) => a.id - b.id).map((b) => b.reason);
    expect(reasons, `${where}: branches (one per regenerate or edit so far, with its reason)`).toEqual(rewrites);
  }
  const mainLine = await target.memory.getMessages(sessionId);
  expect(conversation(mainLine), `${file}: the session's main line`).toEqual(conversation(fixture.expectedMainLine));
}

it("finds the recorded client fixtures", () => {
  expect(fixtureFiles.length).toBeGreaterThan(0);
});

describe.each(Object.keys(STORES))("client fixtures replayed on the %s store", (store) => {
  for (const file of fixtureFiles) {
    const fixture = JSON.parse(readFileSync(join(FIXTURES, file), "utf8")) as ClientFixture;
    const title = `${file}: ${fixture.package}, ${fixture.flow}`;
    const run = () => replay(file, fixture, targets[store]);
    it(title, run);
  }
});
