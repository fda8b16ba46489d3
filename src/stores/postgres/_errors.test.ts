import { describe, expect, it } from "vitest";
import { isOutcomeUnknown, isStorageFull, isStoreRefusal, isThreadkeepError } from "../../core/errors.js";
import { toStoreError } from "./_errors.js";

/** A driver error as `postgres` raises it: a server error carries its SQLSTATE as `code`. */
const failure = (code: string, message = "failed") => Object.assign(new Error(message), { code });

describe("PostgreSQL errors: refusals apart from outages", () => {
  it("marks an SQL error that retrying will not fix as a refusal, with its SQLSTATE", () => {
    for (const code of ["42703", "42P01", "42501", "3F000", "42883", "23502", "XX000"]) {
      const error = toStoreError(failure(code, `no good (${code})`), "acquireLease");
      expect(isThreadkeepError(error, "store_unavailable"), code).toBe(true);
      expect(isStoreRefusal(error), code).toBe(true);
      expect((error as Error).message).toContain(`PostgreSQL refused the statement (${code})`);
    }
  });

  it("keeps outages apart: connection, timeout, shutdown, overload, rollback, lock wait, read-only", () => {
    for (const code of [
      "ECONNREFUSED",
      "ECONNRESET",
      "CONNECT_TIMEOUT",
      "EPIPE",
      "08006",
      "57014",
      "57P01",
      "57P03",
      "53300",
      "40001",
      "40P01",
      "55P03",
      "25006",
      "58030",
    ]) {
      const error = toStoreError(failure(code), "acquireLease");
      expect(isThreadkeepError(error, "store_unavailable"), code).toBe(true);
      expect(isStoreRefusal(error), code).toBe(false);
    }
    expect(isOutcomeUnknown(toStoreError(failure("ECONNRESET"), "appendMessages"))).toBe(true);
  });

  it("marks 53100 disk_full as storage full: an outage to wait out, not a refusal", () => {
    const error = toStoreError(
      failure("53100", 'could not extend file "base/1/2": No space left on device'),
      "appendMessages",
    );
    expect(isStorageFull(error)).toBe(true);
    expect(isStoreRefusal(error)).toBe(false);
    expect(isOutcomeUnknown(error)).toBe(false);
    for (const code of ["53200", "53300", "58030", "ECONNRESET"])
      expect(isStorageFull(toStoreError(failure(code), "appendMessages")), code).toBe(false);
  });

  it("maps the constraint violations and text errors it knows to their own codes, never to a refusal", () => {
    expect((toStoreError(failure("23505"), "createSession") as { code: string }).code).toBe("session_exists");
    expect((toStoreError(failure("23503"), "saveSummary") as { code: string }).code).toBe("session_not_found");
    expect((toStoreError(failure("22021"), "appendMessages") as { code: string }).code).toBe("invalid_request");
  });
});
