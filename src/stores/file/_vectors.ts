/**
 * The file store's embeddings: `<dir>/vectors/<session id>.jsonl`, one appended line per vector (the
 * last for a seq wins), and `<dir>/vectors/models.json` with each model's dimensions.
 */
import { appendFile, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { decodeStoredVector, encodeStoredVector, type VectorSidecar } from "../_vector-sidecar.js";
import type { StoredVector } from "../_vectors.js";

/** A sidecar over files under `dir/vectors`. */
export function fileVectorSidecar(dir: string): VectorSidecar {
  const root = join(dir, "vectors");
  const modelsPath = join(root, "models.json");
  // One load and one writer at a time: two first embeddings at once must not each start from an
  // empty map, nor rename the same temporary file twice.
  let models: Promise<Record<string, number>> | undefined;
  let writing: Promise<unknown> = Promise.resolve();

  const readModels = async (): Promise<Record<string, number>> => {
    try {
      return JSON.parse(await readFile(modelsPath, "utf8")) as Record<string, number>;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      return {};
    }
  };
  const loadModels = (): Promise<Record<string, number>> => {
    models ??= readModels().catch((error: unknown) => {
      models = undefined;
      throw error;
    });
    return models;
  };

  return {
    async read(sessionId) {
      let text: string;
      try {
        text = await readFile(join(root, `${sessionId}.jsonl`), "utf8");
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
        throw error;
      }
      const bySeq = new Map<number, StoredVector>();
      for (const line of text.split("\n")) {
        const v = line ? decodeStoredVector(line) : null;
        if (v) bySeq.set(v.seq, v);
      }
      return [...bySeq.values()];
    },
    async write(sessionId, vectors) {
      await mkdir(root, { recursive: true });
      await appendFile(join(root, `${sessionId}.jsonl`), vectors.map((v) => `${encodeStoredVector(v)}\n`).join(""));
    },
    async dims(model) {
      return (await loadModels())[model];
    },
    async claimDims(model, dims) {
      const known = await loadModels();
      if (known[model] !== undefined) return known[model];
      known[model] = dims;
      const write = writing.then(async () => {
        await mkdir(root, { recursive: true });
        // Written aside and renamed, so a crash never leaves half a file.
        await writeFile(`${modelsPath}.tmp`, JSON.stringify(known));
        await rename(`${modelsPath}.tmp`, modelsPath);
      });
      writing = write.catch(() => {});
      try {
        await write;
      } catch (error) {
        // Not recorded on disk: forget it, so the next claim writes it again.
        if (known[model] === dims) delete known[model];
        throw error;
      }
      return dims;
    },
  };
}
