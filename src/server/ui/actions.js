// @ts-check
/**
 * What the page can change: delete, fork at a message, undo the last turn, export as JSONL, switch
 * to a branch. Each asks first, and each is one call of the public REST API.
 */
import { api, request, sessionPath } from "./api.js";
import { confirmAction } from "./dialogs.js";

/**
 * @typedef {{ id: string, messages: { seq: number, role: string }[] }} Target
 * @typedef {{ navigate: (path: string) => void, reload: () => Promise<void>, removed: (id: string) => void }} After
 */

/**
 * @param {Target} s
 * @param {After} after
 */
export async function deleteSession(s, after) {
  const ok = await confirmAction({
    title: "Delete this session?",
    body: `Session ${s.id} is deleted with its ${s.messages.length} messages, its summaries and its state. This cannot be undone.`,
    confirm: "Delete session",
    danger: true,
  });
  if (!ok) return;
  await request(sessionPath(s.id), { method: "DELETE" });
  after.removed(s.id);
  after.navigate("/ui");
}

/**
 * @param {Target} s
 * @param {After} after
 */
export async function undoTurn(s, after) {
  const lastUser = s.messages.findLast((m) => m.role === "user");
  if (!lastUser) {
    await confirmAction({ title: "Nothing to undo", body: "This session has no user message.", confirm: "OK" });
    return;
  }
  const count = s.messages.filter((m) => m.seq >= lastUser.seq).length;
  const ok = await confirmAction({
    title: "Undo the last turn?",
    body: `Removes the last user message (#${lastUser.seq}) and everything after it: ${count} message${count === 1 ? "" : "s"}.`,
    confirm: "Undo turn",
    danger: true,
  });
  if (!ok) return;
  await request(`${sessionPath(s.id)}/undo`, { method: "POST" });
  await after.reload();
}

/**
 * @param {Target} s
 * @param {number | undefined} atSeq the last message to copy; all when undefined
 * @param {After} after
 */
export async function forkSession(s, atSeq, after) {
  const last = atSeq ?? s.messages.at(-1)?.seq ?? 0;
  const ok = await confirmAction({
    title: `Fork at #${last}?`,
    body: `Creates a new session with copies of the messages up to #${last}, the summaries of those messages and the state. This session stays as it is.`,
    confirm: "Fork",
  });
  if (!ok) return;
  const fork = await api(`${sessionPath(s.id)}/fork`, { method: "POST", body: { atSeq: last } });
  after.navigate(`/ui/s/${fork.id}`);
}

/**
 * @param {Target} s
 */
export async function exportSession(s) {
  const ok = await confirmAction({
    title: "Export as JSONL?",
    body: `Downloads threadkeep-${s.id}.jsonl in the threadkeep export format (threadkeep import reads it back).`,
    confirm: "Download",
  });
  if (!ok) return;
  const blob = await (await request(`${sessionPath(s.id)}/export`)).blob();
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = `threadkeep-${s.id}.jsonl`;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/**
 * @param {Target} s
 * @param {{ id: string | number, atSeq: number, reason?: string }} branch
 * @param {After} after
 */
export async function switchBranch(s, branch, after) {
  const ok = await confirmAction({
    title: "Switch to this branch?",
    body: `The messages after #${branch.atSeq} become those of branch ${branch.id}${branch.reason ? ` (${branch.reason})` : ""}; the ones shown now are kept as a branch, nothing is deleted.`,
    confirm: "Switch",
  });
  if (!ok) return;
  await request(`${sessionPath(s.id)}/branches/${encodeURIComponent(branch.id)}/switch`, { method: "POST" });
  await after.reload();
}
