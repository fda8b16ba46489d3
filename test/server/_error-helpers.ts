/** Helpers shared by the server error tests (chat-errors, store-trouble). */
import type { Stack } from "./_stack.js";

/** A one-message chat completion body. */
export const chat = (content = "hi") => ({ model: "m", messages: [{ role: "user" as const, content }] });

/** The `error` object of an OpenAI-style error body. */
export async function errorOf(res: Response) {
  return ((await res.json()) as { error: Record<string, unknown> }).error;
}

/** The value of one series on the server's /metrics (0 when absent). */
export async function metricValue(stack: Stack, series: string): Promise<number> {
  const text = await (await stack.request("GET", "/metrics")).text();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line ? Number(line.split(" ").at(-1)) : 0;
}
