import { ThreadkeepError } from "../../core/errors.js";

/** The seed nodes and shared credentials of a Redis Cluster URL. */
export interface RedisClusterSeeds {
  rootNodes: { url: string }[];
  username?: string;
  password?: string;
}

/** A checked Redis store URL. */
export interface RedisUrl {
  /** Set for `redis+cluster://` and `rediss+cluster://`. */
  cluster?: RedisClusterSeeds;
  /** The database a single-server URL selects (`/N`), when it names one. */
  database?: number;
  /** Host and port only, for messages: the URL may carry a password. */
  where: string;
  /** `?wait=N`: replicas that acknowledge each write (see `waitReplicas`), when given. */
  waitReplicas?: number;
  /** `?wait_timeout=MS` (see `waitTimeoutMs`), when given. */
  waitTimeoutMs?: number;
  /** The URL the client connects with: the single-server URL without threadkeep's parameters. */
  clientUrl: string;
}

/** threadkeep's own parameters: the client would ignore any other, so they are refused. */
const PARAMETERS: Record<string, { key: "waitReplicas" | "waitTimeoutMs"; max: number; what: string }> = {
  wait: { key: "waitReplicas", max: 100, what: "a number of replicas (0-100)" },
  wait_timeout: { key: "waitTimeoutMs", max: 600_000, what: "a time in ms (1-600000)" },
};

const CLUSTER = /^(rediss?)\+cluster:\/\/(.*)$/is;

function invalid(message: string): ThreadkeepError {
  return new ThreadkeepError("invalid_store_url", message);
}

/**
 * Reads threadkeep's parameters (`wait`, `wait_timeout`), and refuses what the Redis client would
 * ignore (other `?…`, `#…`) rather than connecting without it.
 */
function readParameters(search: string, hash: string): Pick<RedisUrl, "waitReplicas" | "waitTimeoutMs"> {
  if (hash.length > 1) throw invalid("Redis store URLs take no #fragment");
  const read: Pick<RedisUrl, "waitReplicas" | "waitTimeoutMs"> = {};
  const params = [...new URLSearchParams(search)];
  const unknown = params.map(([name]) => name).filter((name) => !Object.hasOwn(PARAMETERS, name));
  if (unknown.length > 0) {
    throw invalid(
      `Redis store URLs take only the parameters ${Object.keys(PARAMETERS).join(", ")}, got ?${unknown.join(", ")}`,
    );
  }
  for (const [name, value] of params) {
    const { key, max, what } = PARAMETERS[name];
    if (read[key] !== undefined) throw invalid(`Redis URL parameter "${name}" is given twice`);
    const n = /^\d{1,9}$/.test(value) ? Number(value) : NaN;
    if (!(n <= max) || (key === "waitTimeoutMs" && n < 1))
      throw invalid(`Redis URL parameter ${name} takes ${what}, got "${value}"`);
    read[key] = n;
  }
  return read;
}

/** Refuses credentials the client could not decode when connecting. */
function checkEncoding(...parts: string[]): void {
  try {
    for (const part of parts) decodeURIComponent(part);
  } catch {
    throw invalid("The user name or password of a Redis URL is not valid percent-encoding (write % as %25, @ as %40)");
  }
}

/**
 * Checks a Redis store URL and reads what the store needs of it. Accepted:
 * `redis[s]://[[user][:password]@][host][:port][/db]` (db a number; the server decides which exist) and
 * `redis[s]+cluster://[[user]:password@]host[:port],host[:port]…[/]` (a Cluster has database 0 only),
 * each with the optional parameters `?wait=N&wait_timeout=MS`.
 * @throws ThreadkeepError `invalid_store_url` naming what is wrong (never echoing the password).
 */
export function parseRedisUrl(url: string): RedisUrl {
  const trimmed = url.trim();
  const cluster = CLUSTER.exec(trimmed);
  if (cluster) return parseCluster(cluster[1].toLowerCase(), cluster[2]);
  let parsed: URL;
  try {
    parsed = new URL(trimmed);
  } catch {
    throw invalid("Not a valid Redis URL: expected redis://[user:password@]host[:port][/db]");
  }
  if (parsed.protocol !== "redis:" && parsed.protocol !== "rediss:") {
    throw invalid(
      `Not a Redis URL scheme "${parsed.protocol}": use redis://, rediss://, redis+cluster:// or rediss+cluster://`,
    );
  }
  const wait = readParameters(parsed.search, parsed.hash);
  checkEncoding(parsed.username, parsed.password);
  const where = parsed.host || "localhost";
  // The client is given the URL as written, only without the query it would ignore.
  const queryAt = trimmed.search(/[?#]/);
  const common = { where, ...wait, clientUrl: queryAt < 0 ? trimmed : trimmed.slice(0, queryAt) };
  if (parsed.pathname === "" || parsed.pathname === "/") return common;
  const database = /^\/(\d{1,9})$/.exec(parsed.pathname);
  if (!database) throw invalid(`A Redis URL's path is a database number (e.g. /0), got "${parsed.pathname}"`);
  return { ...common, database: Number(database[1]) };
}

/** `rest` is what follows `…+cluster://`: `[auth@]host:port,host:port[/]`. */
function parseCluster(scheme: string, rest: string): RedisUrl {
  const end = rest.search(/[/?#]/);
  const authority = end < 0 ? rest : rest.slice(0, end);
  const tail = end < 0 ? "" : rest.slice(end);
  const path = /^[^?#]*/.exec(tail)![0];
  if (path !== "" && path !== "/") {
    throw invalid(`A Redis Cluster has one database (0), so a redis+cluster:// URL takes no /db path, got "${path}"`);
  }
  const hashAt = tail.indexOf("#");
  const wait = readParameters(
    tail.slice(path.length, hashAt < 0 ? undefined : hashAt),
    hashAt < 0 ? "" : tail.slice(hashAt),
  );
  const at = authority.lastIndexOf("@");
  const auth = at < 0 ? undefined : authority.slice(0, at);
  const hosts = authority
    .slice(at + 1)
    .split(",")
    .map((host) => host.trim())
    .filter(Boolean);
  if (hosts.length === 0)
    throw invalid("A redis+cluster:// URL needs at least one node, e.g. redis+cluster://10.0.0.5:6379,10.0.0.6:6379");
  const rootNodes = hosts.map((host) => {
    let node: URL | undefined;
    try {
      node = new URL(`${scheme}://${host}`);
    } catch {
      // Refused below.
    }
    if (!node || !node.hostname || node.host !== host.toLowerCase()) {
      throw invalid(`Not a host[:port] in a redis+cluster:// URL: "${host}"`);
    }
    return { url: `${scheme}://${node.host}` };
  });
  const [username, password] =
    auth === undefined ? [] : auth.includes(":") ? auth.split(/:(.*)/s, 2) : [undefined, auth];
  checkEncoding(username ?? "", password ?? "");
  return {
    cluster: {
      rootNodes,
      ...(username ? { username: decodeURIComponent(username) } : {}),
      ...(password ? { password: decodeURIComponent(password) } : {}),
    },
    where: `cluster ${rootNodes.map((node) => new URL(node.url).host).join(",")}`,
    ...wait,
    clientUrl: rootNodes[0].url,
  };
}
