import { describe, expect, it } from "vitest";
import { isThreadkeepError } from "../../core/errors.js";
import { createPostgresStore } from "./index.js";
import { createStore } from "../url.js";

describe("PostgreSQL store URLs: malformed ones are refused at open", () => {
  it.each([
    ["postgres://u@127.0.0.1:99999/db", "Not a host[:port]"],
    ["postgres://u@127.0.0.1:abc/db", "Not a host[:port]"],
    ["postgres://u@127.0.0.1:0/db", "Not a host[:port]"],
    ["postgres://u@a:5432,b:70000/db", 'Not a host[:port] in a PostgreSQL URL: "b:70000"'],
    ["postgres://u@127.0.0.1:5432/db?foo=1", 'Unknown PostgreSQL URL parameter "foo"'],
    ["postgres://u@127.0.0.1:5432/db?sslmode=requir", "sslmode must be one of"],
    ["postgres://u@127.0.0.1:5432/db?search_path=x", "use the schema option"],
    ["postgres://u@127.0.0.1:5432/db?statement_timeout=1", "?query_timeout="],
    ["postgres://u@127.0.0.1:5432/db?max=3", "use the poolSize option"],
    ["postgres://u@127.0.0.1:5432/db?prepare=no", "prepare takes a whole number, true or false"],
    ["postgres://u@127.0.0.1:5432", "names its database"],
    ["postgresql://u@127.0.0.1:5432/", "names its database"],
    ["postgres://u@127.0.0.1:5432/a/b", 'one database name, got "/a/b"'],
    ["postgres://u:p%zz@127.0.0.1/db", "percent-encoding"],
  ])("%s: invalid_store_url naming what is wrong, before anything connects", async (url, says) => {
    for (const open of [() => createStore(url), async () => createPostgresStore({ url })]) {
      const error = await open().then(
        () => new Error("opened"),
        (e: Error) => e,
      );
      expect(isThreadkeepError(error, "invalid_store_url"), String(error)).toBe(true);
      expect(error.message).toContain(says);
      expect(error.message).not.toContain("p%zz");
    }
  });

  it.each([
    "postgres://u:p@127.0.0.1:5432/db",
    "postgresql://127.0.0.1/db",
    "postgres:///db",
    "postgres://u@[::1]:5432/db",
    "postgres://u@a:5432,b:5433/db?target_session_attrs=primary",
    "postgres://u@h/db?sslmode=require&application_name=me&connect_timeout=1&query_timeout=900",
    // The driver's own settings, as before URLs were checked (prepare=false: a transaction-mode PgBouncer).
    "postgres://u@h/db?prepare=false&fetch_types=false&idle_timeout=20&max_lifetime=600&keep_alive=30&max_pipeline=50",
    // Common session settings the driver sends to the server at connect.
    "postgres://u@h/db?synchronous_commit=off&lock_timeout=2000&idle_in_transaction_session_timeout=60000&work_mem=8MB&jit=off&timezone=UTC",
  ])("%s opens (lazily: nothing connects yet)", async (url) => {
    const store = await createStore(url);
    await store.close();
  });
});
