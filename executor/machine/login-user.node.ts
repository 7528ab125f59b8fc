/**
 * The user the executor runs as: name, home directory and login shell, for the defaults of its
 * children's environment and for a terminal that names no program.
 *
 * The account database is read first, by uid: Bun's `os.userInfo()` answers from the
 * environment (`USER`, `HOME`, `SHELL`), and a service manager or CI runner that starts the
 * executor without them would give children `USER=unknown` and terminals a shell called
 * `unknown`. Where `/etc/passwd` has no entry (macOS keeps its users elsewhere, a container may
 * run an arbitrary uid), `os.userInfo()` is asked, and an answer that is not a path is no shell.
 */
import { readFileSync } from "node:fs";
import { userInfo } from "node:os";
import { isAbsolute } from "node:path";

/** What the executor knows of the user it runs as. */
export interface LoginUser {
  username: string;
  homedir: string;
  /** The login shell's path; absent when none is known. */
  shell?: string;
}

/** The `/etc/passwd` entry of `uid` (the file's text given), if it has one. */
export function passwdEntry(passwd: string, uid: number): LoginUser | undefined {
  for (const line of passwd.split("\n")) {
    // name:password:uid:gid:gecos:home:shell
    const fields = line.split(":");
    if (fields.length < 7 || line.startsWith("#") || Number(fields[2]) !== uid) continue;
    if (fields[2].trim() === "" || !fields[0] || !fields[5]) continue;
    const shell = fields[6].trim();
    return {
      username: fields[0],
      homedir: fields[5],
      ...(isAbsolute(shell) ? { shell } : {}),
    };
  }
  return undefined;
}

/** The user this process runs as, or undefined when nothing says. */
export function loginUser(): LoginUser | undefined {
  const uid = process.getuid?.();
  if (uid !== undefined) {
    try {
      const entry = passwdEntry(readFileSync("/etc/passwd", "utf8"), uid);
      if (entry) return entry;
    } catch { /* no /etc/passwd, or not readable */ }
  }
  try {
    const info = userInfo();
    if (!info.username || !info.homedir) return undefined;
    return {
      username: info.username,
      homedir: info.homedir,
      ...(info.shell && isAbsolute(info.shell) ? { shell: info.shell } : {}),
    };
  } catch {
    return undefined; // no account entry at all (a container's arbitrary uid)
  }
}
