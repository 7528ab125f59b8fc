/**
 * What a new user starts from: the package as `npm pack` makes it, and an empty directory.
 *
 * `packTarball` packs the package as `npm pack` does for a publisher (its `prepack` builds
 * dist/), once per test run. `readmeProject` is a project in which the README's install block
 * ran, installed once per test run and copied for each stage. `newcomerPath` is a `PATH` with
 * `node`, `npm`, `npx`, `deno` and `bun` and the system's tools, and nothing of the repository's
 * node_modules, so that a command the README forgot to install is not found in the repository's.
 * Every child is bounded by a timeout and killed past it; its stdin is /dev/null (a bash with a
 * socket for stdin reads the user's ~/.bashrc).
 *
 * Usable from Node, Deno and Bun (node:child_process, node:fs).
 */
import { spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync, symlinkSync } from "node:fs";
import { basename, delimiter, join } from "node:path";

import { oncePerRun } from "../helpers/once-per-run.ts";
import { ROOT, RUNTIME } from "../helpers/runtime-command.ts";

export { ROOT, RUNTIME };

/** A finished child. */
export interface Run {
  readonly code: number | null;
  readonly signal: string | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `command` with `args` in `cwd`, killed after `timeoutMs`. */
export function run(
  command: string,
  args: readonly string[],
  options: { cwd: string; env?: Record<string, string | undefined>; timeoutMs: number },
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, NO_COLOR: "1", ...options.env } as Record<string, string>,
    });
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (chunk) => (stdout += chunk));
    child.stderr!.on("data", (chunk) => (stderr += chunk));
    const timer = setTimeout(() => {
      stderr += `\n[killed after ${options.timeoutMs} ms]`;
      child.kill("SIGKILL");
    }, options.timeoutMs);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** `run`, asserting exit 0; its stdout. */
export async function ok(
  command: string,
  args: readonly string[],
  options: { cwd: string; env?: Record<string, string | undefined>; timeoutMs: number },
): Promise<string> {
  const result = await run(command, args, options);
  if (result.code !== 0) {
    throw new Error(
      `${command} ${args.join(" ")} exited ${
        result.code ?? result.signal
      }\n${result.stdout}\n${result.stderr}`,
    );
  }
  return result.stdout;
}

/** The npm settings of an install from the shared cache: offline when it can be, and quiet. */
export const NPM_ENV: Record<string, string> = {
  npm_config_prefer_offline: "true",
  npm_config_audit: "false",
  npm_config_fund: "false",
  npm_config_update_notifier: "false",
};

/** The packed tarball and the paths it holds (package-relative, as `npm pack --json` lists). */
export interface Packed {
  readonly tarball: string;
  readonly files: readonly string[];
}

/**
 * `npm pack` of the repository, as a publisher runs it (its `prepack` builds dist/ with
 * `npm run build`), copied into `dir`. Packed once per test run (`oncePerRun`: the build is a
 * whole `tsc` of the SDK, the same for every stage that asks), so that one build writes dist/ in
 * a run: the publication test and the newcomers' tests read the same tarball.
 */
export async function packTarball(dir: string): Promise<Packed> {
  const packed = await oncePerRun("packed-tarball", async (work) => {
    const [{ filename, files }] = JSON.parse(
      await ok("npm", ["pack", "--json", "--pack-destination", work], {
        cwd: ROOT,
        env: NPM_ENV,
        timeoutMs: 180_000,
      }),
    );
    return {
      tarball: join(work, filename),
      files: files.map((f: { path: string }) => f.path),
    };
  });
  const tarball = join(dir, basename(packed.tarball));
  copyFileSync(packed.tarball, tarball);
  return { tarball, files: packed.files };
}

/**
 * A project in which the README's install block (`<!-- newcomer: install -->`: `npm init -y`,
 * then the install line with the packed tarball in place of the package's name) ran in an empty
 * directory, copied into `app` (made by the copy) beside the tarball in `dir`. The install runs
 * once per test run (`oncePerRun`): the quick start and the SQLite entry points on every runtime
 * asked npm for the same project six times over. The tarball lies beside the project in the
 * install's folder as in `dir`, so the copy's `file:../…tgz` still resolves when npm runs in it.
 */
export async function readmeProject(dir: string, app: string): Promise<void> {
  await packTarball(dir);
  const installed = await oncePerRun("readme-project", async (work) => {
    const { tarball } = await packTarball(work);
    const project = join(work, "app");
    mkdirSync(project);
    const env = { ...NPM_ENV, PATH: newcomerPath(work) };
    for (const words of commandsOf(markedBlock(readme(), "install").code)) {
      const argv = words.map((word) => (word === "bma-executor-sdk" ? tarball : word));
      await ok(argv[0], argv.slice(1), { cwd: project, env, timeoutMs: 120_000 });
    }
    return project;
  });
  // `cp -a`: node_modules/.bin's relative links stay links.
  await ok("cp", ["-a", installed, app], { cwd: dir, timeoutMs: 60_000 });
}

/** Where `name` is on the `PATH` this process has (or the repository's node_modules/.bin). */
function which(name: string): string {
  const dirs = [...(process.env.PATH ?? "").split(delimiter), join(ROOT, "node_modules/.bin")];
  for (const dir of dirs) {
    const path = join(dir, name);
    if (dir && existsSync(path) && statSync(path).isFile()) return path;
  }
  throw new Error(`${name} is not on the PATH`);
}

/**
 * A directory of `dir` with `node`, `npm`, `npx`, `deno` and `bun`, followed by the system's
 * directories: a `PATH` as a user who installed the runtimes has.
 */
export function newcomerPath(dir: string): string {
  const bin = join(dir, "bin");
  mkdirSync(bin, { recursive: true });
  for (const name of ["node", "npm", "npx"]) symlinkSync(which(name), join(bin, name));
  // The runtimes the repository installs (package.json's devDependencies).
  for (const name of ["deno", "bun"]) {
    symlinkSync(join(ROOT, "node_modules/.bin", name), join(bin, name));
  }
  return [bin, "/usr/local/bin", "/usr/bin", "/bin"].filter((d) => existsSync(d)).join(delimiter);
}

/**
 * The commands of a shell block, as a user types them: one per line (or joined by `&&`), words
 * split at spaces, `# comments` dropped. Anything a shell would interpret otherwise is refused,
 * so that the block runs the same with or without one.
 */
export function commandsOf(block: string): string[][] {
  const commands: string[][] = [];
  for (const raw of block.split("\n")) {
    const line = raw.replace(/(^|\s)#.*$/, "").trim();
    if (!line) continue;
    for (const part of line.split("&&")) {
      const words = part.trim().split(/\s+/);
      if (/[|;<>$`'"\\*?(){}]/.test(part)) throw new Error(`not a plain command: ${part}`);
      if (words[0]) commands.push(words);
    }
  }
  return commands;
}

/**
 * The fenced block after `<!-- newcomer: NAME -->` in `markdown` (blank lines and other
 * markers may come between), with its language.
 */
export function markedBlock(markdown: string, name: string): { language: string; code: string } {
  const lines = markdown.split("\n");
  const at = lines.findIndex((line) => line.trim() === `<!-- newcomer: ${name} -->`);
  if (at < 0) throw new Error(`no <!-- newcomer: ${name} --> marker`);
  let i = at + 1;
  while (i < lines.length && (lines[i].trim() === "" || /^<!--.*-->$/.test(lines[i].trim()))) i++;
  const fence = /^```(\w*)$/.exec(lines[i] ?? "");
  if (!fence) throw new Error(`<!-- newcomer: ${name} --> is not followed by a fenced block`);
  const end = lines.findIndex((line, j) => j > i && line.trim() === "```");
  return { language: fence[1], code: lines.slice(i + 1, end).join("\n") + "\n" };
}

/**
 * The Markdown table after `<!-- newcomer: NAME -->`: its rows (the header and the separator
 * left out), each as its cells.
 */
export function markedTable(markdown: string, name: string): string[][] {
  const lines = markdown.split("\n");
  const at = lines.findIndex((line) => line.trim() === `<!-- newcomer: ${name} -->`);
  if (at < 0) throw new Error(`no <!-- newcomer: ${name} --> marker`);
  let i = at + 1;
  while (i < lines.length && lines[i].trim() === "") i++;
  const rows: string[][] = [];
  for (; i < lines.length && lines[i].startsWith("|"); i++) {
    rows.push(lines[i].split("|").slice(1, -1).map((cell) => cell.trim()));
  }
  if (rows.length < 2) throw new Error(`<!-- newcomer: ${name} --> is not followed by a table`);
  return rows.slice(2);
}

/** README.md as the package ships it. */
export function readme(): string {
  return readFileSync(join(ROOT, "README.md"), "utf8");
}
