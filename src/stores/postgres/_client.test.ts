import { type AddressInfo, createServer, type Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { openClient, parseArray, serializeArray } from "./_client.js";

describe("the array types declared in place of the driver's lookup", () => {
  it("writes PostgreSQL array literals that keep quotes, backslashes, commas, braces and nulls", () => {
    expect(serializeArray([])).toBe("{}");
    expect(serializeArray(["a", 'say "hi"', "back\\slash", "a,b", "{x}", "", null])).toBe(
      '{"a","say \\"hi\\"","back\\\\slash","a,b","{x}","",NULL}',
    );
    expect(serializeArray([1, 2.5, -3])).toBe('{"1","2.5","-3"}');
    expect(serializeArray(Float32Array.of(0.5, 1))).toBe('{"0.5","1"}');
    expect(serializeArray("{1,2}")).toBe("{1,2}");
  });

  it("reads what PostgreSQL prints back, quoted or not", () => {
    expect(parseArray("{}", String)).toEqual([]);
    expect(parseArray('{a,"say \\"hi\\"","back\\\\slash","a,b",NULL,""}', String)).toEqual([
      "a",
      'say "hi"',
      "back\\slash",
      "a,b",
      null,
      "",
    ]);
    expect(parseArray("{1,22,-3}", Number)).toEqual([1, 22, -3]);
    expect(parseArray(serializeArray(["x", null, "y,z"]), String)).toEqual(["x", null, "y,z"]);
  });
});

/**
 * A server that answers every startup as PostgreSQL does at `max_connections`: an ErrorResponse with
 * SQLSTATE 53300, then it closes the connection. Counts the connections it was asked for.
 */
async function tooManyClientsServer(): Promise<{ url: string; attempts: () => number; close: () => Promise<void> }> {
  const fields = ["SFATAL", "VFATAL", "C53300", "Msorry, too many clients already"];
  const body = Buffer.concat([...fields.map((f) => Buffer.from(`${f}\0`)), Buffer.from([0])]);
  const header = Buffer.alloc(5);
  header.write("E", 0);
  header.writeInt32BE(body.length + 4, 1);
  const refusal = Buffer.concat([header, body]);
  let attempts = 0;
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    attempts++;
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    // The startup message (length, protocol 3.0, parameters): answered once it has arrived.
    socket.once("data", () => socket.end(refusal));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `postgres://threadkeep@127.0.0.1:${port}/test`,
    attempts: () => attempts,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

describe("the driver's reconnects against a server that refuses connections as too many", () => {
  it("waits between attempts (30 ms, 90 ms, then the probe interval) instead of hammering it, and fails the query at the connect timeout", async () => {
    const server = await tooManyClientsServer();
    const clients = await openClient(server.url, {
      poolSize: 1,
      connectTimeoutSeconds: 1.5,
      schema: "public",
      queryTimeoutMs: 5_000,
    });
    try {
      const started = performance.now();
      // The driver takes 53300 for transient and tries again while the query waits, until the connect timeout.
      const error = await clients.main`SELECT 1`.then(
        () => null,
        (e: { code?: string }) => e,
      );
      const elapsed = performance.now() - started;
      expect(error?.code).toBe("53300");
      expect(elapsed).toBeGreaterThanOrEqual(1_400);
      // Attempts at 0, 30, 120, then every 250 ms until the failure that finds the timeout passed: 9 here
      // (2026-12-07), fewer when timers run late. With the driver's backoff set to 0 the same run made
      // 1,078 attempts: it connects again the moment a refusal arrives.
      expect(server.attempts()).toBeGreaterThanOrEqual(3);
      expect(server.attempts()).toBeLessThanOrEqual(12);
    } finally {
      await clients.end({ timeout: 0 });
      await server.close();
    }
  });
});
