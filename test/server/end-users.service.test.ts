/**
 * Many people behind one gateway (one API key): with `userHeader` or `userJwt`, each person owns
 * their sessions alone, on every surface: chat turns, the session list, search, messages, the
 * inspector's data endpoints and MCP. Without those options the forwarded headers change nothing.
 * The isolation cases run on SQLite, PostgreSQL and Redis (they share the server code).
 */
import { randomUUID } from "node:crypto";
import { request as httpRequest } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServer } from "../../src/server/index.js";
import { createMemoryStore } from "../../src/stores/in-process/index.js";
import { serviceAvailable, TEST_POSTGRES_URL, TEST_REDIS_URL } from "../_services.js";
import { errorOf } from "./_error-helpers.js";
import { type Stack, startStack } from "./_stack.js";

const SECRET = "threadkeep-test-forward-jwt-secret-0123";
const USER_HEADER = "X-OpenWebUI-User-Id";
const JWT_HEADER = "X-OpenWebUI-User-Jwt";
/**
 * A token as Open WebUI mints it: `_mint_forward_user_jwt` of backend/open_webui/utils/headers.py run
 * with PyJWT 2.15.1 and the secret above, `iat`/`exp` moved to 2099 so the fixture stays valid.
 */
const OPEN_WEBUI_TOKEN =
  "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiI4YzFmMGYzZS00YjVhLTRjMWUtOWE0My0yZDBlM2IxZjdhMTAiLCJlbWFpbCI6ImFsaWNlQGV4YW1wbGUuY29tIiwibmFtZSI6IkFsaWNlIiwicm9sZSI6InVzZXIiLCJpc3MiOiJvcGVuLXdlYnVpIiwiaWF0Ijo0MTAyNDQxMjAwLCJleHAiOjQxMDI0NDQ4MDB9.xSGZiio9hj5q47ykMZNchjs1WwUsJKAbwO3Q0ygImII";
const OPEN_WEBUI_USER = "8c1f0f3e-4b5a-4c1e-9a43-2d0e3b1f7a10";

/** A token with Open WebUI's claims; `overrides` changes what a test is about. */
async function mint(
  sub: string | undefined,
  overrides: { secret?: string; issuer?: string; expiresIn?: number; alg?: string } = {},
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const jwt = new SignJWT({ email: `${sub}@example.com`, name: sub, role: "user" })
    .setProtectedHeader({ alg: overrides.alg ?? "HS256", typ: "JWT" })
    .setIssuer(overrides.issuer ?? "open-webui")
    .setIssuedAt(now)
    .setExpirationTime(now + (overrides.expiresIn ?? 300));
  if (sub !== undefined) jwt.setSubject(sub);
  return jwt.sign(new TextEncoder().encode(overrides.secret ?? SECRET));
}

const dir = mkdtempSync(join(tmpdir(), "tk-end-users-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const BACKENDS = [
  {
    name: "sqlite",
    store: () => `sqlite:${join(dir, "end-users.db")}`,
    available: async (): Promise<true | string> => true,
  },
  { name: "postgres", store: () => TEST_POSTGRES_URL, available: () => serviceAvailable("postgres") },
  { name: "redis", store: () => TEST_REDIS_URL, available: () => serviceAvailable("redis") },
];

/** How a person is named: by the trusted header, or by a signed token. */
const MODES = [
  {
    mode: "trusted header",
    options: { userHeader: USER_HEADER },
    as: async (person: string): Promise<Record<string, string>> => ({ [USER_HEADER]: person }),
  },
  {
    mode: "signed token",
    options: { userHeader: USER_HEADER, userJwt: { secret: SECRET } },
    as: async (person: string): Promise<Record<string, string>> => ({ [JWT_HEADER]: await mint(person) }),
  },
];

const CASES = BACKENDS.flatMap((backend) => MODES.map((mode) => ({ ...backend, ...mode })));

/** One caller of a stack: the gateway's key, plus a person's identity headers (none: the key's own user). */
function caller(stack: () => Stack, key: string, identity: Record<string, string> = {}) {
  const headers = { authorization: `Bearer ${key}`, ...identity };
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await stack().request(method, path, { headers, body });
    const text = await res.text();
    // The export is JSON lines, everything else one JSON body.
    return {
      status: res.status,
      body: (res.headers.get("content-type")?.includes("application/json") ? JSON.parse(text) : text) as any,
    };
  };
  return {
    headers,
    call,
    chat: async (session: string, content: string) => {
      const res = await stack().request("POST", "/v1/chat/completions", {
        headers: { ...headers, "x-session-id": session },
        body: { model: "m", messages: [{ role: "user", content }] },
      });
      return { status: res.status, body: (await res.json()) as any };
    },
    sessionIds: async () => {
      const listed = await call("GET", "/v1/sessions?limit=100");
      expect(listed.status).toBe(200);
      return listed.body.data.map((s: { id: string }) => s.id).sort();
    },
  };
}

describe.each(CASES)("end users by $mode on $name", ({ store, available, options, as }) => {
  let stack: Stack;
  let skip: string | undefined;
  // Fresh tenants per run: a shared PostgreSQL or Redis keeps other runs' sessions.
  const tenant = `acme-${randomUUID().slice(0, 8)}`;
  const otherTenant = `globex-${randomUUID().slice(0, 8)}`;
  const alicesChat = randomUUID();
  const bobsChat = randomUUID();
  const keysOwn = randomUUID();
  let alice: ReturnType<typeof caller>;
  let bob: ReturnType<typeof caller>;
  let key: ReturnType<typeof caller>;
  let aliceElsewhere: ReturnType<typeof caller>;

  beforeAll(async () => {
    const up = await available();
    if (up !== true) {
      skip = up;
      return;
    }
    stack = await startStack({ store: store(), apiKeys: { "key-gw": tenant, "key-other": otherTenant }, ...options });
    alice = caller(() => stack, "key-gw", await as("alice"));
    bob = caller(() => stack, "key-gw", await as("bob"));
    key = caller(() => stack, "key-gw");
    aliceElsewhere = caller(() => stack, "key-other", await as("alice"));
    expect((await alice.chat(alicesChat, "The plumber comes on Tuesday, code 4711")).status).toBe(200);
    expect((await bob.chat(bobsChat, "Bob's own note about the garden")).status).toBe(200);
    expect((await key.chat(keysOwn, "The gateway's own note")).status).toBe(200);
  }, 30_000);
  afterAll(async () => {
    await stack?.close();
  });

  it("keeps a chat to its person: the same session id from another person is 404 and reaches no model", async (ctx) => {
    if (skip) ctx.skip(skip);
    const before = stack.fake.chatRequests().length;
    for (const other of [bob, key, aliceElsewhere]) {
      const turn = await other.chat(alicesChat, "What is the code?");
      expect(turn.status).toBe(404);
      expect(turn.body.error.code).toBe("session_not_found");
    }
    expect(stack.fake.chatRequests()).toHaveLength(before);
    // Alice's own next turn carries her history; Bob's turns never carried it.
    expect((await alice.chat(alicesChat, "What is the code?")).status).toBe(200);
    const sent = JSON.stringify(stack.fake.chatRequests().at(-1)!.body.messages);
    expect(sent).toContain("code 4711");
    const bobsTurns = stack.fake.chatRequests().filter((r) => JSON.stringify(r.body).includes("garden"));
    expect(bobsTurns.length).toBeGreaterThan(0);
    for (const turn of bobsTurns) expect(JSON.stringify(turn.body)).not.toContain("4711");
  });

  it("lists each person's sessions only; the key's own user sees none of theirs", async (ctx) => {
    if (skip) ctx.skip(skip);
    expect(await alice.sessionIds()).toEqual([alicesChat]);
    expect(await bob.sessionIds()).toEqual([bobsChat]);
    expect(await key.sessionIds()).toEqual([keysOwn]);
    expect(await aliceElsewhere.sessionIds()).toEqual([]);
    // The owner ids: `<tenant>/<person>` for a person, the tenant for the key itself.
    const memory = stack.memory;
    expect((await memory.getSession(alicesChat, { userId: `${tenant}/alice` })).id).toBe(alicesChat);
    expect((await memory.getSession(keysOwn, { userId: tenant })).id).toBe(keysOwn);
  });

  it("searches each person's messages only", async (ctx) => {
    if (skip) ctx.skip(skip);
    const hits = async (who: ReturnType<typeof caller>, query: string) => {
      const found = await who.call("GET", `/v1/search?q=${encodeURIComponent(query)}`);
      expect(found.status).toBe(200);
      return [...new Set(found.body.data.map((h: { sessionId: string }) => h.sessionId))];
    };
    expect(await hits(alice, "plumber")).toEqual([alicesChat]);
    for (const other of [bob, key, aliceElsewhere]) expect(await hits(other, "plumber")).toEqual([]);
    expect(await hits(bob, "garden")).toEqual([bobsChat]);
    expect(await hits(alice, "garden")).toEqual([]);
    expect((await bob.call("GET", `/v1/search?q=plumber&session=${alicesChat}`)).status).toBe(404);
  });

  it("answers 404 to every other person on the session's messages and the inspector's endpoints", async (ctx) => {
    if (skip) ctx.skip(skip);
    const paths = ["", "/messages", "/context", "/state", "/summaries", "/branches", "/search?q=plumber", "/export"];
    for (const path of paths) {
      expect((await alice.call("GET", `/v1/sessions/${alicesChat}${path}`)).status, path).toBe(200);
      for (const other of [bob, key, aliceElsewhere]) {
        const res = await other.call("GET", `/v1/sessions/${alicesChat}${path}`);
        expect(res.status, path).toBe(404);
        expect(res.body.error.code, path).toBe("session_not_found");
      }
    }
    const messages = await alice.call("GET", `/v1/sessions/${alicesChat}/messages`);
    expect(messages.body.data.map((m: { content: string }) => m.content)).toContain(
      "The plumber comes on Tuesday, code 4711",
    );
    // Nor can another person change it.
    expect((await bob.call("DELETE", `/v1/sessions/${alicesChat}`)).status).toBe(404);
    expect(
      (await bob.call("POST", `/v1/sessions/${alicesChat}/messages`, { messages: [{ role: "user", content: "x" }] }))
        .status,
    ).toBe(404);
    expect((await alice.call("GET", `/v1/sessions/${alicesChat}`)).status).toBe(200);
  });

  it("keeps MCP to the person too", async (ctx) => {
    if (skip) ctx.skip(skip);
    const connect = async (headers: Record<string, string>) => {
      const client = new Client({ name: "threadkeep-test", version: "1.0.0" });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${stack.url}/mcp`), { requestInit: { headers } }),
      );
      return client;
    };
    const text = (result: unknown) => JSON.parse((result as { content: { text: string }[] }).content[0].text);
    const bobs = await connect(bob.headers);
    const alices = await connect(alice.headers);
    try {
      const listed = text(await bobs.callTool({ name: "list_sessions", arguments: {} }));
      expect(listed.sessions.map((s: { id: string }) => s.id)).toEqual([bobsChat]);
      expect(text(await bobs.callTool({ name: "search", arguments: { q: "plumber" } }))).toEqual([]);
      const read = await bobs.callTool({ name: "read_messages", arguments: { session_id: alicesChat } });
      expect(read.isError).toBe(true);
      expect(text(read).error.code).toBe("session_not_found");
      const own = text(await alices.callTool({ name: "read_messages", arguments: { session_id: alicesChat } }));
      expect(own.map((m: { content: string }) => m.content)).toContain("The plumber comes on Tuesday, code 4711");
    } finally {
      await bobs.close();
      await alices.close();
    }
  });
});

describe("end users by trusted header: what is refused and what is ignored", () => {
  let stack: Stack;
  let plain: Stack;
  beforeAll(async () => {
    [stack, plain] = await Promise.all([
      startStack({ apiKeys: { "key-gw": "acme" }, userHeader: USER_HEADER }),
      startStack({ apiKeys: { "key-gw": "acme" } }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([stack?.close(), plain?.close()]);
  });

  /** A request with raw header values, as bytes (Node's http client sends a string's chars as latin1). */
  const rawGet = (url: string, headers: [string, string][]) =>
    new Promise<{ status: number; body: any }>((resolve, reject) => {
      const target = new URL(`${url}/v1/sessions`);
      const req = httpRequest({ host: target.hostname, port: target.port, path: target.pathname, method: "GET" });
      req.setHeader("authorization", "Bearer key-gw");
      for (const [name, value] of headers) req.appendHeader(name, value);
      req.on("response", (res) => {
        let text = "";
        res
          .on("data", (d) => (text += d))
          .on("end", () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      });
      req.on("error", reject).end();
    });

  it("answers 400 invalid_user to an empty, over-long, control-character, non-UTF-8 or doubled end user", async () => {
    const bad: [string, [string, string][]][] = [
      ["empty", [[USER_HEADER, ""]]],
      ["257 characters", [[USER_HEADER, "a".repeat(257)]]],
      ["a tab inside", [[USER_HEADER, "ali\tce"]]],
      ["a C1 control as UTF-8", [[USER_HEADER, Buffer.from("ali\u0085ce").toString("latin1")]]],
      ["latin1 bytes that are not UTF-8", [[USER_HEADER, "j\u00f6rg"]]],
      [
        "sent twice",
        [
          [USER_HEADER, "alice"],
          [USER_HEADER, "bob"],
        ],
      ],
    ];
    for (const [why, headers] of bad) {
      const res = await rawGet(stack.url, headers);
      expect(res.status, why).toBe(400);
      expect(res.body.error, why).toMatchObject({ code: "invalid_user", type: "invalid_request_error" });
    }
  });

  it("takes a UTF-8 end user of up to 256 characters as sent", async () => {
    const longest = "ü".repeat(256);
    for (const person of ["jörg@example.com", longest, "org/team/alice"]) {
      const res = await rawGet(stack.url, [[USER_HEADER, Buffer.from(person).toString("latin1")]]);
      expect(res.status, person).toBe(200);
    }
    const session = randomUUID();
    const made = await stack.request("POST", "/v1/sessions", {
      headers: { authorization: "Bearer key-gw", [USER_HEADER]: Buffer.from("jörg").toString("latin1") },
      body: { id: session },
    });
    expect(made.status).toBe(201);
    expect((await stack.memory.getSession(session, { userId: "acme/jörg" })).id).toBe(session);
  });

  it("ignores forwarded user headers without --user-header: they change nothing", async () => {
    const session = randomUUID();
    const forged = { authorization: "Bearer key-gw", [USER_HEADER]: "mallory", [JWT_HEADER]: "not-even-a-token" };
    const made = await plain.request("POST", "/v1/chat/completions", {
      headers: { ...forged, "x-session-id": session },
      body: { model: "m", messages: [{ role: "user", content: "hello" }] },
    });
    expect(made.status).toBe(200);
    // The session is the key's user's, whoever the header named; every name sees the same list.
    expect((await plain.memory.getSession(session, { userId: "acme" })).id).toBe(session);
    const list = async (headers: Record<string, string>) =>
      ((await (await plain.request("GET", "/v1/sessions", { headers })).json()) as any).data.map(
        (s: { id: string }) => s.id,
      );
    const own = await list({ authorization: "Bearer key-gw" });
    expect(own).toContain(session);
    expect(await list({ authorization: "Bearer key-gw", [USER_HEADER]: "someone-else" })).toEqual(own);
  });

  it("names end users on loopback without keys too, under the default user", async () => {
    const open = await startStack({ userHeader: USER_HEADER });
    try {
      const session = randomUUID();
      const made = await open.request("POST", "/v1/sessions", {
        headers: { [USER_HEADER]: "alice" },
        body: { id: session },
      });
      expect(made.status).toBe(201);
      expect((await open.memory.getSession(session, { userId: "default/alice" })).id).toBe(session);
      expect((await open.request("GET", `/v1/sessions/${session}`)).status).toBe(404);
    } finally {
      await open.close();
    }
  });

  it("refuses at start a key user whose id an end user's could be mistaken for", async () => {
    const attempt = createServer({
      memory: { store: createMemoryStore() },
      apiKeys: { k: "acme/alice" },
      userHeader: USER_HEADER,
      port: 0,
    });
    await expect(attempt).rejects.toMatchObject({
      code: "invalid_request",
      message: expect.stringMatching(/contains "\/"/),
    });
    // Without end users the same id is just a user id.
    const fine = await createServer({ memory: { store: createMemoryStore() }, apiKeys: { k: "acme/alice" }, port: 0 });
    await fine.close();
  });
});

describe("end users by signed token: what is refused", () => {
  let stack: Stack;
  let custom: Stack;
  beforeAll(async () => {
    [stack, custom] = await Promise.all([
      startStack({ apiKeys: { "key-gw": "acme" }, userHeader: USER_HEADER, userJwt: { secret: SECRET } }),
      startStack({
        apiKeys: { "key-gw": "acme" },
        userJwt: { secret: SECRET, issuer: "my-gateway", header: "X-End-User-Token" },
      }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([stack?.close(), custom?.close()]);
  });

  const create = (target: Stack, headers: Record<string, string>) => {
    const session = randomUUID();
    return target
      .request("POST", "/v1/sessions", {
        headers: { authorization: "Bearer key-gw", ...headers },
        body: { id: session },
      })
      .then((res) => ({ res, session }));
  };

  it("takes Open WebUI's own token (minted by PyJWT): its sub is the end user", async () => {
    const { res, session } = await create(stack, { [JWT_HEADER]: OPEN_WEBUI_TOKEN });
    expect(res.status).toBe(201);
    expect((await stack.memory.getSession(session, { userId: `acme/${OPEN_WEBUI_USER}` })).id).toBe(session);
  });

  it("answers 401 invalid_user_token to a wrong signature, an expired token, a wrong issuer, another algorithm, no sub or garbage", async () => {
    const bad: [string, string][] = [
      ["wrong signature", await mint("alice", { secret: "another-secret-of-the-same-length-0123" })],
      ["expired", await mint("alice", { expiresIn: -120 })],
      ["wrong issuer", await mint("alice", { issuer: "someone-else" })],
      ["HS512", await mint("alice", { alg: "HS512" })],
      ["no sub", await mint(undefined)],
      ["empty sub", await mint("")],
      ["not a token", "definitely.not.a-token"],
      ["empty", ""],
    ];
    const stored = (await stack.memory.listSessions({ userId: "acme/alice" })).sessions.length;
    for (const [why, token] of bad) {
      const { res } = await create(stack, { [JWT_HEADER]: token });
      expect(res.status, why).toBe(401);
      expect(await errorOf(res), why).toMatchObject({ code: "invalid_user_token", type: "authentication_error" });
    }
    expect((await stack.memory.listSessions({ userId: "acme/alice" })).sessions).toHaveLength(stored);
    // The message says what was wrong, for the operator.
    const expired = await create(stack, { [JWT_HEADER]: await mint("alice", { expiresIn: -120 }) });
    expect((await errorOf(expired.res)).message).toMatch(/expired/);
  });

  it("without a token: the key's own user, but the plain user header alone is refused", async () => {
    const { res, session } = await create(stack, {});
    expect(res.status).toBe(201);
    expect((await stack.memory.getSession(session, { userId: "acme" })).id).toBe(session);
    const plainOnly = await create(stack, { [USER_HEADER]: "alice" });
    expect(plainOnly.res.status).toBe(401);
    expect(await errorOf(plainOnly.res)).toMatchObject({ code: "invalid_user_token" });
  });

  it("believes the token over a plain header naming someone else", async () => {
    const { res, session } = await create(stack, { [JWT_HEADER]: await mint("alice"), [USER_HEADER]: "bob" });
    expect(res.status).toBe(201);
    expect((await stack.memory.getSession(session, { userId: "acme/alice" })).id).toBe(session);
  });

  it("checks the configured issuer and reads the configured header", async () => {
    const ok = await create(custom, { "X-End-User-Token": await mint("carol", { issuer: "my-gateway" }) });
    expect(ok.res.status).toBe(201);
    expect((await custom.memory.getSession(ok.session, { userId: "acme/carol" })).id).toBe(ok.session);
    const openWebUi = await create(custom, { "X-End-User-Token": OPEN_WEBUI_TOKEN });
    expect(openWebUi.res.status).toBe(401);
    // Open WebUI's header is not this server's: ignored, so the key's own user.
    const other = await create(custom, { [JWT_HEADER]: await mint("carol", { issuer: "my-gateway" }) });
    expect(other.res.status).toBe(201);
    expect((await custom.memory.getSession(other.session, { userId: "acme" })).id).toBe(other.session);
  });
});
