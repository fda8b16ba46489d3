/**
 * Reads a dataset in LoCoMo's format (Maharana et al., 2024: long multi-session dialogues whose
 * questions name the turns that answer them) into what the retrieval benchmark stores and asks:
 * per conversation, its sessions of turns (speaker A is `user`, speaker B `assistant`, each stored as
 * `Name: text`, plus ` [shares a photo: caption]` when the turn has a caption) and its questions of
 * categories 1–4 with their evidence turn ids (`D<session>:<turn>`). Category 5 (adversarial: no
 * answer in the conversation) is left out.
 */

/** A turn as LoCoMo writes it. */
export interface LocomoTurn {
  speaker: string;
  dia_id: string;
  text: string;
  blip_caption?: string;
}

/** A stored turn: its LoCoMo id, role and the text threadkeep stores. */
export interface BenchTurn {
  /** LoCoMo's `dia_id`, e.g. `D1:3`. */
  id: string;
  role: "user" | "assistant";
  content: string;
}

/** One LoCoMo session: one threadkeep session of its conversation's user. */
export interface BenchSession {
  /** N of `session_N`. */
  number: number;
  /** `session_N_date_time`, as written. */
  dateTime?: string;
  turns: BenchTurn[];
}

/** A question and the stored turns that answer it. */
export interface BenchQuestion {
  text: string;
  category: number;
  /** Evidence ids that name a stored turn of the conversation, deduplicated. */
  evidence: string[];
}

/** One conversation: one user's sessions and the questions asked about them. */
export interface BenchConversation {
  id: string;
  sessions: BenchSession[];
  questions: BenchQuestion[];
}

/** A dataset read by {@link readLocomo}, with what could not be mapped. */
export interface BenchDataset {
  conversations: BenchConversation[];
  /** Questions of categories 1–4 none of whose evidence ids names a stored turn (not scored). */
  unscoredQuestions: number;
  /** Evidence ids (of categories 1–4) that name no stored turn, as `conversation/id`. */
  unmappedEvidence: string[];
}

/** The questions scored: LoCoMo's single-hop, multi-hop, temporal and open-domain categories. */
export const SCORED_CATEGORIES: ReadonlySet<number> = new Set([1, 2, 3, 4]);

/** The text a turn is stored as: `Name: text`, plus ` [shares a photo: caption]` when it has a caption. */
export function turnContent(turn: LocomoTurn): string {
  const photo = turn.blip_caption ? ` [shares a photo: ${turn.blip_caption}]` : "";
  return `${turn.speaker}: ${turn.text}${photo}`;
}

/**
 * The turn ids of an evidence list. A few entries of the published data hold two ids in one string
 * (`"D8:6; D9:17"`), so entries are split on `;`, `,` and spaces; each piece is kept as written and
 * maps to a turn only when it is exactly that turn's `dia_id`.
 */
export function evidenceIds(evidence: readonly unknown[]): string[] {
  return evidence.flatMap((entry) =>
    String(entry)
      .split(/[;,\s]+/)
      .filter(Boolean),
  );
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

function fail(message: string): never {
  throw new Error(`Not a LoCoMo dataset: ${message}`);
}

/** Reads a parsed LoCoMo JSON document (an array of samples). @throws on a shape it cannot read. */
export function readLocomo(json: unknown): BenchDataset {
  if (!Array.isArray(json)) fail("expected an array of samples");
  const dataset: BenchDataset = { conversations: [], unscoredQuestions: 0, unmappedEvidence: [] };
  json.forEach((sample, index) => {
    if (!isRecord(sample) || !isRecord(sample.conversation) || !Array.isArray(sample.qa))
      fail(`sample ${index} lacks conversation or qa`);
    const id = String(sample.sample_id ?? `sample-${index}`);
    const conversation = sample.conversation;
    const speakerA = conversation.speaker_a;
    if (typeof speakerA !== "string") fail(`${id} has no speaker_a`);
    const sessions: BenchSession[] = [];
    for (const [key, value] of Object.entries(conversation)) {
      const match = /^session_(\d+)$/.exec(key);
      if (!match) continue;
      if (!Array.isArray(value)) fail(`${id}.${key} is not a list of turns`);
      const number = Number(match[1]);
      const turns = value.map((turn: unknown): BenchTurn => {
        if (
          !isRecord(turn) ||
          typeof turn.speaker !== "string" ||
          typeof turn.dia_id !== "string" ||
          typeof turn.text !== "string"
        )
          fail(`${id}.${key} has a turn without speaker, dia_id or text`);
        const caption = typeof turn.blip_caption === "string" ? turn.blip_caption : undefined;
        return {
          id: turn.dia_id,
          role: turn.speaker === speakerA ? "user" : "assistant",
          content: turnContent({ speaker: turn.speaker, dia_id: turn.dia_id, text: turn.text, blip_caption: caption }),
        };
      });
      const dateTime = conversation[`session_${number}_date_time`];
      if (turns.length > 0)
        sessions.push({ number, dateTime: typeof dateTime === "string" ? dateTime : undefined, turns });
    }
    sessions.sort((a, b) => a.number - b.number);
    const stored = new Set(sessions.flatMap((s) => s.turns.map((t) => t.id)));
    const questions: BenchQuestion[] = [];
    for (const qa of sample.qa as unknown[]) {
      if (!isRecord(qa) || typeof qa.question !== "string" || !SCORED_CATEGORIES.has(Number(qa.category))) continue;
      const ids = evidenceIds(Array.isArray(qa.evidence) ? qa.evidence : []);
      for (const missing of ids.filter((e) => !stored.has(e))) dataset.unmappedEvidence.push(`${id}/${missing}`);
      const evidence = [...new Set(ids.filter((e) => stored.has(e)))];
      if (evidence.length === 0) dataset.unscoredQuestions++;
      else questions.push({ text: qa.question, category: Number(qa.category), evidence });
    }
    dataset.conversations.push({ id, sessions, questions });
  });
  return dataset;
}
