/**
 * Where a long text may be cut before it is tokenised. gpt-tokenizer's byte-pair merge is quadratic
 * in the length of one pre-tokenised piece (100 KB without a space took seconds; 300 KB of emoji
 * overflowed the stack), so texts reach it in chunks of at most {@link CHUNK_CHARS} characters.
 */

/** Most characters handed to the tokenizer at once. @default 256 */
export const CHUNK_CHARS = 256;
/** A cut is looked for in the last three quarters of a chunk before cutting hard. */
const SEARCH_FROM = CHUNK_CHARS / 4;

/** The characters the tokenizers' pre-splitting patterns treat as whitespace (`\s`). */
function isSpace(code: number): boolean {
  if (code <= 32) return code === 32 || (code >= 9 && code <= 13);
  if (code < 0x85) return false;
  return (
    code === 0x85 ||
    code === 0xa0 ||
    code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000 ||
    code === 0xfeff
  );
}

/**
 * True when cutting before `i` cannot change how the text is tokenised: the o200k and cl100k
 * pre-splitting patterns never put a space after a non-space in one piece, and never match across
 * a newline that is followed by a non-space, so a piece boundary lies exactly there.
 */
function isExactCut(text: string, i: number): boolean {
  const here = text.charCodeAt(i);
  const before = text.charCodeAt(i - 1);
  if (here === 32) return !isSpace(before) && i + 1 < text.length && !isSpace(text.charCodeAt(i + 1));
  return before === 10 && !isSpace(here);
}

/** A piece of a text: `[start, end)`, and whether the cut at `end` keeps the count exact. */
export interface TextChunk {
  start: number;
  end: number;
  exact: boolean;
}

/**
 * The end of the chunk starting at `start`: the text's end when it is near, else the last exact cut
 * in the chunk's window, else a hard cut (never inside a surrogate pair). A hard cut splits a run
 * without whitespace, which may change the count there by a token or so.
 */
export function nextChunk(text: string, start: number): TextChunk {
  const limit = start + CHUNK_CHARS;
  if (limit >= text.length) return { start, end: text.length, exact: true };
  for (let i = limit; i > start + SEARCH_FROM; i--) if (isExactCut(text, i)) return { start, end: i, exact: true };
  const code = text.charCodeAt(limit - 1);
  const end = code >= 0xd800 && code <= 0xdbff ? limit - 1 : limit;
  return { start, end, exact: false };
}
