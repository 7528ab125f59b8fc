/**
 * The environment of every process the executor starts (bash calls, `process.start`, MCP
 * servers, helpers): explicit, in the manner of OpenSSH's `sshd`, which gives a session a small
 * fixed set of variables rather than its own environment.
 *
 * A child gets, in this order:
 * 1. from the executor's own environment, only the variables named by the allowlist
 *    ({@linkcode DEFAULT_KEPT_VARIABLES} unless `defaults: false`, plus `keep`);
 *    `PATH`, `HOME`, `USER` and `LOGNAME` are filled in when the executor has none;
 * 2. `set`, the same for every child;
 * 3. what the call asks for (a bash call's `env`, `process.start`'s `env`, an MCP server's
 *    configured `env`, the session's Git credential helper).
 *
 * Whatever the policy says, a variable is withheld when its name matches `drop` or
 * {@linkcode ALWAYS_WITHHELD} (the executor's own credential variables), or when its value
 * contains a secret the executor holds (its credential, its tokens, Git passwords).
 */
import { loginUser } from "./login-user.node.ts";
import { InvalidParamsError } from "../../protocol/generated/errors.ts";
import { echoed } from "../../protocol/issues.ts";

/** Options of a {@linkcode ChildEnvironment}. */
export interface ChildEnvironmentOptions {
  /**
   * Variables of the executor's environment passed on besides the defaults: names, or prefixes
   * ending in `*` (`"LC_*"`, `"GIT_*"`); `"*"` passes every variable (the withheld ones aside).
   */
  keep?: readonly string[];
  /**
   * Variables never passed, from any source (the executor's environment, `set`, or a call's own
   * `env`): names, or prefixes ending in `*`.
   */
  drop?: readonly string[];
  /** Variables set in every child (a call's own `env` goes on top). */
  set?: Readonly<Record<string, string>>;
  /** Start from {@linkcode DEFAULT_KEPT_VARIABLES} (default) or only from `keep`. */
  defaults?: boolean;
  /** The environment variables are taken from. Default: the executor's own, at start. */
  from?: Readonly<Record<string, string | undefined>>;
}

/** What the policy is told about the executor's secrets. */
export interface ChildEnvironmentGuard {
  /** Whether `value` contains a secret the executor holds. */
  containsSecret(value: string): boolean;
  /** Called with the name (never the value) of each variable withheld from a child. */
  onWithheld?(name: string, why: "dropped" | "secret"): void;
}

/** The variables a child gets from the executor's environment by default. */
export const DEFAULT_KEPT_VARIABLES: readonly string[] = process.platform === "win32"
  ? [
    "PATH",
    "PATHEXT",
    "SYSTEMROOT",
    "SYSTEMDRIVE",
    "WINDIR",
    "COMSPEC",
    "TEMP",
    "TMP",
    "USERNAME",
    "USERPROFILE",
    "HOMEDRIVE",
    "HOMEPATH",
    "APPDATA",
    "LOCALAPPDATA",
    "PROGRAMDATA",
    "PROGRAMFILES",
    "PROGRAMFILES(X86)",
    "COMMONPROGRAMFILES",
    "NUMBER_OF_PROCESSORS",
    "PROCESSOR_ARCHITECTURE",
    "OS",
    "LANG",
    "TZ",
  ]
  : [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "TZ",
    "TMPDIR",
  ];

/**
 * Variables no child ever gets: where the executor reads its credential from (the `*_FILE`
 * forms name a file the credential sits in).
 */
export const ALWAYS_WITHHELD: readonly string[] = [
  "BMA_ENVIRONMENT_KEY",
  "BMA_MACHINE_TOKEN",
  "BMA_ENVIRONMENT_KEY_FILE",
  "BMA_MACHINE_TOKEN_FILE",
];

/**
 * The first layer of every child that is not a terminal's shell. bash started with `SHLVL` unset
 * or 0 and a socket on stdin takes itself for a remote shell daemon's child and runs
 * `~/.bashrc`, even for `bash -c` (Node's, Deno's and Bun's stdin pipes are socket pairs); a
 * shell level of 1, as a command started from a shell has, turns that guess off. A call's own
 * `SHLVL` still wins. See docs/machine.md, "Shell start-up files".
 */
export const NON_INTERACTIVE_LAYER: Readonly<Record<string, string>> = { SHLVL: "1" };

/** `PATH` for a child when the executor has none (as `sshd` does). */
const STANDARD_PATH = "/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin";

const caseInsensitive = process.platform === "win32";

/** Matches names against a list of names and `PREFIX*` patterns. */
class NameSet {
  readonly #exact = new Set<string>();
  readonly #prefixes: string[] = [];
  #all = false;

  constructor(patterns: readonly string[]) {
    for (const raw of patterns) {
      const pattern = caseInsensitive ? raw.toUpperCase() : raw;
      if (pattern === "*") this.#all = true;
      else if (pattern.endsWith("*")) this.#prefixes.push(pattern.slice(0, -1));
      else if (pattern) this.#exact.add(pattern);
    }
  }

  has(rawName: string): boolean {
    if (this.#all) return true;
    const name = caseInsensitive ? rawName.toUpperCase() : rawName;
    if (this.#exact.has(name)) return true;
    for (const prefix of this.#prefixes) if (name.startsWith(prefix)) return true;
    return false;
  }
}

/** A child process environment policy: see the module comment. */
export class ChildEnvironment {
  readonly #inherited: Record<string, string>;
  readonly #set: Record<string, string>;
  readonly #drop: NameSet;
  readonly #guard: ChildEnvironmentGuard;

  constructor(options: ChildEnvironmentOptions = {}, guard: ChildEnvironmentGuard) {
    this.#guard = guard;
    this.#drop = new NameSet([...ALWAYS_WITHHELD, ...(options.drop ?? [])]);
    const allow = new NameSet([
      ...(options.defaults === false ? [] : DEFAULT_KEPT_VARIABLES),
      ...(options.keep ?? []),
    ]);
    const from = options.from ?? process.env;
    const inherited: Record<string, string> = {};
    for (const [name, value] of Object.entries(from)) {
      if (value !== undefined && allow.has(name)) inherited[name] = value;
    }
    if (options.defaults !== false && process.platform !== "win32") {
      inherited.PATH ??= STANDARD_PATH;
      const user = loginUser();
      if (user) {
        inherited.HOME ??= user.homedir;
        inherited.USER ??= user.username;
        inherited.LOGNAME ??= user.username;
      }
    }
    this.#inherited = inherited;
    this.#set = { ...options.set };
  }

  /**
   * The environment of one child: the policy's variables, then `extra`, then the guard. A name
   * in `extra` that no environment can hold (empty, or with "=": the child would get another
   * variable) is refused with -32602 (`field` `/env`).
   */
  build(...extra: (Readonly<Record<string, string>> | undefined)[]): Record<string, string> {
    const merged: Record<string, string> = { ...this.#inherited, ...this.#set };
    for (const layer of extra) {
      if (!layer) continue;
      for (const name of Object.keys(layer)) {
        if (name === "" || name.includes("=")) {
          throw new InvalidParamsError(
            `env: a variable's name cannot be empty or hold "=": ${JSON.stringify(echoed(name))}`,
            { field: "/env" },
          );
        }
      }
      Object.assign(merged, layer);
    }
    const env: Record<string, string> = {};
    for (const [name, value] of Object.entries(merged)) {
      if (typeof value !== "string") continue;
      if (this.#drop.has(name)) {
        this.#guard.onWithheld?.(name, "dropped");
      } else if (this.#guard.containsSecret(value) || this.#guard.containsSecret(name)) {
        this.#guard.onWithheld?.(name, "secret");
      } else {
        env[name] = value;
      }
    }
    return env;
  }
}
