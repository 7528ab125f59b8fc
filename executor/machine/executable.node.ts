/**
 * Finding a program as `execvp` will, before starting it: so that a missing one is an error of
 * the request that names it (`process.start`, `terminal.open`), not a message of the child.
 */
import { accessSync, constants, statSync } from "node:fs";
import { delimiter, isAbsolute, join, resolve } from "node:path";

/** Whether `path` is a file this process may execute. */
function runnable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/**
 * Where `execvp` finds `name`: a name with a slash is a path (relative to `cwd`), any other the
 * first runnable file of that name in the directories of `path` (default `/usr/bin:/bin`; an
 * empty entry is `cwd`). Undefined when there is none.
 */
export function findExecutable(
  name: string,
  path: string | undefined,
  cwd: string,
): string | undefined {
  if (name.includes("/")) {
    const file = isAbsolute(name) ? name : resolve(cwd, name);
    return runnable(file) ? file : undefined;
  }
  if (name === "") return undefined;
  for (const dir of (path ?? "/usr/bin:/bin").split(delimiter)) {
    const file = join(dir === "" ? cwd : resolve(cwd, dir), name);
    if (runnable(file)) return file;
  }
  return undefined;
}
