import { describe, expect, it } from "vitest";
import { openWebUiHeaders } from "../../../test/_front-ends.js";
import { clientHintOf } from "./client-hint.js";

const lower = (headers: Record<string, string>) =>
  Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));

describe("clientHintOf", () => {
  it("takes what X-Threadkeep-Client declares", () => {
    expect(clientHintOf({ "x-threadkeep-client": "thin" })).toBe("thin");
    expect(clientHintOf({ "x-threadkeep-client": " Whole-History " })).toBe("whole-history");
    expect(clientHintOf({ "x-threadkeep-client": "thin", ...lower(openWebUiHeaders(undefined)) })).toBe("thin");
  });

  it("knows Open WebUI by its forwarded headers, and nothing else by default", () => {
    expect(clientHintOf(lower(openWebUiHeaders("0b5c2f4e-8a71-4d2b-9c3e-5f6a7b8c9d0e")))).toBe("whole-history");
    expect(
      clientHintOf({ "x-conversation-id": "0b5c2f4e-8a71-4d2b-9c3e-5f6a7b8c9d0e", "user-agent": "OpenAI/JS 5.0.0" }),
    ).toBeUndefined();
    expect(clientHintOf({ "x-threadkeep-client": "{{CLIENT}}" })).toBeUndefined();
  });

  it("refuses a value it does not know", () => {
    expect(() => clientHintOf({ "x-threadkeep-client": "full" })).toThrow(
      expect.objectContaining({ code: "invalid_request" }),
    );
  });
});
