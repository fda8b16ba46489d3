/**
 * Embeddings for the stores without a query language (file, Redis): vectors kept beside each session
 * by a small backend-specific {@link VectorSidecar}, searched by an exact scan of the owner's own
 * sessions (the owner's session listing is the query; another owner's session is never read).
 * A vector is matched to its message by seq and createdAt, so one left behind by a deleted,
 * truncated or re-created message is never returned.
 */
import { SessionNotFoundError } from "../core/errors.js";
import type { EmbeddingInput, Session, SessionStore, VectorHit, VectorQuery, VectorStore } from "../core/types.js";
import { checkDimensions, missingSeqs, normalize, scanSession, type StoredVector, TopK } from "./_vectors.js";
import { inactiveSince } from "./_util.js";

/** Where a store keeps its vectors. */
export interface VectorSidecar {
  /** The session's vectors (a later one for the same seq replaces an earlier). */
  read(sessionId: string): Promise<StoredVector[]>;
  write(sessionId: string, vectors: StoredVector[]): Promise<void>;
  /** Dimensions recorded for a model. */
  dims(model: string): Promise<number | undefined>;
  /** Records a model's dimensions if none are recorded yet; @returns the recorded ones. */
  claimDims(model: string, dims: number): Promise<number>;
}

/** The {@link VectorStore} methods over a store's public API and a sidecar. */
export function sidecarVectors(
  store: () => SessionStore,
  sidecar: VectorSidecar,
): Pick<VectorStore, "putEmbeddings" | "missingEmbeddings" | "searchVectors"> {
  const sessionsOf = async (query: VectorQuery): Promise<Session[]> => {
    if (query.sessionId) {
      const session = await store().getSession(query.sessionId);
      return session && session.userId === query.userId && !inactiveSince(session, query.activeSince) ? [session] : [];
    }
    const all: Session[] = [];
    let cursor: string | null = null;
    do {
      const page = await store().listSessions(query.userId, { limit: 500, cursor });
      all.push(...page.sessions.filter((session) => !inactiveSince(session, query.activeSince)));
      cursor = page.nextCursor;
    } while (cursor);
    return all;
  };

  return {
    async putEmbeddings(sessionId: string, model: string, items: EmbeddingInput[]) {
      if (!(await store().getSession(sessionId))) throw new SessionNotFoundError(sessionId);
      if (items.length === 0) return;
      for (const item of items) checkDimensions(model, await sidecar.dims(model), item.vector.length);
      const dims = await sidecar.claimDims(model, items[0].vector.length);
      for (const item of items) checkDimensions(model, dims, item.vector.length);
      await sidecar.write(
        sessionId,
        items.map((item) => ({ seq: item.seq, createdAt: item.createdAt, model, vector: normalize(item.vector) })),
      );
    },

    async missingEmbeddings(sessionId: string, model: string, limit = 1000) {
      const messages = await store().getMessages(sessionId);
      return missingSeqs(messages, await sidecar.read(sessionId), model, limit);
    },

    async searchVectors(query: VectorQuery): Promise<VectorHit[]> {
      const normalized = normalize(query.vector);
      checkDimensions(query.model, await sidecar.dims(query.model), normalized.length);
      const top = new TopK(query.limit);
      for (const session of await sessionsOf(query)) {
        const vectors = await sidecar.read(session.id);
        if (!vectors.some((v) => v.model === query.model)) continue;
        const messages = await store().getMessages(session.id, {
          fromSeq: query.afterSeq === undefined ? undefined : query.afterSeq + 1,
          toSeq: query.beforeSeq === undefined ? undefined : query.beforeSeq - 1,
        });
        scanSession(session.id, messages, vectors, query, normalized, top);
      }
      return top.hits;
    },
  };
}

/** Serialises a stored vector as one JSON line: `{ seq, c, m, v }` with `v` packed float32 in base64. */
export function encodeStoredVector(v: StoredVector): string {
  return JSON.stringify({
    seq: v.seq,
    c: v.createdAt,
    m: v.model,
    v: Buffer.from(v.vector.buffer, v.vector.byteOffset, v.vector.byteLength).toString("base64"),
  });
}

/** Reads a line written by {@link encodeStoredVector}; null when it is not one. */
export function decodeStoredVector(line: string): StoredVector | null {
  try {
    const o = JSON.parse(line) as { seq: number; c: number; m: string; v: string };
    const bytes = Buffer.from(o.v, "base64");
    const vector = new Float32Array(bytes.byteLength >> 2);
    for (let i = 0; i < vector.length; i++) vector[i] = bytes.readFloatLE(i * 4);
    return typeof o.seq === "number" && typeof o.m === "string"
      ? { seq: o.seq, createdAt: o.c, model: o.m, vector }
      : null;
  } catch {
    return null;
  }
}
