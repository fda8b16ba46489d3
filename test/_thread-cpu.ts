/**
 * CPU time of the calling thread, for tests that bound the work of a call: CPU time, not wall time,
 * because CI machines are shared; this thread's own, not the process's, because the process's also
 * counts other threads (V8's helpers, and with `isolate: false` a worker thread an earlier file of the
 * same vitest worker left running, such as a store's index builder or checkpointer).
 */
import { readFileSync } from "node:fs";

/** CPU ms this thread has used so far (Linux: `/proc/thread-self/schedstat`), else the process's. */
export function threadCpuMs(): number {
  try {
    return Number(readFileSync("/proc/thread-self/schedstat", "utf8").split(" ")[0]) / 1e6;
  } catch {
    const used = process.cpuUsage();
    return (used.user + used.system) / 1000;
  }
}
