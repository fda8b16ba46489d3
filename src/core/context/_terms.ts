/**
 * The words a lexical recall weighs: lowercase letters and digits, stopwords dropped, a plural `s`
 * folded, so a recalled message can be scored by how much of the query it holds (search hits carry no
 * score a threshold could use).
 */

/** Words too common to say what a message is about (a short English list). */
const STOPWORDS = new Set(
  (
    "a about above after again all also am an and any are as at be been before being below between both but by can " +
    "could did do does doing done down during each else ever few for from further get got had has have having he her " +
    "here hers him his how i if in into is it its just like me more most my no nor not now of off on once only or other " +
    "our ours out over own same say said she should so some such tell than that the their them then there these they " +
    "this those through to too under until up very was we were what when where which while who whom why will with " +
    "would you your yours"
  ).split(" "),
);

/** Longer "words" (a hash, a base64 blob, text without spaces) say nothing a query would repeat. */
const MAX_WORD = 40;
/** Characters of a message read to score it: a huge message must not hold the event loop. */
const MAX_SCORED_CHARS = 20_000;

/** The distinct content words of a text (of its first {@link MAX_SCORED_CHARS} characters). */
export function terms(text: string): Set<string> {
  const out = new Set<string>();
  for (const word of text
    .slice(0, MAX_SCORED_CHARS)
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)) {
    if (word.length < 2 || word.length > MAX_WORD || STOPWORDS.has(word)) continue;
    out.add(word.length > 3 && word.endsWith("s") && !word.endsWith("ss") ? word.slice(0, -1) : word);
  }
  return out;
}

/**
 * The share (0..1) of the query's content words that `text` holds; 0 when it holds fewer than two of
 * them (one shared word — "message 5" and "message 2" — is no sign of relatedness), so a query of one
 * content word recalls nothing by words.
 */
export function termShare(query: ReadonlySet<string>, text: string): number {
  if (query.size === 0) return 0;
  const held = terms(text);
  let n = 0;
  for (const t of query) if (held.has(t)) n++;
  return n < 2 ? 0 : n / query.size;
}
