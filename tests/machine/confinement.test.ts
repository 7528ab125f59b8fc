/**
 * Confinement under races: a separate racer process keeps swapping symlinks (and a directory for
 * a symlink) between a target inside the workdir and one outside it, while the harness drives
 * `read`, `write`, `grep`, `file.download` and `file.upload` through the real wire path. Not one
 * answer may carry the outside content, and the outside files must never change.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { spawn } from "node:child_process";
import {
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { Fixtures, machineSession } from "./files-fixture.ts";
import { runScript } from "../helpers/mcp-stdio-servers.ts";
import { printed } from "../helpers/runtime-command.ts";

const RACER = fileURLToPath(new URL("./symlink-racer.mjs", import.meta.url));
const OUTSIDE = "OUTSIDE-SECRET";
/** Rounds of calls at least; more run until the racer has swapped MIN_SWAPS times. */
const ROUNDS = 90;
const MAX_ROUNDS = 2_000;
const MIN_SWAPS = 2_000;

describe("confinement under symlink races", { timeout: 120_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  it(`${MIN_SWAPS}+ swaps racing read, write, grep, file.download and file.upload: zero escapes`, async () => {
    const { top, root, session, executor } = await machineSession(fx);
    const outsideDir = join(top, "outside-dir");
    mkdirSync(outsideDir);
    const outsideFile = join(top, "outside.txt");
    writeFileSync(outsideFile, `${OUTSIDE} file\n`);
    writeFileSync(join(outsideDir, "f.txt"), `${OUTSIDE} in a directory\n`);
    writeFileSync(join(root, "inside.txt"), "inside file\n");
    mkdirSync(join(root, "sub"));
    writeFileSync(join(root, "sub/f.txt"), "inside sub\n");
    mkdirSync(join(root, "swapdir"));
    writeFileSync(join(root, "swapdir/f.txt"), "inside swapdir\n");
    symlinkSync(outsideDir, join(root, ".spare"));
    symlinkSync("inside.txt", join(root, "link"));
    symlinkSync("sub", join(root, "dirlink"));
    const before = {
      file: statSync(outsideFile).mtimeMs,
      dir: statSync(join(outsideDir, "f.txt")).mtimeMs,
    };

    const { command, args } = runScript(RACER);
    const racer = spawn(command, [...args, root], {
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, OUTSIDE_FILE: outsideFile, OUTSIDE_DIR: outsideDir },
    });
    fx.defer(() => {
      if (racer.exitCode === null && racer.signalCode === null) racer.kill("SIGKILL");
    });
    let racerErrors = "";
    racer.stderr!.on("data", (chunk) => (racerErrors += chunk));
    // Listened for from the start: a racer that stopped early fails the test at once (its swaps
    // would stop counting, and the rounds would run on to MAX_ROUNDS).
    let ended: string | undefined;
    const exited = new Promise<void>((resolve) =>
      racer.once("close", (code, signal) => {
        ended = `the racer exited (${signal ?? code}): ${racerErrors.trim()}`;
        resolve();
      })
    );
    await printed(racer, "ready");
    let out = "";
    racer.stdout!.on("data", (chunk) => (out += chunk));
    const swapped = () => Number([...out.matchAll(/swaps (\d+)/g)].at(-1)?.[1] ?? 0);

    const escapes: string[] = [];
    const seen = { inside: 0, refused: 0 };
    const check = (what: string, text: string | undefined) => {
      if (text === undefined) return;
      if (text.includes(OUTSIDE)) escapes.push(`${what}: ${text}`);
      else if (text.includes("inside")) seen.inside++;
    };
    const tool = async (what: string, call: Promise<{ is_error: boolean; content: unknown }>) => {
      const result = await call;
      if (result.is_error) seen.refused++;
      check(what, JSON.stringify(result));
    };
    const request = async (what: string, call: Promise<unknown>) => {
      try {
        const result = await call as { content?: string };
        check(what, JSON.stringify(result));
        if (result.content) check(what, Buffer.from(result.content, "base64").toString());
      } catch {
        seen.refused++;
      }
    };
    const session_id = session.id;
    const upload = (path: string, text: string) =>
      executor.request("file.upload", {
        session_id,
        path,
        content: Buffer.from(text).toString("base64"),
      });
    for (let round = 0; round < ROUNDS || (swapped() < MIN_SWAPS && round < MAX_ROUNDS); round++) {
      const calls: Promise<void>[] = [];
      for (const path of ["link", "dirlink/f.txt", "swapdir/f.txt"]) {
        calls.push(
          tool(`read ${path}`, session.tools.read.call({ path })),
          tool(`write ${path}`, session.tools.write.call({ path, content: `inside w${round}\n` })),
          request(`download ${path}`, executor.request("file.download", { session_id, path })),
          request(`upload ${path}`, upload(path, `inside u${round}\n`)),
        );
      }
      calls.push(
        request("upload swapdir/new.txt", upload("swapdir/new.txt", "inside new\n")),
        tool(
          "edit link",
          session.tools.edit.call({ path: "link", old_string: "w", new_string: "e" }),
        ),
      );
      if (round % 10 === 0) {
        calls.push(tool("grep", session.tools.grep.call({ pattern: OUTSIDE })));
        calls.push(tool("glob", session.tools.glob.call({ pattern: "**/f.txt" })));
      }
      await Promise.all(calls);
      if (ended !== undefined) assert.fail(ended);
    }

    racer.stdin!.end();
    await exited;
    assert.equal(racer.exitCode, 0, ended);
    const swaps = swapped();

    assert.deepEqual(escapes, []);
    assert.ok(swaps >= MIN_SWAPS, `the racer swapped ${swaps} times`);
    assert.ok(seen.inside > 0, "links that point inside were followed during the race");
    assert.ok(seen.refused > 0, "links that point outside were refused during the race");
    assert.equal(readFileSync(outsideFile, "utf8"), `${OUTSIDE} file\n`);
    assert.equal(readFileSync(join(outsideDir, "f.txt"), "utf8"), `${OUTSIDE} in a directory\n`);
    assert.deepEqual(readdirSync(outsideDir), ["f.txt"]);
    assert.deepEqual(readdirSync(top).sort(), ["outside-dir", "outside.txt", "work"]);
    assert.equal(statSync(outsideFile).mtimeMs, before.file);
    assert.equal(statSync(join(outsideDir, "f.txt")).mtimeMs, before.dir);
  });
});
