/**
 * A third-party store, written as a user of `threadkeep` would write one: it uses only the package's
 * public entries (`threadkeep` and the store-author tools of `threadkeep/kit`), keeps one JSON
 * document per session in a key-value database, and proves itself with `threadkeep/testing`. docs/custom-store.md shows this file as the complete example.
 * The "database" here is a Map; a real one (DynamoDB, MongoDB, Cloudflare KV, …) replaces `KeyValue`.
 */
import {
  contentText,
  SessionNotFoundError,
  StateConflictError,
  ThreadkeepError,
  validateMessages,
  type Branch,
  type Lease,
  type Message,
  type MessageInput,
  type MessageQuery,
  type ReplaceOptions,
  type SearchHit,
  type Session,
  type SessionState,
  type FullStore,
  type MemoryOwnersStore,
  type UserMemoryStore,
  type Summary,
} from "../../src/index.js";
import {
  applyBranchSwitch,
  applyHistoryWrite,
  branchFromRecord,
  checkHistoryOptions,
  checkSearchQuery,
  type OperationRecord,
  planBranchSwitch,
  planHistoryWrite,
  rankByRelevanceInSlices,
  withinSeqBounds,
} from "../../src/stores/kit.js";

/** The few operations the store needs from its database. Values are JSON text. */
export interface KeyValue {
  get(key: string): Promise<string | undefined>;
  set(key: string, value: string): Promise<void>;
  delete(key: string): Promise<void>;
  keys(prefix: string): Promise<string[]>;
}

/** A `KeyValue` over a Map: the database of the tests, shared by every store opened on it. */
export function mapKeyValue(map = new Map<string, string>()): KeyValue {
  return {
    get: async (key) => map.get(key),
    set: async (key, value) => void map.set(key, value),
    delete: async (key) => void map.delete(key),
    keys: async (prefix) => [...map.keys()].filter((key) => key.startsWith(prefix)),
  };
}

/** Everything of one session, stored as one document. */
interface Doc {
  session: Session;
  messages: Message[];
  summaries: Summary[];
  state: SessionState;
  branches: Branch[];
  operations: OperationRecord[];
}

/** The turn lease of one session, kept in the database so every store on it sees the same line. */
interface LeaseDoc {
  fence: number;
  holder: { fence: number; expiresAt: number } | null;
  line: number[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A {@link FullStore} over any key-value database, memories about users aside (completeStore refuses them). */
export function createKeyValueStore(db: KeyValue): Omit<FullStore, keyof UserMemoryStore | keyof MemoryOwnersStore> {
  // Read-modify-write of a document must not interleave; a real database does this with a
  // transaction or a conditional write on a version field.
  let tail: Promise<unknown> = Promise.resolve();
  const exclusive = <T>(work: () => Promise<T>): Promise<T> => {
    const run = tail.then(work, work);
    tail = run.catch(() => undefined);
    return run;
  };
  const read = async (id: string): Promise<Doc | undefined> => {
    const text = await db.get(`session:${id}`);
    return text === undefined ? undefined : (JSON.parse(text) as Doc);
  };
  const need = async (id: string): Promise<Doc> => {
    const doc = await read(id);
    if (!doc) throw new SessionNotFoundError(id);
    return doc;
  };
  const checkFence = async (id: string, fence?: number) => {
    if (fence !== undefined && (await leaseOf(id)).fence > fence) {
      throw new ThreadkeepError("lease_expired", `The turn lease of ${id} was taken over`);
    }
  };
  // Appends and tail replacements (with branches and operation ids) are planned and applied by
  // threadkeep's helpers for stores that hold a session's history as one document.
  const writeHistory = (id: string, seq: number | undefined, inputs: MessageInput[], options: ReplaceOptions) =>
    exclusive(async () => {
      const valid = validateMessages(inputs);
      checkHistoryOptions(options, seq);
      const doc = await need(id);
      const now = Date.now();
      const plan = planHistoryWrite(doc, seq, valid, options, now);
      // A replay changes nothing, so it is answered whatever the fence.
      if (plan.replayed) return plan.replayed;
      await checkFence(id, options.fence);
      applyHistoryWrite(doc, plan);
      doc.session.lastActivityAt = now;
      await write(doc);
      return plan.added;
    });
  const write = (doc: Doc) => db.set(`session:${doc.session.id}`, JSON.stringify(doc));
  const allDocs = async () => Promise.all((await db.keys("session:")).map(async (k) => (await read(k.slice(8)))!));
  const leaseOf = async (id: string): Promise<LeaseDoc> =>
    JSON.parse((await db.get(`lease:${id}`)) ?? '{"fence":0,"holder":null,"line":[]}');
  const nextFence = async () => {
    const fence = Number((await db.get("fences")) ?? 0) + 1;
    await db.set("fences", String(fence));
    return fence;
  };

  return {
    name: "key-value",
    capabilities: {
      persistent: true,
      fullTextSearch: false,
      crossProcessLease: true,
      nativeExpiry: false,
      idempotentWrites: true,
    },

    createSession: (input) =>
      exclusive(async () => {
        if (await read(input.id)) throw new ThreadkeepError("session_exists", `Session ${input.id} exists`);
        const createdAt = input.createdAt ?? Date.now();
        const session = {
          id: input.id,
          userId: input.userId,
          createdAt,
          lastActivityAt: input.lastActivityAt ?? createdAt,
          metadata: input.metadata ?? {},
        };
        await write({
          session,
          messages: [],
          summaries: [],
          state: { version: 0, data: {} },
          branches: [],
          operations: [],
        });
        return structuredClone(session);
      }),
    getSession: async (id) => (await read(id))?.session ?? null,
    // Several sessions at once (recall reads those it quotes from): a database with a batch get
    // (DynamoDB's BatchGetItem, MongoDB's `$in`) reads them in one request.
    getSessions: (ids) => Promise.all(ids.map(async (id) => (await read(id))?.session ?? null)),

    async listSessions(userId, { limit = 50, cursor } = {}) {
      const after = cursor ? (JSON.parse(Buffer.from(cursor, "base64url").toString()) as [number, string]) : null;
      const owned = (await allDocs())
        .map((d) => d.session)
        .filter((s) => s.userId === userId)
        .sort((a, b) => b.lastActivityAt - a.lastActivityAt || (a.id < b.id ? 1 : -1))
        .filter((s) => !after || s.lastActivityAt < after[0] || (s.lastActivityAt === after[0] && s.id < after[1]));
      const page = owned.slice(0, limit);
      const last = page.at(-1);
      const next = owned.length > limit && last ? Buffer.from(JSON.stringify([last.lastActivityAt, last.id])) : null;
      return { sessions: page, nextCursor: next ? next.toString("base64url") : null };
    },
    async listAllSessions({ limit = 50, cursor } = {}) {
      const all = (await allDocs()).map((d) => d.session).filter((s) => s.id > (cursor ?? ""));
      const page = all.sort((a, b) => (a.id < b.id ? -1 : 1)).slice(0, limit);
      return { sessions: page, nextCursor: all.length > limit ? page[page.length - 1].id : null };
    },
    deleteSession: (id) =>
      exclusive(async () => {
        if (!(await read(id))) return false;
        await db.delete(`session:${id}`);
        return true;
      }),
    touchSession: (id, at = Date.now()) =>
      exclusive(async () => {
        const doc = await need(id);
        doc.session.lastActivityAt = at;
        await write(doc);
      }),
    updateSessionMetadata: (id, metadata) =>
      exclusive(async () => {
        const doc = await need(id);
        doc.session.metadata = metadata;
        await write(doc);
        return doc.session;
      }),

    appendMessages: (id, inputs, options = {}) => writeHistory(id, undefined, inputs, options),
    replaceAfter: (id, seq, inputs, options = {}) => writeHistory(id, seq, inputs, options),
    listBranches: async (id) => (await read(id))?.branches ?? [],
    switchBranch: (id, branchId, options = {}) =>
      exclusive(async () => {
        const doc = await need(id);
        await checkFence(id, options.fence);
        const plan = planBranchSwitch(doc, branchId);
        applyBranchSwitch(doc, plan);
        doc.session.lastActivityAt = Date.now();
        await write(doc);
        return plan.branch;
      }),
    saveBranch: (id, record) =>
      exclusive(async () => {
        const doc = await need(id);
        const branch = branchFromRecord(record, (doc.branches.at(-1)?.id ?? 0) + 1);
        doc.branches = [...doc.branches.filter((b) => b.id !== branch.id), branch].sort((a, b) => a.id - b.id);
        await write(doc);
        return branch;
      }),
    async getMessages(id, q: MessageQuery = {}) {
      const found = ((await read(id))?.messages ?? []).filter(
        (m) =>
          m.seq > (q.afterSeq ?? -Infinity) &&
          m.seq < (q.beforeSeq ?? Infinity) &&
          m.seq >= (q.fromSeq ?? -Infinity) &&
          m.seq <= (q.toSeq ?? Infinity),
      );
      if (q.last !== undefined) return q.last > 0 ? found.slice(-q.last) : [];
      return q.limit !== undefined ? found.slice(0, q.limit) : found;
    },
    // Several ranges at once (search reads the turns around those it finds): each document read once,
    // the owner checked here, since this store's getMessages does not check one (no `ownerScope`).
    async getMessageRanges(ranges, owner) {
      const docs = new Map<string, Promise<Doc | undefined>>();
      for (const { sessionId } of ranges) if (!docs.has(sessionId)) docs.set(sessionId, read(sessionId));
      return Promise.all(
        ranges.map(async ({ sessionId, fromSeq, toSeq }) => {
          const doc = await docs.get(sessionId);
          const owned =
            doc?.session.userId === owner.userId && doc.session.lastActivityAt >= (owner.activeSince ?? -Infinity);
          return owned ? doc.messages.filter((m) => m.seq >= fromSeq && m.seq <= toSeq) : [];
        }),
      );
    },
    countMessages: async (id) => (await read(id))?.messages.length ?? 0,
    popMessage: (id) =>
      exclusive(async () => {
        const doc = await need(id);
        const popped = doc.messages.pop() ?? null;
        await write(doc);
        return popped;
      }),
    truncateAfter: (id, seq) =>
      exclusive(async () => {
        const doc = await need(id);
        const before = doc.messages.length;
        doc.messages = doc.messages.filter((m) => m.seq <= seq);
        await write(doc);
        return before - doc.messages.length;
      }),

    saveSummary: (id, input) =>
      exclusive(async () => {
        const doc = await need(id);
        // The guard: a summary made from a session deleted (and created again) meanwhile is refused.
        const { sessionCreatedAt, ...fields } = input;
        if (sessionCreatedAt !== undefined && doc.session.createdAt !== sessionCreatedAt)
          throw new SessionNotFoundError(id);
        const summary = {
          ...fields,
          id: Math.max(0, ...doc.summaries.map((s) => s.id)) + 1,
          createdAt: input.createdAt ?? Date.now(),
        };
        doc.summaries.push(summary);
        doc.summaries.sort((a, b) => a.fromSeq - b.fromSeq || a.id - b.id);
        await write(doc);
        return summary;
      }),
    listSummaries: async (id) => (await read(id))?.summaries ?? [],
    getState: async (id) => (await need(id)).state,
    setState: (id, data, expectedVersion) =>
      exclusive(async () => {
        const doc = await need(id);
        if (doc.state.version !== expectedVersion) throw new StateConflictError(expectedVersion, doc.state.version);
        doc.state = { version: expectedVersion + 1, data };
        await write(doc);
        return doc.state;
      }),

    async search(query) {
      const { userId, sessionId, text, mode, ranking, limit = 20, activeSince = -Infinity } = query;
      // The kit's checks: non-empty text, seq bounds that are numbers.
      checkSearchQuery(query);
      const docs = (await allDocs())
        .filter(
          (doc) =>
            doc.session.userId === userId &&
            !(sessionId && doc.session.id !== sessionId) &&
            doc.session.lastActivityAt >= activeSince,
        )
        // Only the messages within the query's seq bounds are searched (recall's search of a session).
        .map((doc) => ({ ...doc, messages: withinSeqBounds(doc.messages, query) }));
      // Relevance (any word, BM25) with threadkeep's own in-code ranking, in slices that let other requests run.
      if (ranking === "relevance")
        return rankByRelevanceInSlices(
          docs.map((d) => ({ sessionId: d.session.id, messages: d.messages })),
          text,
          limit,
        );
      if (mode === "fulltext") throw new ThreadkeepError("not_supported", "No full-text search in this store");
      const needle = text.toLowerCase();
      const hits: SearchHit[] = [];
      for (const doc of docs) {
        for (const message of doc.messages) {
          const body = contentText(message.content);
          const at = body.toLowerCase().indexOf(needle);
          if (at >= 0)
            hits.push({
              sessionId: doc.session.id,
              seq: message.seq,
              snippet: body.slice(Math.max(0, at - 40), at + needle.length + 40),
              message,
            });
        }
      }
      return hits.sort((a, b) => b.message.createdAt - a.message.createdAt || b.seq - a.seq).slice(0, limit);
    },
    expire: (olderThan) =>
      exclusive(async () => {
        const stale = (await allDocs()).filter((d) => d.session.lastActivityAt < olderThan).map((d) => d.session.id);
        for (const id of stale) await db.delete(`session:${id}`);
        return stale;
      }),

    // The lease is a document too: a line of tickets, served in order, each holder until it
    // releases or its time runs out. Waiters poll, as they would against a network database.
    async acquireLease(id, { ttlMs = 30_000, waitMs = 30_000 } = {}): Promise<Lease> {
      const ticket = await exclusive(async () => {
        const lease = await leaseOf(id);
        const mine = await nextFence();
        lease.line.push(mine);
        await db.set(`lease:${id}`, JSON.stringify(lease));
        return mine;
      });
      const giveUpAt = Date.now() + waitMs;
      for (;;) {
        const granted = await exclusive(async () => {
          const lease = await leaseOf(id);
          const free = !lease.holder || lease.holder.expiresAt <= Date.now();
          if (lease.line[0] === ticket && free) {
            lease.line.shift();
            lease.fence = ticket;
            lease.holder = { fence: ticket, expiresAt: Date.now() + ttlMs };
          } else if (Date.now() >= giveUpAt) {
            lease.line = lease.line.filter((t) => t !== ticket);
          } else return undefined;
          await db.set(`lease:${id}`, JSON.stringify(lease));
          return lease.holder?.fence === ticket ? lease.holder : null;
        });
        if (granted === null) throw new ThreadkeepError("session_busy", `Waited ${waitMs} ms for session ${id}`);
        if (granted) {
          let released = false;
          const release = () =>
            exclusive(async () => {
              released = true;
              const lease = await leaseOf(id);
              if (lease.holder?.fence !== ticket) return;
              lease.holder = null;
              await db.set(`lease:${id}`, JSON.stringify(lease));
            });
          // The heartbeat: extends the lease, or takes it back if it lapsed and nobody was granted it since.
          const renew = (renewMs: number) =>
            exclusive(async () => {
              const lease = await leaseOf(id);
              if (released || lease.fence !== ticket) return false;
              lease.holder = { fence: ticket, expiresAt: Date.now() + renewMs };
              await db.set(`lease:${id}`, JSON.stringify(lease));
              held.expiresAt = lease.holder.expiresAt;
              return true;
            });
          const held: Lease = { sessionId: id, fence: ticket, expiresAt: granted.expiresAt, renew, release };
          return held;
        }
        await sleep(5);
      }
    },

    async close() {},
  };
}
