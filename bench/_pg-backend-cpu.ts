/** CPU time of PostgreSQL backends on this machine, for the profiling helpers (bench/_pg-*-probe.ts). */
import { readFileSync } from "node:fs";

/** On-CPU time of these backend processes so far, in ns (`/proc/<pid>/schedstat`); an ended one counts 0. */
export function serverCpuNs(pids: number[]): number {
  let t = 0;
  for (const p of pids) {
    try {
      t += Number(readFileSync(`/proc/${p}/schedstat`, "utf8").split(" ")[0]);
    } catch {
      // The backend ended.
    }
  }
  return t;
}
