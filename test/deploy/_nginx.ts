/**
 * nginx of a test's own: the docs' `server` block inside a minimal configuration whose pid, log and
 * temporary paths all live in the test's directory, so it runs unprivileged and beside any other nginx.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const TEMP_PATHS = [
  "client_body_temp_path",
  "proxy_temp_path",
  "fastcgi_temp_path",
  "uwsgi_temp_path",
  "scgi_temp_path",
];

/** Starts `nginxBin` in the foreground with `server` (one or more blocks of the `http` context) under `dir`. */
export function startNginx(nginxBin: string, dir: string, server: string): ChildProcess {
  const temp = (name: string) => `${name} ${join(dir, name)};`;
  writeFileSync(
    join(dir, "nginx.conf"),
    `daemon off;\nmaster_process off;\npid ${join(dir, "nginx.pid")};\nerror_log ${join(dir, "error.log")} warn;\nevents {}\nhttp {\naccess_log off;\n${TEMP_PATHS.map(temp).join("\n")}\n${server}\n}\n`,
  );
  return spawn(nginxBin, ["-p", dir, "-c", join(dir, "nginx.conf")], { stdio: ["ignore", "ignore", "pipe"] });
}
