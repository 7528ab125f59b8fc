/**
 * `serveMachine` refuses a work directory the tools could not use at once, with a typed error
 * and nothing served, as `bma-executor --workdir` does: one that does not exist (instead of
 * failing every later call with `ENOENT`), a file, an unreadable one. Through this runtime's
 * entry point.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as Entry from "../../node.ts";
import { RUNTIME } from "../helpers/runtime-command.ts";

const sdk: typeof Entry = await import(`../../${RUNTIME}.ts`);
/** root reads every directory whatever its mode. */
const ROOT_USER = process.getuid?.() === 0;

describe(`serveMachine refuses an unusable workdir at once (${RUNTIME})`, () => {
  const cleanups: (() => void | Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  function setup() {
    const dir = mkdtempSync(join(tmpdir(), "bma-workdir-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const client = new sdk.ExecutorClient({
      harnessUrl: "ws://127.0.0.1:9",
      executor: { name: "workdir-test", os: "linux", arch: "amd64", version: "1.0.0" },
    });
    cleanups.push(() => client.stop().then(() => {}));
    return { dir, client };
  }

  /** Serves the machine on `dir`; the error it threw. */
  function refusal(client: Entry.ExecutorClient, dir: string): unknown {
    try {
      const served = sdk.serveMachine(client, { workdir: dir });
      cleanups.push(async () => await served[Symbol.asyncDispose]());
    } catch (error) {
      return error;
    }
    return undefined;
  }

  it("a directory that does not exist: WorkdirError ENOENT, saying how to create it; nothing served", () => {
    const { dir, client } = setup();
    const missing = join(dir, "does-not-exist");
    const error = refusal(client, missing);
    assert.ok(error instanceof Error, "serveMachine refused it at once");
    assert.ok(error instanceof sdk.WorkdirError, String(error));
    assert.ok(error instanceof sdk.ExecutorConfigError);
    assert.equal(error.code, "ENOENT");
    assert.equal(error.path, missing);
    assert.match(error.message, /does not exist/);
    assert.ok(error.message.includes(`mkdir -p "${missing}"`), error.message);
    assert.equal(client.tools.bash.handled, false, "nothing is served");
    assert.equal(client.tools.read.handled, false);
    // The same client serves a directory that exists.
    assert.equal(refusal(client, dir), undefined);
    assert.equal(client.tools.bash.handled, true);
  });

  it("a file: WorkdirError ENOTDIR", () => {
    const { dir, client } = setup();
    const file = join(dir, "file");
    writeFileSync(file, "");
    const error = refusal(client, file);
    assert.ok(error instanceof Error, "serveMachine refused it at once");
    assert.ok(error instanceof sdk.WorkdirError, String(error));
    assert.equal(error.code, "ENOTDIR");
    assert.match(error.message, /is not a directory/);
    assert.equal(client.tools.bash.handled, false);
  });

  it("a directory this user cannot search: WorkdirError EACCES", {
    skip: (ROOT_USER || process.platform === "win32") && "root (or Windows) reads any directory",
  }, () => {
    const { dir, client } = setup();
    const closed = join(dir, "closed");
    mkdirSync(closed);
    chmodSync(closed, 0o000);
    cleanups.push(() => chmodSync(closed, 0o700));
    const error = refusal(client, closed);
    assert.ok(error instanceof sdk.WorkdirError, String(error));
    assert.equal(error.code, "EACCES");
    assert.equal(client.tools.bash.handled, false);
  });
});
