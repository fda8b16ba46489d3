/**
 * `trustProxy` (`serve --trust-proxy`): the request log names the client from X-Forwarded-For only
 * when the connection comes from a trusted proxy. Off, or from a peer not on the list, a client's own
 * X-Forwarded-For is ignored: otherwise anyone could write any address into the logs.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type Stack, startStack, type StackOptions } from "./_stack.js";

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.close();
  stack = undefined;
});

/** The `remoteAddress` the request log gives a GET /healthz that says it is forwarded for 203.0.113.7. */
async function loggedAddress(trustProxy: StackOptions["trustProxy"]): Promise<string | undefined> {
  const lines: { msg: string; req?: { remoteAddress?: string } }[] = [];
  stack = await startStack({
    trustProxy,
    logRequests: true,
    logger: { level: "info", stream: { write: (line: string) => lines.push(JSON.parse(line)) } },
  });
  const res = await stack.request("GET", "/healthz", { headers: { "x-forwarded-for": "203.0.113.7" } });
  expect(res.status).toBe(200);
  const incoming = lines.filter((l) => l.msg === "incoming request");
  expect(incoming).toHaveLength(1);
  return incoming[0]!.req?.remoteAddress;
}

describe("the client's address behind a proxy", () => {
  it("ignores X-Forwarded-For by default", async () => {
    expect(await loggedAddress(undefined)).toBe("127.0.0.1");
  });

  it("ignores it from a peer that is not a trusted proxy", async () => {
    expect(await loggedAddress(["10.0.0.0/8"])).toBe("127.0.0.1");
  });

  it("takes the client from it when the peer is a trusted proxy", async () => {
    expect(await loggedAddress(["127.0.0.1"])).toBe("203.0.113.7");
    await stack!.close();
    expect(await loggedAddress(true)).toBe("203.0.113.7");
  });
});
