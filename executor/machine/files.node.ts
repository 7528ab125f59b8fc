/**
 * The file tools (`read`, `write`, `edit`, `glob`, `grep`), confined to the session workdir.
 * A failure the caller can act on (missing file, no match, a path outside the workdir) is a
 * {@linkcode FileToolError}: the executor reports it as a tool error (`is_error: true`).
 */
import { mkdir, open, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { dirname, join, relative, sep } from "node:path";
import type {
  EditInput,
  EditResult,
  GlobInput,
  GlobResult,
  GrepInput,
  GrepResult,
  ReadInput,
  ReadResult,
  WriteInput,
  WriteResult,
} from "../../protocol/generated/contract.ts";
import { PathOutsideWorkdirError, type Workdir } from "./workdir.node.ts";

/** A tool-level failure: reported to the model as `is_error: true`, not as a failed call. */
export class FileToolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "FileToolError";
  }
}

const DEFAULT_READ_LINES = 2_000;
const MAX_GLOB_RESULTS = 1_000;
const DEFAULT_GREP_RESULTS = 500;
const MAX_GREP_FILE_BYTES = 10 * 1024 * 1024;
const SKIPPED_DIRECTORIES = new Set([".git", "node_modules"]);

async function resolveIn(workdir: Workdir, path: string | undefined): Promise<string> {
  try {
    return await workdir.resolve(path ?? ".");
  } catch (error) {
    if (error instanceof PathOutsideWorkdirError) throw new FileToolError(error.message);
    throw error;
  }
}

function describeMissing(error: unknown, path: string): never {
  const code = (error as { code?: string }).code;
  if (code === "ENOENT") throw new FileToolError(`no such file: ${path}`);
  if (code === "EISDIR") throw new FileToolError(`is a directory: ${path}`);
  if (code === "EACCES") throw new FileToolError(`permission denied: ${path}`);
  throw error;
}

/** `read`: lines `offset`.. (1-based) of a text file, at most `limit` of them. */
export async function readTool(input: ReadInput, workdir: Workdir): Promise<ReadResult> {
  const path = await resolveIn(workdir, input.path);
  const text = await readFile(path, "utf8").catch((e) => describeMissing(e, input.path));
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  const start = Math.max(1, input.offset ?? 1);
  const limit = input.limit ?? DEFAULT_READ_LINES;
  const slice = lines.slice(start - 1, start - 1 + limit);
  return {
    content: slice.join("\n"),
    start_line: start,
    total_lines: lines.length,
    ...(start - 1 + limit < lines.length ? { truncated: true } : {}),
  };
}

/** `write`: replaces (or creates) a file, creating its directories. */
export async function writeTool(input: WriteInput, workdir: Workdir): Promise<WriteResult> {
  const path = await resolveIn(workdir, input.path);
  const existed = await stat(path).then(() => true, () => false);
  await mkdir(dirname(path), { recursive: true });
  await resolveIn(workdir, input.path); // the directories just made may not lead outside
  const bytes = new TextEncoder().encode(input.content);
  await writeFile(path, bytes).catch((e) => describeMissing(e, input.path));
  return { path, bytes_written: bytes.byteLength, ...(existed ? {} : { created: true }) };
}

/** `edit`: replaces an exact string, which must occur once unless `replace_all`. */
export async function editTool(input: EditInput, workdir: Workdir): Promise<EditResult> {
  const path = await resolveIn(workdir, input.path);
  if (input.old_string === "") throw new FileToolError("old_string is empty");
  const text = await readFile(path, "utf8").catch((e) => describeMissing(e, input.path));
  const count = text.split(input.old_string).length - 1;
  if (count === 0) throw new FileToolError(`old_string not found in ${input.path}`);
  if (count > 1 && !input.replace_all) {
    throw new FileToolError(
      `old_string occurs ${count} times in ${input.path}; give more context or set replace_all`,
    );
  }
  const next = input.replace_all
    ? text.split(input.old_string).join(input.new_string)
    : text.replace(input.old_string, () => input.new_string);
  await writeFile(path, next, "utf8");
  return { path, replacements: input.replace_all ? count : 1 };
}

/** `glob`: files under `path` matching `pattern`, most recently modified first. */
export async function globTool(input: GlobInput, workdir: Workdir): Promise<GlobResult> {
  const base = await resolveIn(workdir, input.path);
  const matcher = globToRegExp(input.pattern);
  const found: { path: string; mtime: number }[] = [];
  for await (const file of walk(base)) {
    const rel = relative(base, file).split(sep).join("/");
    if (matcher.test(rel)) {
      found.push({
        path: rel,
        mtime: (await stat(file).catch(() => undefined))?.mtimeMs ?? 0,
      });
    }
  }
  found.sort((a, b) => b.mtime - a.mtime || a.path.localeCompare(b.path));
  return {
    files: found.slice(0, MAX_GLOB_RESULTS).map((f) => f.path),
    ...(found.length > MAX_GLOB_RESULTS ? { truncated: true } : {}),
  };
}

/** `grep`: lines matching a regular expression, in file order. */
export async function grepTool(input: GrepInput, workdir: Workdir): Promise<GrepResult> {
  const base = await resolveIn(workdir, input.path);
  let regex: RegExp;
  try {
    regex = new RegExp(input.pattern, input.case_insensitive ? "i" : "");
  } catch (error) {
    throw new FileToolError(`invalid pattern: ${(error as Error).message}`);
  }
  const filter = input.glob ? globToRegExp(input.glob) : undefined;
  const max = input.max_results ?? DEFAULT_GREP_RESULTS;
  const root = await workdir.realRoot();
  const matches: GrepResult["matches"] = [];
  const info = await stat(base).catch((e) => describeMissing(e, input.path ?? "."));
  const files = info.isFile() ? [base] : walk(base);
  for await (const file of files) {
    const rel = relative(base, file).split(sep).join("/");
    if (filter && !filter.test(rel) && !filter.test(rel.split("/").at(-1)!)) continue;
    const text = await readTextFile(file);
    if (text === undefined) continue;
    const lines = text.split("\n");
    for (let i = 0; i < lines.length; i++) {
      if (!regex.test(lines[i])) continue;
      if (matches.length === max) return { matches, truncated: true };
      matches.push({
        path: relative(root, file).split(sep).join("/"),
        line: i + 1,
        text: lines[i],
      });
    }
  }
  return { matches };
}

/** A text file's content, or undefined for a binary or very large file. */
async function readTextFile(path: string): Promise<string | undefined> {
  const handle = await open(path, "r").catch(() => undefined);
  if (!handle) return undefined;
  try {
    const { size } = await handle.stat();
    if (size > MAX_GREP_FILE_BYTES) return undefined;
    const bytes = new Uint8Array(size);
    await handle.read(bytes, 0, size, 0);
    if (bytes.subarray(0, 8192).includes(0)) return undefined;
    return new TextDecoder().decode(bytes);
  } finally {
    await handle.close();
  }
}

/** Regular files under `dir`; symlinked directories are not followed (they may lead outside). */
async function* walk(dir: string): AsyncGenerator<string> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  entries.sort((a, b) => a.name.localeCompare(b.name));
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!SKIPPED_DIRECTORIES.has(entry.name)) yield* walk(path);
    } else if (entry.isFile()) {
      yield path;
    }
  }
}

/**
 * A glob as a regular expression over `/`-separated relative paths: `**` any depth, `*` and `?`
 * within one segment, `{a,b}` alternatives, `[...]` classes. A pattern without `/` matches the
 * file name at any depth (`*.ts` finds `src/a.ts`), as agent tool sets do.
 */
export function globToRegExp(pattern: string): RegExp {
  const anyDepth = !pattern.includes("/");
  let out = "";
  let braces = 0;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "*") {
      if (pattern[i + 1] === "*") {
        const slash = pattern[i + 2] === "/";
        out += slash ? "(?:.*/)?" : ".*";
        i += slash ? 2 : 1;
      } else out += "[^/]*";
    } else if (c === "?") out += "[^/]";
    else if (c === "{") {
      braces++;
      out += "(?:";
    } else if (c === "}" && braces > 0) {
      braces--;
      out += ")";
    } else if (c === "," && braces > 0) out += "|";
    else if (c === "[") {
      const end = pattern.indexOf("]", i + 1);
      if (end < 0) out += "\\[";
      else {
        out += `[${pattern.slice(i + 1, end).replace(/^!/, "^").replace(/\\/g, "\\\\")}]`;
        i = end;
      }
    } else out += c.replace(/[.+^$()|\\]/g, "\\$&");
  }
  return new RegExp(`^${anyDepth ? "(?:.*/)?" : ""}${out}$`);
}
