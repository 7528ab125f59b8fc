/**
 * The work directory is checked once, when the machine is served: one that the tools could not
 * use (missing, not a directory, not readable and searchable) is refused at once with a
 * {@linkcode WorkdirError}, instead of failing every later call with `ENOENT`. It is not
 * created: a typo would otherwise become a new, empty work directory. `bma-executor --workdir`
 * and `serveMachine` share this rule.
 */
import { accessSync, constants, statSync } from "node:fs";
import { ExecutorConfigError } from "../errors.ts";

/** The work directory given to `serveMachine` cannot be used by the tools. */
export class WorkdirError extends ExecutorConfigError {
  /** The directory as given. */
  readonly path: string;
  /**
   * Why: `ENOENT` (it does not exist), `ENOTDIR` (not a directory), `EACCES` (this user cannot
   * read and search it), or the errno of another failure to look at it.
   */
  readonly code: string;
  /** What is wrong with it, after its path ("does not exist: create it first (…)"). */
  readonly problem: string;
  /** The directory, why (`code`) and what is wrong with it (`problem`); `cause` the failure. */
  constructor(path: string, code: string, problem: string, options?: { cause?: unknown }) {
    super(`the workdir ${path} ${problem}`);
    if (options?.cause !== undefined) this.cause = options.cause;
    this.name = "WorkdirError";
    this.path = path;
    this.code = code;
    this.problem = problem;
  }
}

/**
 * Throws {@linkcode WorkdirError} unless `dir` is a directory this user can read and search.
 * Answers whether it can also write there (a read-only work directory is allowed).
 */
export function checkWorkdir(dir: string): { writable: boolean } {
  let isDirectory: boolean;
  try {
    isDirectory = statSync(dir).isDirectory();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "EIO";
    if (code === "ENOENT") {
      throw new WorkdirError(
        dir,
        code,
        `does not exist: create it first (mkdir -p ${JSON.stringify(dir)})`,
        { cause: error },
      );
    }
    throw new WorkdirError(dir, code, `cannot be used: ${(error as Error).message}`, {
      cause: error,
    });
  }
  if (!isDirectory) throw new WorkdirError(dir, "ENOTDIR", "is not a directory");
  try {
    accessSync(dir, constants.R_OK | constants.X_OK);
  } catch (error) {
    throw new WorkdirError(dir, "EACCES", "cannot be read by this user", { cause: error });
  }
  try {
    accessSync(dir, constants.W_OK);
    return { writable: true };
  } catch {
    return { writable: false };
  }
}
