/**
 * End users behind one gateway. An API key is a tenant (its user id); a gateway such as Open WebUI
 * serves many people with one key and may name the person on each request, in a header it is
 * trusted to set (`userHeader`) or in a token it signs (`userJwt`). Each person then owns their
 * sessions alone, under the id `<tenant>/<end user>`. Without these options every forwarded user
 * header is ignored: a client could write any of them.
 */
import { createSecretKey, type KeyObject } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { errors as joseErrors, jwtVerify } from "jose";
import { ThreadkeepError } from "../core/errors.js";

/** Between the tenant and the end user in an end user's id; a tenant id may not contain it. */
export const END_USER_SEPARATOR = "/";

/** Longest accepted end-user id, in characters. */
export const MAX_END_USER_LENGTH = 256;

/** The header Open WebUI sends its signed token in (its `FORWARD_USER_INFO_HEADER_JWT`). */
export const DEFAULT_USER_JWT_HEADER = "X-OpenWebUI-User-Jwt";

/** The `iss` Open WebUI puts in the token it signs. */
export const DEFAULT_USER_JWT_ISSUER = "open-webui";

/** How far the token's `exp`, `iat` and `nbf` may be off, for clocks of two machines. */
const CLOCK_TOLERANCE_S = 30;

/** A signed token naming the end user (Open WebUI's `X-OpenWebUI-User-Jwt`): HS256, `sub` is the user. */
export interface UserJwtOptions {
  /** The shared secret the gateway signs with (Open WebUI's `FORWARD_USER_INFO_HEADER_JWT_SECRET`). */
  secret: string;
  /** The `iss` a token must carry. @default "open-webui" */
  issuer?: string;
  /** The header the token comes in. @default "X-OpenWebUI-User-Jwt" */
  header?: string;
}

/** Who may name an end user. Neither set: nobody, and a request is its API key's user. */
export interface EndUserOptions {
  /** A header the gateway sets to the end user's id, e.g. `X-OpenWebUI-User-Id`. Trust it only when only the gateway can reach the server. */
  userHeader?: string;
  /** A token the gateway signs; when set, an end user is only taken from a valid token. */
  userJwt?: UserJwtOptions;
}

/**
 * The owner of a request's sessions: its tenant (the API key's user), or that tenant's end user.
 * @throws ThreadkeepError `invalid_user` (400) for an unusable end-user value, `invalid_user_token` (401) for a bad token.
 */
export type ResolveUser = (request: Pick<IncomingMessage, "headers" | "rawHeaders">, tenant: string) => Promise<string>;

/** The id of `endUser` within `tenant`'s sessions: distinct from every tenant and every other tenant's end users. */
export function endUserId(tenant: string, endUser: string): string {
  return `${tenant}${END_USER_SEPARATOR}${endUser}`;
}

/** True when end users can be named at all. */
export function hasEndUsers(options: EndUserOptions): boolean {
  return Boolean(options.userHeader || options.userJwt);
}

/** One line for the start-up log: which identity mode is on. */
export function describeIdentity(options: EndUserOptions): string {
  const jwt = options.userJwt;
  if (jwt) {
    const plain = options.userHeader ? ` (${options.userHeader} without it: 401)` : "";
    return `end users from signed ${jwt.header ?? DEFAULT_USER_JWT_HEADER} (HS256, iss ${jwt.issuer ?? DEFAULT_USER_JWT_ISSUER})${plain}`;
  }
  if (options.userHeader) return `end users from trusted header ${options.userHeader}`;
  return "api key only (forwarded user headers ignored)";
}

/**
 * Refuses tenant ids an end user's id could be mistaken for: with end users on, `alice/bob` must only
 * ever be alice's end user bob, never a tenant of its own.
 * @throws ThreadkeepError `invalid_request`
 */
export function checkTenantIds(tenants: Iterable<string>, options: EndUserOptions): void {
  if (!hasEndUsers(options)) return;
  for (const tenant of tenants) {
    if (tenant.includes(END_USER_SEPARATOR)) {
      throw new ThreadkeepError(
        "invalid_request",
        `The user id "${tenant}" contains "${END_USER_SEPARATOR}", which separates a tenant from its end users: rename it to use end users`,
      );
    }
  }
}

/**
 * Builds the resolver for `options`. Checks the options now, so a bad secret or header name fails at start.
 * @throws ThreadkeepError `invalid_request` for an empty secret or an invalid header name.
 */
export function createUserResolver(options: EndUserOptions): ResolveUser {
  const plain = options.userHeader
    ? { name: headerName(options.userHeader, "userHeader"), label: options.userHeader.trim() }
    : undefined;
  const jwt = options.userJwt;
  if (!jwt) {
    if (!plain) return async (_request, tenant) => tenant;
    return async (request, tenant) => {
      const value = singleHeader(request, plain.name, "invalid_user");
      return value === undefined ? tenant : endUserId(tenant, checkEndUser(utf8(value, plain.label), plain.label));
    };
  }
  const verify = createTokenVerifier(jwt);
  const tokenHeader = headerName(jwt.header ?? DEFAULT_USER_JWT_HEADER, "userJwt.header");
  return async (request, tenant) => {
    const token = singleHeader(request, tokenHeader, "invalid_user_token");
    if (token !== undefined) return endUserId(tenant, await verify(token));
    // The gateway signs every request it names a user on: a plain user header alone is not its.
    if (plain && request.headers[plain.name] !== undefined) {
      throw new ThreadkeepError(
        "invalid_user_token",
        `${plain.label} is only trusted with a signed ${jwt.header ?? DEFAULT_USER_JWT_HEADER}, which is missing`,
      );
    }
    return tenant;
  };
}

/**
 * The header an operator key names one of its tenant's end users in, to act as that user (the
 * inspector's "open user"). Sent with any other key it is `403 operator_only`.
 */
export const OPERATOR_USER_HEADER = "X-Threadkeep-User";

/** What {@link operatorUser} decides from. */
export interface OperatorRequest {
  /** The API key's user. */
  tenant: string;
  /** The user the request resolved to without the operator header (the tenant, or a gateway's end user). */
  user: string;
  /** Whether the request's key is an operator key. */
  operator: boolean;
  /** Whether end users are on (`userHeader` or `userJwt`): without them a tenant has none to open. */
  endUsers: boolean;
}

/**
 * The user a request acts as once {@link OPERATOR_USER_HEADER} is read: `user` when it is absent, else
 * the named end user of the operator's own tenant (`<tenant>/<end user>`, never another tenant's).
 * @throws ThreadkeepError `operator_only` (403) when the key is not an operator's; `invalid_request`
 *   without end users, or with a gateway's end user on the same request; `invalid_user` for an unusable value.
 */
export function operatorUser(
  request: Pick<IncomingMessage, "headers" | "rawHeaders">,
  context: OperatorRequest,
): string {
  const name = OPERATOR_USER_HEADER.toLowerCase();
  const value = singleHeader(request, name, "invalid_user");
  if (value === undefined) return context.user;
  if (!context.operator) {
    throw new ThreadkeepError(
      "operator_only",
      `Only an operator key may open another user (${OPERATOR_USER_HEADER}); this key sees its own user only`,
    );
  }
  if (!context.endUsers) {
    throw new ThreadkeepError(
      "invalid_request",
      `${OPERATOR_USER_HEADER} names an end user, and this server has none: start it with --user-header or --user-jwt-secret`,
    );
  }
  if (context.user !== context.tenant) {
    throw new ThreadkeepError(
      "invalid_request",
      `${OPERATOR_USER_HEADER} and a gateway's end user on one request: send one of them`,
    );
  }
  return endUserId(context.tenant, checkEndUser(utf8(value, OPERATOR_USER_HEADER), OPERATOR_USER_HEADER));
}

function createTokenVerifier(options: UserJwtOptions): (token: string) => Promise<string> {
  const secret = options.secret.trim();
  if (!secret) throw new ThreadkeepError("invalid_request", "The user token secret is empty");
  const key: KeyObject = createSecretKey(Buffer.from(secret, "utf8"));
  const issuer = options.issuer ?? DEFAULT_USER_JWT_ISSUER;
  const header = options.header ?? DEFAULT_USER_JWT_HEADER;
  return async (token) => {
    let sub: unknown;
    try {
      const { payload } = await jwtVerify(token.trim(), key, {
        algorithms: ["HS256"],
        issuer,
        requiredClaims: ["exp", "sub"],
        clockTolerance: CLOCK_TOLERANCE_S,
      });
      sub = payload.sub;
    } catch (error) {
      throw new ThreadkeepError("invalid_user_token", `${header}: ${tokenProblem(error)}`, { cause: error });
    }
    if (typeof sub !== "string") throw new ThreadkeepError("invalid_user_token", `${header}: "sub" is not a string`);
    try {
      return checkEndUser(sub, `${header} "sub"`);
    } catch (error) {
      throw new ThreadkeepError("invalid_user_token", (error as Error).message, { cause: error });
    }
  };
}

/** What was wrong with a token, in words an operator can act on (never the token itself). */
function tokenProblem(error: unknown): string {
  if (error instanceof joseErrors.JWTExpired) return "the token has expired";
  if (error instanceof joseErrors.JWSSignatureVerificationFailed)
    return "the signature does not match the configured secret";
  if (error instanceof joseErrors.JOSEAlgNotAllowed) return "only HS256 tokens are accepted";
  if (error instanceof joseErrors.JWTClaimValidationFailed) return `${error.message} (claim "${error.claim}")`;
  return "not a valid signed token";
}

/**
 * An end user's id as sent: one value, valid UTF-8, 1 to {@link MAX_END_USER_LENGTH} characters, no
 * control characters.
 * @throws ThreadkeepError `invalid_user`
 */
export function checkEndUser(value: string, source: string): string {
  if (value.length === 0) throw new ThreadkeepError("invalid_user", `${source} is empty`);
  if ([...value].length > MAX_END_USER_LENGTH) {
    throw new ThreadkeepError("invalid_user", `${source} is longer than ${MAX_END_USER_LENGTH} characters`);
  }
  // C0 and C1 controls, and the separators of lines: an id is printed in logs and listings.
  if (/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/.test(value)) {
    throw new ThreadkeepError("invalid_user", `${source} contains control characters`);
  }
  return value;
}

const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true });

/** Node hands header values over byte for byte as latin1; the bytes are UTF-8 text or refused. */
function utf8(value: string, source: string): string {
  try {
    return STRICT_UTF8.decode(Buffer.from(value, "latin1"));
  } catch {
    throw new ThreadkeepError("invalid_user", `${source} is not valid UTF-8`);
  }
}

/** A header sent once, or undefined; sent twice is refused (a proxy that appends would otherwise blend two names). */
function singleHeader(
  request: Pick<IncomingMessage, "headers" | "rawHeaders">,
  name: string,
  code: "invalid_user" | "invalid_user_token",
): string | undefined {
  const value = request.headers[name];
  if (value === undefined) return undefined;
  let count = 0;
  for (let i = 0; i < request.rawHeaders.length; i += 2) if (request.rawHeaders[i].toLowerCase() === name) count++;
  if (count > 1 || Array.isArray(value)) throw new ThreadkeepError(code, `The ${name} header was sent ${count} times`);
  return value;
}

function headerName(name: string, option: string): string {
  const lower = name.trim().toLowerCase();
  if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(lower)) {
    throw new ThreadkeepError("invalid_request", `${option} "${name}" is not a valid header name`);
  }
  if (lower === "authorization")
    throw new ThreadkeepError("invalid_request", `${option} cannot be the Authorization header`);
  return lower;
}
