import { type ConversationState, type EntityRef, isExpired, type PendingConfirmation } from "./conversation.js";
import { DUTCH_PHRASES, ENGLISH_PHRASES, type PhraseSet } from "./phrases.js";

export { DUTCH_PHRASES, ENGLISH_PHRASES, type PhraseSet } from "./phrases.js";

/** The phrase lists threadkeep ships, by language code. */
export const BUILTIN_PHRASES: Readonly<Record<string, PhraseSet>> = {
  en: ENGLISH_PHRASES,
  nl: DUTCH_PHRASES,
};

/** Options of {@link createResolver}. */
export interface ResolverOptions {
  /**
   * Phrase lists by language code. A built-in language given here has the lists you give replaced
   * (the others kept); a new code adds a language.
   */
  phrases?: Record<string, Partial<PhraseSet>>;
  /** The languages to match (a user may mix them). @default every language known */
  languages?: string[];
}

/** What a user message means for the conversational state, decided without a model call. */
export type Resolution =
  | { kind: "confirm"; pending: PendingConfirmation; phrase: string; language: string }
  | { kind: "cancel"; pending: PendingConfirmation; phrase: string; language: string }
  /** A yes or no to a confirmation that has expired: it must not be executed. */
  | { kind: "expired"; pending: PendingConfirmation; phrase: string; language: string }
  | { kind: "reference"; entity: EntityRef; phrase: string; language: string }
  | { kind: "none" };

/** Maps user messages to confirmations, cancellations and references. */
export interface Resolver {
  resolve(text: string, state: ConversationState, now?: number): Resolution;
}

/** Lowercase words without accents or punctuation: "Oké, doe   maar!" → "oke doe maar". */
export function normalizePhrase(text: string): string {
  return text
    .normalize("NFKD")
    .replace(/\p{M}/gu, "")
    .toLowerCase()
    .replace(/['’`]/g, "")
    .replace(/[^\p{L}\p{N}]+/gu, " ")
    .trim();
}

/** Replies longer than this are not read as a bare yes or no. */
const MAX_REPLY_WORDS = 12;

type Tagged = Map<string, string>;

function tag(target: Tagged, phrases: readonly string[], language: string): void {
  for (const phrase of phrases) {
    const normal = normalizePhrase(phrase);
    if (normal && !target.has(normal)) target.set(normal, language);
  }
}

/**
 * The first phrase of `phrases` found when `words` are made only of those phrases and filler words
 * ("yes, do it please" = "yes" + "do it" + "please"), else null.
 */
function segment(words: string[], phrases: Tagged, filler: Set<string>): string | null {
  // reachable[i]: the first real phrase used to cover words[0..i), "" when only filler so far.
  const reachable: (string | null)[] = new Array(words.length + 1).fill(null);
  reachable[0] = "";
  for (let i = 0; i < words.length; i++) {
    if (reachable[i] === null) continue;
    for (let j = i + 1; j <= Math.min(words.length, i + 6); j++) {
      const candidate = words.slice(i, j).join(" ");
      if (phrases.has(candidate)) reachable[j] ??= reachable[i] || candidate;
      else if (filler.has(candidate)) reachable[j] ??= reachable[i];
    }
  }
  return reachable[words.length] || null;
}

/**
 * Creates a resolver; English (`en`) and Dutch (`nl`) are built in.
 * @example
 * ```ts
 * import { createResolver } from "threadkeep";
 *
 * const resolver = createResolver({ languages: ["en"], phrases: { en: { confirm: ["ship it"] } } });
 * const meaning = resolver.resolve("ship it", state); // { kind: "confirm", … } while a confirmation is pending
 * ```
 */
export function createResolver(options: ResolverOptions = {}): Resolver {
  const sets: Record<string, PhraseSet> = { ...BUILTIN_PHRASES };
  for (const [language, given] of Object.entries(options.phrases ?? {})) {
    const base = sets[language] ?? {
      confirm: [],
      cancel: [],
      filler: [],
      reference: [],
      typedReference: [],
      nouns: {},
    };
    sets[language] = { ...base, ...given };
  }
  const languages = options.languages ?? Object.keys(sets);
  const confirm: Tagged = new Map();
  const cancel: Tagged = new Map();
  const generic: Tagged = new Map();
  const filler = new Set<string>();
  for (const language of languages) {
    const set = sets[language];
    if (!set) throw new Error(`No phrase lists for language ${JSON.stringify(language)}`);
    tag(confirm, set.confirm, language);
    tag(cancel, set.cancel, language);
    tag(generic, set.reference, language);
    for (const word of set.filler) filler.add(normalizePhrase(word));
  }
  // Longest first, so "the one i mentioned" wins over "it" when both occur.
  const genericByLength = [...generic.entries()].sort((a, b) => b[0].length - a[0].length);
  const typedCache = new Map<string, Tagged>();

  /** The phrases that point at an entity of `type` in every language ("die taak", "that task"). */
  const typedPhrases = (type: string): Tagged => {
    let phrases = typedCache.get(type);
    if (phrases) return phrases;
    phrases = new Map();
    for (const language of languages) {
      const set = sets[language];
      const nouns = [type, ...(set.nouns[type] ?? [])];
      for (const pattern of set.typedReference)
        tag(
          phrases,
          nouns.map((noun) => pattern.replaceAll("{type}", noun)),
          language,
        );
    }
    typedCache.set(type, phrases);
    return phrases;
  };
  const knownTypes = new Set(languages.flatMap((language) => Object.keys(sets[language].nouns)));

  const findIn = (padded: string, phrases: Iterable<[string, string]>): [string, string] | undefined => {
    for (const entry of phrases) if (padded.includes(` ${entry[0]} `)) return entry;
    return undefined;
  };

  return {
    resolve(text, state, now = Date.now()) {
      const normal = normalizePhrase(text);
      if (!normal) return { kind: "none" };
      const pending = state.pending;
      const words = normal.split(" ");
      if (pending && words.length <= MAX_REPLY_WORDS) {
        for (const [kind, phrases] of [
          ["confirm", confirm],
          ["cancel", cancel],
        ] as const) {
          const phrase = segment(words, phrases, filler);
          if (!phrase) continue;
          const language = phrases.get(phrase)!;
          return { kind: isExpired(pending, now) ? "expired" : kind, pending, phrase, language };
        }
      }
      const refs = state.references;
      if (refs.length === 0) return { kind: "none" };
      let padded = ` ${normal} `;
      const types = new Set([...refs.map((r) => r.type), ...knownTypes]);
      for (const type of types) {
        const hit = findIn(padded, typedPhrases(type));
        if (!hit) continue;
        const entity = refs.find((r) => r.type === type);
        if (entity) return { kind: "reference", entity, phrase: hit[0], language: hit[1] };
        // "That note" with no note referenced points at nothing, so its "that" must not pick the latest task.
        padded = padded.replace(` ${hit[0]} `, " ");
      }
      const hit = findIn(padded, genericByLength);
      return hit ? { kind: "reference", entity: refs[0], phrase: hit[0], language: hit[1] } : { kind: "none" };
    },
  };
}

let defaultResolver: Resolver | undefined;

/** Resolves with the built-in phrase lists (English and Dutch). */
export function resolveMessage(text: string, state: ConversationState, now = Date.now()): Resolution {
  defaultResolver ??= createResolver();
  return defaultResolver.resolve(text, state, now);
}
