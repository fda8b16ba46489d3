import { isThreadkeepError } from "../errors.js";
import { parseSessionId } from "../ids.js";
import type { MemoryCore } from "../memory/memory-core.js";
import type { ReplaceAfterOptions } from "../memory/memory-options.js";
import { validateMessages } from "../messages.js";
import { keeperKey } from "../turn.js";
import type { Message, MessageInput, FullStore } from "../types.js";

/** Appends (`seq` undefined) or replaces what follows `seq`: Memory's `addMessages` and `replaceAfter`. */
export function writeMessages(
  core: MemoryCore,
  sessionId: string,
  seq: number | undefined,
  messages: MessageInput[],
  options: ReplaceAfterOptions,
): Promise<Message[]> {
  const store = core.opened;
  if (!store || seq !== undefined || options.session || options.releaseLease) {
    return write(core, sessionId, seq, messages, options, true);
  }
  // The hot path, not async (each promise layer costs an append microtask turns): an append to an
  // existing session of this owner is one store call, which checks the owner and expiry itself.
  let id: string;
  let appended: Promise<Message[]>;
  try {
    const valid = validateMessages(messages);
    id = parseSessionId(sessionId);
    const { fence, operationId, expectedLastSeq, branch } = options;
    const append = {
      fence,
      operationId,
      expectedLastSeq,
      branch,
      ...core.compactor.writeCap(),
      owner: core.scope(core.owner(options)),
    };
    appended = store.appendMessages(id, valid, append);
  } catch (error) {
    return Promise.reject(error);
  }
  return appended.then(
    (added) => afterWrite(core, store, id, added),
    (error: unknown) => {
      // New, expired or another owner's: the path that creates, deletes or refuses.
      if (!isThreadkeepError(error, "session_not_found")) throw error;
      return write(core, sessionId, seq, messages, options, false);
    },
  );
}

/** {@link writeMessages} in full; `ownerScoped`: try the owner-scoped append first. */
async function write(
  core: MemoryCore,
  sessionId: string,
  seq: number | undefined,
  messages: MessageInput[],
  options: ReplaceAfterOptions,
  ownerScoped: boolean,
): Promise<Message[]> {
  const valid = validateMessages(messages);
  const store = core.opened ?? (await core.store);
  const { fence, operationId, expectedLastSeq, branch } = options;
  // Awaited only when asked for: most writes release nothing, and each await is a turn of the microtask queue.
  const releaseLease = options.releaseLease ? await releasesLease(core, store, sessionId, options) : undefined;
  // The cap rides on the write: with a summarizer, only over what the store's summaries cover.
  const write = { fence, operationId, expectedLastSeq, branch, releaseLease, ...core.compactor.writeCap() };
  const userId = core.owner(options);
  if (ownerScoped && seq === undefined && !options.session) {
    // The common case, an append to an existing session of this owner, is one store call that
    // checks the owner and expiry itself; anything else (new, expired, another owner's) takes the
    // path below, which creates, deletes or refuses as before.
    const id = parseSessionId(sessionId);
    let added: Message[] | undefined;
    try {
      added = await store.appendMessages(id, valid, { ...write, owner: core.scope(userId) });
    } catch (error) {
      if (!isThreadkeepError(error, "session_not_found")) throw error;
    }
    if (added) return afterWrite(core, store, id, added);
  }
  const { session, created } = await core.open(sessionId, userId, true, undefined, options.session);
  let added: Message[];
  try {
    added =
      seq === undefined
        ? await store.appendMessages(session.id, valid, write)
        : await store.replaceAfter(session.id, seq, valid, write);
  } catch (error) {
    // A refused first write leaves no empty session behind.
    if (created) await core.delete(session.id).catch(() => false);
    throw error;
  }
  return afterWrite(core, store, session.id, added);
}

/**
 * Whether this write gives the turn lease back itself: asked for, with a fence (the store does it in
 * the write's own step, or `completeStore` right after it).
 * The lease's heartbeat stops first, so no renew lands after the release and takes the lease back.
 */
async function releasesLease(
  core: MemoryCore,
  store: FullStore,
  sessionId: string,
  options: ReplaceAfterOptions,
): Promise<boolean | undefined> {
  if (!options.releaseLease || options.fence === undefined) return undefined;
  await core.keepers.get(keeperKey(parseSessionId(sessionId), options.fence))?.stop();
  return true;
}

/** What follows every committed write: embedding, and compaction when a summarizer is set. */
function afterWrite(
  core: MemoryCore,
  store: FullStore,
  sessionId: string,
  added: Message[],
): Message[] | Promise<Message[]> {
  // Embedding never holds up (or fails) the write: it runs after, and retries by itself.
  core.vectors?.schedule(store, sessionId);
  if (!core.compactor.summarizer) return added;
  return compactAfterWrite(core, store, sessionId, added);
}

async function compactAfterWrite(
  core: MemoryCore,
  store: FullStore,
  sessionId: string,
  added: Message[],
): Promise<Message[]> {
  const compaction = core.compactor.afterWrite(store, sessionId, added);
  if (!core.settings.compaction.background) await compaction;
  return added;
}
