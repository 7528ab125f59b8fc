/**
 * The SQLite store survives `kill -9`: a child process writes one durable event's batch after
 * another and reports each acknowledged one on stdout; it gets SIGKILL mid-stream (its
 * writes still going), and a reopen of the file finds every batch it acknowledged, each whole
 * (no torn batch), with each driver this runtime ships.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { tsCommand } from "../helpers/runtime-command.ts";
import { DRIVERS, openSqliteStore, RUNTIME } from "./sqlite-fixture.ts";

const root = mkdtempSync(join(tmpdir(), "bma-store-kill-"));
after(() => rmSync(root, { recursive: true, force: true }));
const WRITER = fileURLToPath(new URL("./sqlite-writer.ts", import.meta.url));

/** How many acknowledged batches to read before the kill (it lands among further writes). */
const KILL_AFTER = 300;

/** Runs the writer until it acknowledged `KILL_AFTER` batches, kills it; the highest ack read. */
function writeUntilKilled(path: string, driver: string): Promise<number> {
  const [command, args] = tsCommand(WRITER, [path, driver]);
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
  return new Promise((resolve, reject) => {
    let acked = 0;
    let buffered = "";
    let errors = "";
    let killed = false;
    const limit = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`writer acknowledged ${acked} batches in 60 s: ${errors}`));
    }, 60_000);
    child.stderr!.on("data", (chunk) => (errors += chunk));
    child.stdout!.on("data", (chunk) => {
      buffered += chunk;
      const lines = buffered.split("\n");
      buffered = lines.pop()!;
      for (const line of lines) {
        const n = Number(line.slice(4));
        assert.equal(n, acked + 1, `ack out of order: ${line}`);
        acked = n;
      }
      if (acked >= KILL_AFTER && !killed) {
        killed = true;
        child.kill("SIGKILL");
      }
    });
    child.on("exit", (code, signal) => {
      clearTimeout(limit);
      if (signal === "SIGKILL" && killed) resolve(acked);
      else reject(new Error(`writer exited (${code ?? signal}) before the kill: ${errors}`));
    });
  });
}

for (const driver of DRIVERS) {
  describe(`sqlite store on ${RUNTIME} (${driver}): kill -9`, { timeout: 120_000 }, () => {
    it("keeps every batch the killed process acknowledged, whole", async () => {
      const path = join(root, `kill-${driver.replace(":", "-")}.db`);
      const acked = await writeUntilKilled(path, driver);
      assert.ok(acked >= KILL_AFTER);
      const store = await openSqliteStore(path, { driver });
      try {
        const events = store.list<{ index: number }>("e:ses_kill:");
        const stored = store.get<number>("s:ses_kill:acked")!;
        // Everything acknowledged is there; the kill may have let a later batch commit too.
        assert.ok(stored >= acked, `stored ${stored} < acknowledged ${acked}`);
        assert.equal(events.length, stored);
        events.forEach(([, record], i) => assert.equal(record.index, i + 1));
        assert.equal(store.list("er:ses_kill:").length, stored);
        assert.equal(store.get(`er:ses_kill:number:${stored}`), stored);
      } finally {
        store.close();
      }
    });
  });
}
