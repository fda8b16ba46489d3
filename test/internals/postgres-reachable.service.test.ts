/**
 * The PostgreSQL store's reachability probe (`answersNewConnection`, used while the store is marked
 * down) against a server that stops answering right after the handshake: it says "unreachable" in
 * time and leaves no rejection behind. The probe once let the driver look up array types first; cut
 * by the probe's deadline, that lookup's rejection was dropped by the driver and ended the process
 * (an unhandled rejection seen in outage.service.test.ts on a busy machine).
 */
import { afterAll, describe, expect, it } from "vitest";
import { answersNewConnection } from "../../src/stores/postgres/_client.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";
import { startTcpProxy, type TcpProxy } from "../_tcp-proxy.js";

const enabled = await serviceAvailable("postgres");

describe.skipIf(enabled !== true)("postgres: the reachability probe", () => {
  const proxies: TcpProxy[] = [];
  afterAll(async () => {
    for (const proxy of proxies) proxy.restore();
    await Promise.all(proxies.map((p) => p.close()));
  });

  it("answers false when the server goes silent after the handshake, with no rejection left behind", async () => {
    // The first simple or extended query after the startup messages: the server goes silent there, so
    // the probe's deadline falls while its first statement (whatever it is) waits for an answer.
    const proxy: TcpProxy = await startTcpProxy(
      { host: "127.0.0.1", port: Number(new URL(TEST_POSTGRES_URL).port || 5432) },
      { tap: (_socket, chunk) => (chunk[0] === 0x51 || chunk[0] === 0x50 ? proxy.cut("stall") : undefined) },
    );
    proxies.push(proxy);
    const dropped: unknown[] = [];
    const onRejection = (reason: unknown) => dropped.push(reason);
    process.on("unhandledRejection", onRejection);
    try {
      await expect(answersNewConnection(proxy.url(TEST_POSTGRES_URL), 1_000)).resolves.toBe(false);
      // The driver rejects what the destroyed connection had in flight on a later tick.
      await new Promise((r) => setTimeout(r, 200));
      expect(dropped).toEqual([]);
    } finally {
      process.off("unhandledRejection", onRejection);
    }
  });
});
