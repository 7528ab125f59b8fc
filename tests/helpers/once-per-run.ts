/**
 * Work that gives the same answer in every stage of one test run (the package packed from the
 * sources, `tsc` over the same files), done by the first stage that needs it and read by the
 * others. The runner (`scripts/test.ts`) names a folder its stages share in
 * `BMA_TEST_RUN_SHARED`; a test run without it (`node --test`, `deno test`, `bun test` on a file)
 * does the work itself.
 *
 * The first stage claims a name by making its folder, works in it, and writes the answer there;
 * the others wait for that answer. When the one that claimed it fails, or is killed, or takes
 * longer than `waitMs`, a waiting stage does the work itself in a folder of its own: a stage
 * never fails because another one did.
 *
 * Usable from Node, Deno and Bun (node:fs).
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const SHARED = process.env.BMA_TEST_RUN_SHARED;
const POLL_MS = 200;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The answer of `work` (JSON-serialisable) for `name`, computed once per test run. `work` gets an
 * empty folder to work in, which outlives it (the answer may name files in it) until the run
 * ends; without a shared folder, a new one in the temp directory.
 */
export async function oncePerRun<T>(
  name: string,
  work: (dir: string) => Promise<T>,
  waitMs = 240_000,
): Promise<T> {
  if (!SHARED) return await work(mkdtempSync(join(tmpdir(), `bma-${name}-`)));
  const dir = join(SHARED, name);
  const answer = join(dir, "answer.json");
  const failed = join(dir, "failed");
  mkdirSync(SHARED, { recursive: true });
  let claimed = true;
  try {
    mkdirSync(dir);
  } catch {
    claimed = false;
  }
  if (claimed) {
    try {
      const value = await work(dir);
      writeFileSync(`${answer}.part`, JSON.stringify({ value }));
      renameSync(`${answer}.part`, answer);
      return value;
    } catch (error) {
      writeFileSync(failed, String(error));
      throw error;
    }
  }
  for (const until = Date.now() + waitMs; Date.now() < until;) {
    if (existsSync(answer)) return JSON.parse(readFileSync(answer, "utf8")).value as T;
    if (existsSync(failed)) break;
    await sleep(POLL_MS);
  }
  return await work(mkdtempSync(join(SHARED, `${name}-own-`)));
}
