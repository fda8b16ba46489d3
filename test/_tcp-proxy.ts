/**
 * A TCP proxy on 127.0.0.1 between threadkeep and a store, for fault tests: `cut()` makes the store
 * vanish as a network outage does (existing connections go silent, new ones get no answer), and
 * `restore()` brings it back (silent connections resume, as TCP retransmission would deliver them).
 */
import { createConnection, createServer, type Server, type Socket } from "node:net";

/** A running proxy. */
export interface TcpProxy {
  /** The port to connect to instead of the store's. */
  port: number;
  /** `target` URL with its host and port replaced by the proxy's. */
  url(target: string): string;
  /**
   * Starts an outage. `stall` (default): bytes stop flowing both ways and new connections hang, like a
   * pulled cable; `reset`: every connection is torn down and new ones are refused-by-reset.
   */
  cut(mode?: "stall" | "reset"): void;
  /** Ends the outage. */
  restore(): void;
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  upstream: Socket | null;
  /** Bytes held back during a stall, per direction. */
  toUpstream: Buffer[];
  toClient: Buffer[];
}

/** Options of {@link startTcpProxy}. */
export interface TcpProxyOptions {
  /** Sees every chunk a client sends, before it is forwarded (e.g. to count protocol messages). */
  tap?: (connection: Socket, chunk: Buffer) => void;
}

/** Starts a proxy to `host:port`. */
export async function startTcpProxy(
  target: { host: string; port: number },
  options: TcpProxyOptions = {},
): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  let mode: "open" | "stall" | "reset" = "open";

  const forward = (pair: Pair, chunk: Buffer, toUpstream: boolean) => {
    if (toUpstream) options.tap?.(pair.client, chunk);
    if (mode === "stall") {
      (toUpstream ? pair.toUpstream : pair.toClient).push(chunk);
      return;
    }
    const out = toUpstream ? pair.upstream : pair.client;
    if (out && !out.destroyed) out.write(chunk);
    else if (toUpstream) pair.toUpstream.push(chunk);
  };

  const connectUpstream = (pair: Pair) => {
    const upstream = createConnection(target);
    pair.upstream = upstream;
    upstream.on("connect", () => {
      for (const chunk of pair.toUpstream.splice(0)) upstream.write(chunk);
    });
    upstream.on("data", (chunk) => forward(pair, chunk, false));
    upstream.on("error", () => pair.client.destroy());
    upstream.on("close", () => {
      if (mode !== "stall") pair.client.destroy();
    });
  };

  const server: Server = createServer((client) => {
    if (mode === "reset") {
      client.resetAndDestroy();
      return;
    }
    const pair: Pair = { client, upstream: null, toUpstream: [], toClient: [] };
    pairs.add(pair);
    client.on("data", (chunk) => forward(pair, chunk, true));
    client.on("error", () => pair.upstream?.destroy());
    client.on("close", () => {
      pairs.delete(pair);
      pair.upstream?.destroy();
    });
    // A connection made during a stall reaches the store only when the stall ends.
    if (mode === "open") connectUpstream(pair);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;

  return {
    port,
    url(targetUrl) {
      const url = new URL(targetUrl);
      url.hostname = "127.0.0.1";
      url.port = String(port);
      return url.toString();
    },
    cut(how = "stall") {
      mode = how;
      if (how === "reset") {
        for (const pair of pairs) {
          pair.client.resetAndDestroy();
          pair.upstream?.destroy();
        }
        pairs.clear();
      }
    },
    restore() {
      mode = "open";
      for (const pair of pairs) {
        if (!pair.upstream) {
          connectUpstream(pair);
          continue;
        }
        for (const chunk of pair.toUpstream.splice(0)) pair.upstream.write(chunk);
        for (const chunk of pair.toClient.splice(0)) if (!pair.client.destroyed) pair.client.write(chunk);
      }
    },
    async close() {
      for (const pair of pairs) {
        pair.client.destroy();
        pair.upstream?.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
