/**
 * The inspector: a small web page at /ui that shows sessions, transcripts, the next turn's context
 * and the conversational state. It is static files only (src/server/ui, copied to dist/server/ui by
 * the build); everything it shows it reads through the public /v1 API with the user's own key, so it
 * sees exactly what that key may see. Nothing here runs on a chat turn's path.
 */
import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import type { FastifyInstance, FastifyReply } from "fastify";
import { z } from "zod";
import { addRoute, defineRoute, type RouteContract } from "../openapi/route.js";
import { error, SessionId } from "../openapi/schemas.js";

/** Where the page's files are, server/ui beside routes/, in src/ and in dist/. */
const UI_DIR = new URL("../ui/", import.meta.url);

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
};

/**
 * Only the page's own files may load and only the page's own origin may be called: stored message
 * content is untrusted, and even if some of it slipped into markup it could neither run nor fetch.
 */
export const INSPECTOR_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const page = (url: string, extra: Partial<RouteContract> = {}) =>
  defineRoute({
    method: "GET",
    url,
    summary: "The inspector web page (static; it reads the API with the key the user enters)",
    open: true,
    responses: { "200": { description: "HTML", media: ["text/html"] } },
    ...extra,
  });

/** The contracts of the inspector's routes. */
export const inspectorContracts = {
  root: page("/ui"),
  slash: page("/ui/"),
  memories: page("/ui/memories", {
    summary: "The inspector's Memories view: the caller's memories (docs/inspector.md)",
  }),
  session: page("/ui/s/:id", { params: z.object({ id: SessionId }) }),
  view: page("/ui/s/:id/:view", { params: z.object({ id: SessionId, view: z.enum(["context", "state"]) }) }),
  asset: defineRoute({
    method: "GET",
    url: "/ui/assets/:file",
    summary: "A file of the inspector page (script, style sheet, icon)",
    open: true,
    responses: { "200": { description: "The file" }, "404": error("No such file (`not_found`)") },
  }),
};

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

/** Reads the page's files once, on the first request for one. */
async function loadAssets(): Promise<Map<string, Asset>> {
  const assets = new Map<string, Asset>();
  for (const name of await readdir(UI_DIR)) {
    const type = TYPES[name.slice(name.lastIndexOf("."))];
    if (!type || !/^[a-z0-9-]+\.[a-z]+$/.test(name)) continue;
    const body = await readFile(new URL(name, UI_DIR));
    const etag = `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"`;
    assets.set(name, { body, type, etag });
  }
  return assets;
}

function send(reply: FastifyReply, asset: Asset, ifNoneMatch: string | undefined): FastifyReply {
  reply
    .header("content-security-policy", INSPECTOR_CSP)
    .header("x-content-type-options", "nosniff")
    .header("referrer-policy", "no-referrer")
    .header("x-frame-options", "DENY")
    .header("cross-origin-opener-policy", "same-origin")
    .header("cache-control", "no-cache")
    .header("etag", asset.etag);
  if (ifNoneMatch === asset.etag) return reply.code(304).send();
  return reply.type(asset.type).send(asset.body);
}

/**
 * Adds the inspector page: `/ui` (sessions), `/ui/s/{id}[/{view}]` (one session), `/ui/memories` (the
 * user's memories), and `/ui/assets/{file}`.
 */
export function registerInspector(app: FastifyInstance): void {
  let assets: Promise<Map<string, Asset>> | undefined;
  const asset = async (name: string) => {
    assets ??= loadAssets();
    assets.catch(() => (assets = undefined));
    return (await assets).get(name);
  };
  const servePage = async (request: { headers: Record<string, unknown> }, reply: FastifyReply) => {
    const index = await asset("index.html");
    if (!index) return reply.callNotFound();
    return send(reply, index, request.headers["if-none-match"] as string | undefined);
  };
  for (const contract of [
    inspectorContracts.root,
    inspectorContracts.slash,
    inspectorContracts.memories,
    inspectorContracts.session,
    inspectorContracts.view,
  ]) {
    addRoute(app, contract, servePage);
  }
  addRoute<{ Params: { file: string } }>(app, inspectorContracts.asset, async (request, reply) => {
    const file = request.params.file;
    const found = file === "index.html" ? undefined : await asset(file);
    if (!found) return reply.callNotFound();
    return send(reply, found, request.headers["if-none-match"]);
  });
}
