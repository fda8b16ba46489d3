/**
 * Deterministic chat data for the store benchmarks: the same session ids and messages on every run
 * and for every backend.
 */
import type { MessageInput } from "../src/core/types.js";

const WORDS = (
  "please add a task to buy groceries tomorrow morning and remind me about the meeting with " +
  "the team on friday which products do you need for that recipe milk eggs flour sugar butter " +
  "sure I added it to your list anything else delete that task yes do it thanks"
).split(" ");

/** The id of the `s`-th benchmark session (a valid UUID). */
export function sessionIdOf(s: number): string {
  return `00000000-0000-4000-8000-${s.toString(16).padStart(12, "0")}`;
}

/** The `m`-th message of session `s`: users ask, assistants answer at more length (about 40–400 characters). */
export function messageOf(s: number, m: number): MessageInput {
  const user = m % 2 === 0;
  const words = (user ? 8 : 20) + ((s * 7 + m * 13) % (user ? 20 : 50));
  const text: string[] = [];
  for (let w = 0; w < words; w++) text.push(WORDS[(s + m * 3 + w * 5) % WORDS.length]);
  return user ? { role: "user", content: text.join(" ") } : { role: "assistant", content: text.join(" ") };
}
