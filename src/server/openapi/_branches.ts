/** The OpenAPI paths of the branches API (/v1/sessions/{id}/branches). */
import { ref } from "./_schemas.js";

const json = (schema: unknown) => ({ "application/json": { schema } });
const ok = (description: string, schema: unknown) => ({ description, content: json(schema) });
const error = (description: string) => ({ description, content: json(ref("Error")) });
const failures = {
  "400": error("Invalid session id or branch id (`invalid_session_id`, `invalid_request`)"),
  "401": error("Missing or unknown API key (`invalid_api_key`), or a bad end-user token (`invalid_user_token`)"),
  "404": error("No such session for this user (`session_not_found`), or no such branch (`not_found`)"),
  "503": error("The store is unavailable (`store_unavailable`)"),
};
const params = [
  { name: "id", in: "path", required: true, schema: ref("SessionId") },
  { name: "branchId", in: "path", required: true, schema: { type: "integer", minimum: 1 } },
];
const branchFields = {
  id: { type: "integer" },
  atSeq: { type: "integer", description: "The branch split after this seq: its first message had seq atSeq + 1" },
  parentId: { type: ["integer", "null"], description: "Null: splits from the main line; else from that branch's messages" },
  reason: { type: "string", enum: ["regenerate", "edit", "fork"] },
  createdAt: { type: "integer" },
  metadata: { type: "object" },
};
const branchSummary = { type: "object", properties: { ...branchFields, messageCount: { type: "integer" } } };
const branch = { type: "object", properties: { ...branchFields, messages: { type: "array", items: ref("Message") } } };

/** Paths of the branches API, merged into the OpenAPI document. */
export const branchesPaths = {
  "/v1/sessions/{id}/branches": {
    get: {
      summary: "Branches: superseded answers and edits, kept (without their messages)",
      parameters: [params[0]],
      responses: { "200": ok("Branches by id", { type: "object", properties: { data: { type: "array", items: branchSummary } } }), ...failures },
    },
  },
  "/v1/sessions/{id}/branches/{branchId}": {
    get: { summary: "One branch with its messages", parameters: params, responses: { "200": ok("The branch", branch), ...failures } },
  },
  "/v1/sessions/{id}/branches/{branchId}/switch": {
    post: {
      summary: "Make the branch the main line again; the branch then holds what it replaced (switch again to switch back)",
      parameters: params,
      responses: {
        "200": ok("The branch after the swap, and the main line's messages after its atSeq", {
          type: "object",
          properties: { branch: branchSummary, messages: { type: "array", items: ref("Message") } },
        }),
        "409": error("The branch splits from another branch, or its point is no longer stored (`history_conflict`)"),
        ...failures,
      },
    },
  },
};
