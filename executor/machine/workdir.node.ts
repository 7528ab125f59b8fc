/**
 * A session's working directory and the one rule every tool obeys: paths resolve inside it.
 * `..` segments and symlinks that lead outside are refused, checked on the real path.
 */
import { realpath } from "node:fs/promises";
import { dirname, isAbsolute, relative, resolve, sep } from "node:path";

/** A path resolved outside the workdir (directly, through `..`, or through a symlink). */
export class PathOutsideWorkdirError extends Error {
  /** The path as given. */
  readonly path: string;
  constructor(path: string) {
    super(`path is outside the workdir: ${path}`);
    this.name = "PathOutsideWorkdirError";
    this.path = path;
  }
}

/** The root every path of a session resolves in. */
export class Workdir {
  readonly root: string;
  #realRoot: Promise<string> | undefined;

  constructor(root: string) {
    this.root = resolve(root);
  }

  /** The root with symlinks resolved. */
  realRoot(): Promise<string> {
    return this.#realRoot ??= realpath(this.root);
  }

  /**
   * Resolves `path` (relative to the root, or absolute inside it) to an absolute real path inside
   * the root. For a path that does not exist yet, its nearest existing ancestor is checked.
   */
  async resolve(path: string = "."): Promise<string> {
    const root = await this.realRoot();
    const lexical = isAbsolute(path) ? resolve(path) : resolve(root, path);
    // Absolute paths may name the root by its unresolved spelling too.
    const candidate = isAbsolute(path) && inside(this.root, lexical)
      ? resolve(root, relative(this.root, lexical))
      : lexical;
    if (!inside(root, candidate)) throw new PathOutsideWorkdirError(path);
    const real = await realpathOfNearest(candidate);
    if (!inside(root, real)) throw new PathOutsideWorkdirError(path);
    return candidate;
  }

  /** `absolute` as shown to a tool's caller: relative to the root. */
  async display(absolute: string): Promise<string> {
    return relative(await this.realRoot(), absolute) || ".";
  }
}

function inside(root: string, path: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}

/** The real path of `path`, or of its nearest existing ancestor joined with the rest. */
async function realpathOfNearest(path: string): Promise<string> {
  let current = path;
  const rest: string[] = [];
  for (;;) {
    try {
      const real = await realpath(current);
      return rest.length ? resolve(real, ...rest.reverse()) : real;
    } catch (error) {
      if ((error as { code?: string }).code !== "ENOENT") throw error;
      const parent = dirname(current);
      if (parent === current) return path;
      rest.push(current.slice(parent.length + (parent.endsWith(sep) ? 0 : 1)));
      current = parent;
    }
  }
}
