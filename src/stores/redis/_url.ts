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
}

const CLUSTER = /^(rediss?)\+cluster:\/\/(.*)$/is;

function invalid(message: string): ThreadkeepError {
  return new ThreadkeepError("invalid_store_url", message);
}

/** Refuses what the Redis client would ignore (`?…`, `#…`) rather than connecting without it. */
function checkNoParameters(search: string, hash: string): void {
  if (search.length > 1) {
    const names = [...new URLSearchParams(search)].map(([name]) => name).join(", ");
    throw invalid(`Redis store URLs take no parameters, got ?${names}`);
  }
  if (hash.length > 1) throw invalid("Redis store URLs take no #fragment");
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
 * `redis[s]+cluster://[[user]:password@]host[:port],host[:port]…[/]` (a Cluster has database 0 only).
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
    throw invalid(`Not a Redis URL scheme "${parsed.protocol}": use redis://, rediss://, redis+cluster:// or rediss+cluster://`);
  }
  checkNoParameters(parsed.search, parsed.hash);
  checkEncoding(parsed.username, parsed.password);
  const where = parsed.host || "localhost";
  if (parsed.pathname === "" || parsed.pathname === "/") return { where };
  const database = /^\/(\d{1,9})$/.exec(parsed.pathname);
  if (!database) throw invalid(`A Redis URL's path is a database number (e.g. /0), got "${parsed.pathname}"`);
  return { where, database: Number(database[1]) };
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
  checkNoParameters(tail.slice(path.length, hashAt < 0 ? undefined : hashAt), hashAt < 0 ? "" : tail.slice(hashAt));
  const at = authority.lastIndexOf("@");
  const auth = at < 0 ? undefined : authority.slice(0, at);
  const hosts = authority.slice(at + 1).split(",").map((host) => host.trim()).filter(Boolean);
  if (hosts.length === 0) throw invalid("A redis+cluster:// URL needs at least one node, e.g. redis+cluster://10.0.0.5:6379,10.0.0.6:6379");
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
  const [username, password] = auth === undefined ? [] : auth.includes(":") ? auth.split(/:(.*)/s, 2) : [undefined, auth];
  checkEncoding(username ?? "", password ?? "");
  return {
    cluster: {
      rootNodes,
      ...(username ? { username: decodeURIComponent(username) } : {}),
      ...(password ? { password: decodeURIComponent(password) } : {}),
    },
    where: `cluster ${rootNodes.map((node) => new URL(node.url).host).join(",")}`,
  };
}
