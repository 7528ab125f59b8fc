/**
 * The SQLite store of each entry point on the runtime it runs on, as a user installs the
 * package: the packed tarball in a fresh project with the README's quick-start install block
 * (no `libsql`: it is an optional peer dependency). On this stage's runtime, `openSqliteStore`
 * from `/node` (which runs everywhere) and from the runtime's own entry point opens a file,
 * writes, and reads it back after a reopen: on Deno and Bun with their built-in driver, nothing
 * to install; on Node `/node` refuses, naming `npm install libsql`, until the README's
 * `npm i libsql` line ran. Then the README's store example runs as written.
 *
 * The repository's own node_modules has `libsql` (a devDependency): only a fresh project shows
 * what a user sees without it.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  commandsOf,
  markedBlock,
  newcomerPath,
  NPM_ENV,
  ok,
  readme,
  readmeProject,
  run,
  RUNTIME,
} from "../newcomer/fresh-project.ts";

const README = readme();

/** Opens a store at a new path, writes, reopens, reads; prints the outcome as one JSON line. */
const PROGRAM = (entry: string) => `
import { join } from "node:path";
import { openSqliteStore } from "bma-executor-sdk/${entry}";
const path = join(process.cwd(), "store-${entry}-" + Date.now() + ".db");
try {
  const store = await openSqliteStore(path);
  store.write([{ put: "greeting", value: "kept" }]);
  store.close();
  const again = await openSqliteStore(path);
  console.log(JSON.stringify({ value: again.get("greeting") }));
  again.close();
} catch (error) {
  console.log(JSON.stringify({ error: error.name, message: error.message }));
}
`;

/** The command that runs a JavaScript module on this stage's runtime. */
const RUN: Record<typeof RUNTIME, string[]> = {
  node: ["node"],
  deno: ["deno", "run", "-A"],
  bun: ["bun"],
};

describe(`the SQLite store of each entry point on ${RUNTIME}, in a fresh project`, {
  timeout: 240_000,
}, () => {
  let dir = "";
  let app = "";
  let PATH = "";
  const env = () => ({ ...NPM_ENV, PATH });

  async function open(
    entry: string,
  ): Promise<{ value?: unknown; error?: string; message?: string }> {
    const file = join(app, `open-${entry}.mjs`);
    writeFileSync(file, PROGRAM(entry));
    const [command, ...args] = RUN[RUNTIME];
    const result = await run(command, [...args, file], { cwd: app, env: env(), timeoutMs: 60_000 });
    assert.equal(result.code, 0, `${result.stdout}\n${result.stderr}`);
    return JSON.parse(result.stdout.trim().split("\n").pop()!);
  }

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "bma-store-entry-"));
    app = join(dir, "app");
    PATH = newcomerPath(dir);
    await readmeProject(dir, app);
  });

  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const entries = RUNTIME === "node" ? ["node"] : ["node", RUNTIME];
  for (const entry of entries) {
    if (RUNTIME === "node") {
      it("/node on Node without libsql refuses, naming the package to install", async () => {
        const outcome = await open(entry);
        assert.equal(outcome.error, "SqliteDriverUnavailableError", JSON.stringify(outcome));
        assert.match(outcome.message!, /libsql/);
        assert.match(outcome.message!, /npm install libsql/);
      });
    } else {
      it(`/${entry} on ${RUNTIME} opens a file with the built-in driver, nothing installed`, async () => {
        assert.deepEqual(await open(entry), { value: "kept" });
      });
    }
  }

  it(`runs the README's store example as written on ${RUNTIME}`, async () => {
    if (RUNTIME === "node") {
      // The README's install line for the SQLite store on Node.
      const line = README.split("\n").find((text) => /^npm i libsql\b/.test(text));
      assert.ok(line, "the README has an `npm i libsql` line");
      const [words] = commandsOf(line);
      await ok(words[0], words.slice(1), { cwd: app, env: env(), timeoutMs: 120_000 });
      assert.deepEqual(await open("node"), { value: "kept" });
    }
    const example = markedBlock(README, "store");
    assert.equal(example.language, "ts");
    assert.match(example.code, /openSqliteStore/);
    writeFileSync(join(app, "store.mts"), example.code);
    const command = RUNTIME === "node" ? ["npx", "tsx"] : RUN[RUNTIME];
    const result = await run(command[0], [...command.slice(1), "store.mts"], {
      cwd: app,
      env: env(),
      timeoutMs: 60_000,
    });
    assert.equal(result.code, 0, `${result.stdout}\n${result.stderr}`);
    assert.ok(result.stdout.split("\n").includes("ran make"), result.stdout);
  });
});
