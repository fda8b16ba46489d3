/**
 * The phrase lists of one language. Matching ignores case, accents and punctuation, so list
 * phrases plainly ("dont", "oke" and "don't", "oké" are the same).
 */
export interface PhraseSet {
  /** Whole replies that confirm a pending action; combinations ("yes, do it") match too. */
  confirm: string[];
  /** Whole replies that cancel it. */
  cancel: string[];
  /** Words that may pad a reply without changing it ("please", "graag"). */
  filler: string[];
  /** Phrases anywhere in a message that point at the latest entity ("it", "the one I mentioned"). */
  reference: string[];
  /** Patterns with `{type}` that point at the latest entity of a type ("that {type}"). */
  typedReference: string[];
  /** Words for entity types: `{ task: ["taak"] }`. The type name itself always counts. */
  nouns: Record<string, string[]>;
}

/** English. */
// Phrase lists read better packed than one per line.
export const ENGLISH_PHRASES: PhraseSet = {
  confirm: [
    "yes", "y", "yeah", "yep", "yup", "sure", "ok", "okay", "k", "confirm", "confirmed", "i confirm", "do it",
    "go ahead", "go for it", "please do", "proceed", "correct", "sounds good", "absolutely", "of course",
    "definitely", "affirmative", "thats right", "that is right", "right", "alright", "all right", "fine", "perfect",
    "yes do it", "lets do it", "make it so",
  ],
  cancel: [
    "no", "n", "nope", "nah", "cancel", "cancel it", "cancel that", "stop", "dont", "do not", "dont do it",
    "do not do it", "never mind", "nevermind", "abort", "forget it", "forget about it", "not now", "negative",
    "leave it", "keep it", "no way", "wait", "hold on",
  ],
  filler: ["please", "thanks", "thank you", "now", "just", "then", "well", "oh"],
  reference: [
    "it", "that", "this", "that one", "this one", "the one i mentioned", "the one you mentioned", "the same one",
    "the last one", "the previous one", "the latter",
  ],
  typedReference: [
    "that {type}", "this {type}", "the {type}", "the same {type}", "the last {type}", "the previous {type}",
    "my {type}",
  ],
  nouns: { task: ["todo", "to do", "to-do"], event: ["meeting"], note: [], reminder: [], order: [], item: [] },
};

/** Dutch. */
// Phrase lists read better packed than one per line.
export const DUTCH_PHRASES: PhraseSet = {
  confirm: [
    "ja", "jazeker", "jawel", "ja hoor", "ja graag", "ok", "oke", "okay", "prima", "goed", "is goed", "akkoord",
    "bevestig", "bevestigd", "ik bevestig", "doe maar", "doe het", "ga je gang", "ga door", "ga verder", "zeker",
    "natuurlijk", "klopt", "in orde", "top", "helemaal goed", "prima zo", "uitvoeren", "voer uit",
  ],
  cancel: [
    "nee", "neen", "nee hoor", "annuleer", "annuleren", "annuleer maar", "stop", "stoppen", "niet doen",
    "doe maar niet", "laat maar", "laat maar zitten", "toch niet", "liever niet", "vergeet het", "afbreken",
    "nooit", "wacht", "wacht even",
  ],
  filler: ["graag", "alsjeblieft", "alstublieft", "aub", "maar", "dan", "nu", "hoor", "bedankt", "dank je", "dankjewel", "dank u"],
  reference: [
    "het", "dat", "die", "deze", "dit", "hem", "diezelfde", "dezelfde", "die ene", "degene die ik noemde",
    "de laatste", "die van net",
  ],
  typedReference: [
    "die {type}", "deze {type}", "dat {type}", "dit {type}", "de {type}", "het {type}", "dezelfde {type}",
    "diezelfde {type}", "de laatste {type}", "mijn {type}",
  ],
  nouns: {
    task: ["taak", "todo"],
    note: ["notitie"],
    reminder: ["herinnering"],
    event: ["afspraak", "evenement"],
    order: ["bestelling"],
    product: ["product"],
    file: ["bestand"],
    message: ["bericht"],
    invoice: ["factuur"],
    list: ["lijst"],
    item: ["item"],
  },
};
