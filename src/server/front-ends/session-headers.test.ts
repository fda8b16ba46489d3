import { describe, expect, it } from "vitest";
import {
  FRONT_END_ID_NAMESPACE,
  parseSessionHeaders,
  sessionIdForChat,
  sessionTargetOf,
  uuidV5,
} from "./session-headers.js";

const CHAT = "0b5c2f4e-8a71-4d2b-9c3e-5f6a7b8c9d0e";
const OTHER = "7d9e1a2b-3c4d-4e5f-8a6b-1c2d3e4f5a6b";

describe("sessionTargetOf", () => {
  it("reads X-Session-ID, then X-OpenWebUI-Chat-Id, then X-Conversation-Id", () => {
    expect(sessionTargetOf({ "x-session-id": CHAT, "x-openwebui-chat-id": OTHER })).toEqual({
      kind: "session",
      id: CHAT,
      given: true,
      header: "x-session-id",
    });
    expect(sessionTargetOf({ "x-openwebui-chat-id": CHAT, "x-conversation-id": OTHER })).toMatchObject({
      id: CHAT,
      header: "x-openwebui-chat-id",
    });
    expect(sessionTargetOf({ "x-conversation-id": CHAT.toUpperCase() })).toMatchObject({
      id: CHAT,
      header: "x-conversation-id",
    });
  });

  it("counts an empty header, an unresolved template or LibreChat's `new` as absent", () => {
    for (const absent of ["", "   ", "{{CHAT_ID}}", "{{LIBRECHAT_BODY_CONVERSATIONID}}", "${CONVO}", "new"]) {
      expect(sessionTargetOf({ "x-session-id": absent, "x-openwebui-chat-id": CHAT })).toMatchObject({
        id: CHAT,
        header: "x-openwebui-chat-id",
      });
    }
    const fresh = sessionTargetOf({ "x-session-id": "{{CHAT_ID}}", "x-conversation-id": "" });
    expect(fresh).toMatchObject({ kind: "session", given: false });
    expect(fresh.kind === "session" && fresh.id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("recognises a temporary chat before validating anything", () => {
    expect(sessionTargetOf({ "x-session-id": "local:Xk3_pq9aAAAB" })).toEqual({
      kind: "temporary",
      header: "x-session-id",
    });
    expect(sessionTargetOf({ "x-openwebui-chat-id": "local:Xk3_pq9aAAAB" })).toEqual({
      kind: "temporary",
      header: "x-openwebui-chat-id",
    });
  });

  it("refuses a malformed X-Session-ID and maps another front-end's id to a stable UUID v5", () => {
    expect(() => sessionTargetOf({ "x-session-id": "chat-42" })).toThrow(
      expect.objectContaining({ code: "invalid_session_id" }),
    );
    const derived = sessionTargetOf({ "x-conversation-id": "chat-42" });
    expect(derived).toMatchObject({ kind: "session", given: true, id: uuidV5("chat-42", FRONT_END_ID_NAMESPACE) });
    expect(sessionTargetOf({ "x-conversation-id": "chat-42" })).toEqual(derived);
    expect(sessionIdForChat("chat-43")).not.toBe(sessionIdForChat("chat-42"));
    expect(() => sessionIdForChat("x".repeat(513))).toThrow(expect.objectContaining({ code: "invalid_session_id" }));
  });

  it("follows a configured order", () => {
    const headers = { "x-session-id": CHAT, "x-chat": OTHER };
    expect(sessionTargetOf(headers, ["x-chat", "x-session-id"])).toMatchObject({ id: OTHER, header: "x-chat" });
    expect(parseSessionHeaders(" X-Chat ,x-session-id,x-chat")).toEqual(["x-chat", "x-session-id"]);
    expect(parseSessionHeaders("")).toEqual(["x-session-id", "x-openwebui-chat-id", "x-conversation-id"]);
  });
});

describe("uuidV5", () => {
  it("matches RFC 4122's name-based UUID (the DNS namespace example)", () => {
    expect(uuidV5("www.example.com", "6ba7b810-9dad-11d1-80b4-00c04fd430c8")).toBe(
      "2ed6657d-e927-568b-95e1-2665a8aea6a2",
    );
  });
});
