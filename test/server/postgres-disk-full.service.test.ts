/**
 * The server on a PostgreSQL that is out of disk. Filling a real server's disk takes root and a
 * filesystem of its own, so the test stands in for it with what the server answers then: a trigger
 * on the messages of a schema of the test's own raises SQLSTATE 53100 (`disk_full`) with the
 * server's own message, until it is dropped ("space returns"). The turn is answered `not-saved`,
 * reads go on, `/readyz` and `/metrics` show it, and the next turn after it is saved.
 */
import postgres from "postgres";
import { afterEach, describe, it } from "vitest";
import { createPostgresStore } from "../../src/stores/postgres/index.js";
import { serviceAvailable, TEST_POSTGRES_URL } from "../_services.js";
import { dropSchemas, uniqueSchema } from "../stores/_postgres-stores.js";
import { startStack } from "./_stack.js";
import { storageFullScenario } from "./_storage-full.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe("serve on a PostgreSQL out of disk (53100 disk_full)", () => {
  it(
    "answers not-saved, keeps reading, shows it in /readyz and /metrics, and saves again once space returns",
    { timeout: 30_000 },
    async (ctx) => {
      const available = await serviceAvailable("postgres");
      if (available !== true) ctx.skip(available);
      const schema = uniqueSchema();
      cleanups.push(() => dropSchemas(schema));
      const admin = postgres(TEST_POSTGRES_URL, { max: 1, onnotice: () => {}, connection: { search_path: schema } });
      cleanups.push(() => admin.end());
      const stack = await startStack({ store: createPostgresStore({ url: TEST_POSTGRES_URL, schema }) });
      cleanups.push(() => stack.close());

      await storageFullScenario(stack, {
        fill: () =>
          admin.unsafe(`
            CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              RAISE EXCEPTION 'could not extend file "base/16384/16390": No space left on device'
                USING ERRCODE = 'disk_full', HINT = 'Check free disk space.';
            END $$;
            CREATE TRIGGER disk_full BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION disk_full();
          `),
        free: () => admin.unsafe("DROP TRIGGER disk_full ON messages"),
        error: /53100.*No space left on device/,
      });
    },
  );
});
