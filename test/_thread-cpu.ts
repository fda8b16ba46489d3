/**
 * CPU time of threads, for tests that bound work: CPU time, not wall time, because CI machines are
 * shared; a thread's own, not the process's, because the process's also counts other threads (V8's
 * helpers, and with `isolate: false` a worker thread an earlier file of the same vitest worker left
 * running, such as a store's index builder or checkpointer). Linux says; elsewhere, see each function.
 */
import { readdirSync, readFileSync } from "node:fs";

/** CPU ms this thread has used so far (Linux: `/proc/thread-self/schedstat`), else the process's. */
export function threadCpuMs(): number {
  try {
    return Number(readFileSync("/proc/thread-self/schedstat", "utf8").split(" ")[0]) / 1e6;
  } catch {
    const used = process.cpuUsage();
    return (used.user + used.system) / 1000;
  }
}

/** Each thread of this process: milliseconds on a core and waiting for one so far (empty where Linux does not say). */
export function threadTimes(): Map<string, [cpu: number, wait: number]> {
  const times = new Map<string, [number, number]>();
  try {
    for (const tid of readdirSync("/proc/self/task")) {
      try {
        const [cpu, wait] = readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8").split(" ");
        times.set(tid, [Number(cpu) / 1e6, Number(wait) / 1e6]);
      } catch {
        // A thread that ended meanwhile.
      }
    }
  } catch {
    // Not Linux.
  }
  return times;
}
