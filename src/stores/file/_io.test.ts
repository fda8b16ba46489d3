import { describe, expect, it } from "vitest";
import { isStorageFull } from "../../core/errors.js";
import { fsError } from "./_io.js";

const errno = (code: string) => Object.assign(new Error(`${code}: failed`), { code, syscall: "write" });

describe("file store errors: a write with no room", () => {
  it("flags ENOSPC, EFBIG and EDQUOT as storage full, and other failures not", () => {
    for (const code of ["ENOSPC", "EFBIG", "EDQUOT"])
      expect(isStorageFull(fsError(errno(code), "append")), code).toBe(true);
    for (const code of ["EACCES", "EIO", "EROFS"])
      expect(isStorageFull(fsError(errno(code), "append")), code).toBe(false);
  });
});
