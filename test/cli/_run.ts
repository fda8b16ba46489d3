/** Runs the `threadkeep` program in this process with standard output and error captured. */
import { vi } from "vitest";
import { main } from "../../src/cli/index.js";

/** What one run printed, and its exit code. */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

function capture(stream: NodeJS.WriteStream, into: string[]) {
  return vi.spyOn(stream, "write").mockImplementation(((chunk: unknown, ...rest: unknown[]) => {
    into.push(typeof chunk === "string" ? chunk : Buffer.from(chunk as Uint8Array).toString());
    const callback = rest.find((r) => typeof r === "function") as (() => void) | undefined;
    callback?.();
    return true;
  }) as typeof stream.write);
}

/** `threadkeep …args`, in-process. */
export async function runCli(...args: string[]): Promise<CliRun> {
  const out: string[] = [];
  const err: string[] = [];
  const spies = [capture(process.stdout, out), capture(process.stderr, err)];
  process.exitCode = undefined;
  try {
    const code = await main(["node", "threadkeep", ...args]);
    return { code, stdout: out.join(""), stderr: err.join("") };
  } finally {
    for (const spy of spies) spy.mockRestore();
    process.exitCode = undefined;
  }
}
