/**
 * Request bodies are JSON. Real clients send `Content-Type: application/json` on requests that carry
 * no body (openai-python's default headers put it on every `DELETE`; curl users add
 * `-H "Content-Type: application/json"` to every call; Open WebUI's proxy forwards it on every
 * method), so an empty body under a JSON content type is no body, on every method, and the route
 * answers as it would without the header. A non-empty body is parsed exactly as fastify's own JSON
 * parser does (same prototype-poisoning checks, same errors, same body limit).
 */
import type { FastifyBodyParser, FastifyInstance } from "fastify";

/** `application/json` and every `application/<x>+json` (RFC 6839), with any parameters (`charset=utf-8`). */
const JSON_SUFFIX = /^application\/[^\s;/]+\+json(?:\s*;|$)/;

/** Replaces fastify's JSON parser with one that reads an empty body as no body. */
export function installJsonParser(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser("error", "error");
  // fastify's parser answers every call through `done`, never a promise.
  const parse: FastifyBodyParser<string> = (request, body, done) => {
    if (body.length === 0) {
      done(null, undefined);
      return;
    }
    void parseJson(request, body, done);
  };
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, parse);
  app.addContentTypeParser(JSON_SUFFIX, { parseAs: "string" }, parse);
}
