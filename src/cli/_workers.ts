/**
 * `threadkeep serve --workers N`: N server processes on one port (node:cluster). The primary only
 * forks, restarts a worker that dies, and stops them on SIGINT/SIGTERM; every worker is a whole
 * `threadkeep serve`. Turn order across workers is the store's turn lease, so only stores whose
 * lease spans processes can be shared: SQLite (with the lease in the file), PostgreSQL and Redis.
 */
import cluster from "node:cluster";
import { ThreadkeepError } from "../core/errors.js";

/** A worker that dies this soon after starting is not restarted (it would only die again). */
const MIN_UPTIME_MS = 2_000;

/**
 * The store URL the workers share. SQLite gets its turn lease in the file (`?lease=shared`).
 * @throws ThreadkeepError `invalid_request` for `memory:` and `file:`, which live in one process.
 */
export function sharedStoreUrl(url: string): string {
  const trimmed = url.trim();
  if (trimmed.startsWith("memory:") || trimmed.startsWith("file:")) {
    throw new ThreadkeepError(
      "invalid_request",
      `--workers needs a store that several processes can share (sqlite:, postgres://, redis://); ${trimmed.split(":")[0]}: lives in one process`,
    );
  }
  if (trimmed.startsWith("sqlite:") && !trimmed.endsWith("?lease=shared")) return `${trimmed}?lease=shared`;
  return trimmed;
}

/** What a worker tells the primary once it listens. */
interface ListeningMessage {
  threadkeep: "listening";
  line: string;
}

const isListening = (message: unknown): message is ListeningMessage =>
  typeof message === "object" && message !== null && (message as ListeningMessage).threadkeep === "listening";

/** In a worker: tells the primary the line to print (once, for all workers). */
export function reportListening(line: string): void {
  process.send?.({ threadkeep: "listening", line } satisfies ListeningMessage);
}

/** True in a process forked by {@link runPrimary}. */
export const isWorker = (): boolean => cluster.isWorker;

/**
 * The primary: forks `count` workers (each re-runs this command line), prints the listening line
 * with the worker count once all of them listen, restarts workers that die, and stops them all on a signal.
 * Resolves when every worker has exited after a stop.
 */
export function runPrimary(count: number, print: (line: string) => void): Promise<number> {
  let stopping = false;
  let listening = 0;
  const started = new Map<number, number>();
  const fork = () => {
    const worker = cluster.fork();
    started.set(worker.id, Date.now());
    worker.on("message", (message: unknown) => {
      // Printed once every worker listens, so the first requests already spread over all of them.
      if (isListening(message) && ++listening === count) print(`${message.line}  workers: ${count}`);
    });
  };
  return new Promise((resolve) => {
    let exitCode = 0;
    cluster.on("exit", (worker, code, signal) => {
      const uptime = Date.now() - (started.get(worker.id) ?? 0);
      started.delete(worker.id);
      if (!stopping) {
        if (uptime < MIN_UPTIME_MS) {
          process.stderr.write(`threadkeep: a worker exited at start (${signal ?? `code ${code}`}); stopping\n`);
          exitCode = code || 1;
          stop("worker failure");
        } else {
          process.stderr.write(
            `threadkeep: worker ${worker.process.pid} died (${signal ?? `code ${code}`}); starting another\n`,
          );
          fork();
        }
      }
      if (stopping && started.size === 0) resolve(exitCode);
    });
    const stop = (why: string) => {
      if (stopping) return;
      stopping = true;
      if (why !== "worker failure") process.stdout.write(`threadkeep: ${why}, stopping ${count} workers\n`);
      for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill("SIGTERM");
      if (started.size === 0) resolve(exitCode);
    };
    process.once("SIGINT", () => stop("SIGINT"));
    process.once("SIGTERM", () => stop("SIGTERM"));
    for (let i = 0; i < count; i++) fork();
  });
}
