/**
 * Finds the real PostgreSQL and Redis servers the tests talk to. Outside CI a missing service skips
 * its suite with a printed reason; under CI=true it fails the run, as the project's rules require.
 */
import { createConnection } from "node:net";

/** PostgreSQL URL used by tests. */
export const TEST_POSTGRES_URL = process.env.THREADKEEP_TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test";
/** Redis URL used by tests. */
export const TEST_REDIS_URL = process.env.THREADKEEP_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

function portOpen(url: string, defaultPort: number): Promise<boolean> {
  const parsed = new URL(url);
  return new Promise((resolve) => {
    const socket = createConnection({ host: parsed.hostname || "127.0.0.1", port: Number(parsed.port || defaultPort) });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

/**
 * `true` when the service answers; otherwise the reason to skip. Under CI=true an absent service
 * throws, so the suite fails instead of skipping.
 */
export async function serviceAvailable(kind: "postgres" | "redis"): Promise<true | string> {
  const url = kind === "postgres" ? TEST_POSTGRES_URL : TEST_REDIS_URL;
  const ok = await portOpen(url, kind === "postgres" ? 5432 : 6379);
  if (ok) return true;
  const reason = `${kind} is not reachable at ${url} (set THREADKEEP_TEST_${kind.toUpperCase()}_URL or start it)`;
  if (process.env.CI === "true") throw new Error(`CI=true and ${reason}`);
  return reason;
}
