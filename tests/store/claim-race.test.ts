/**
 * Two harness processes that start at the same instant on one fresh SQLite file: exactly one
 * holds the store, and the other refuses to start with `StoreHeldError` naming it, never with
 * the driver's raw "database is locked", and never both refused; with each driver this runtime
 * ships. The harnesses run in two processes of this runtime (tests/store/claim-race-harness.ts),
 * loaded beforehand: each round the test tells both at once to start one on a fresh file, so
 * their claims meet (opening the file on a fresh file switches it to WAL, then the claim).
 *
 * And a holder that is a zombie (killed, its parent not reaping it: `kill(pid, 0)` still
 * succeeds for it) is gone: the next harness claims the store without `takeover`.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";
import { tsCommand } from "../helpers/runtime-command.ts";
import type { Harness } from "../../node.ts";
import { DRIVERS, openSqliteStore, RUNTIME } from "./sqlite-fixture.ts";
import { until } from "./harness-process.ts";

const RACER = fileURLToPath(new URL("./claim-race-harness.ts", import.meta.url));
const HOLDER = fileURLToPath(new URL("./holder-harness.ts", import.meta.url));
const ROUNDS = 20;
const root = mkdtempSync(join(tmpdir(), "bma-claim-race-"));
const children = new Set<ChildProcess>();
after(() => {
  for (const child of children) child.kill("SIGKILL");
  rmSync(root, { recursive: true, force: true });
});

/** A child's stdout, line by line. */
function lines(child: ChildProcess): () => Promise<string> {
  const queue: string[] = [];
  let waiting: ((line: string) => void) | undefined;
  let buffered = "";
  let errors = "";
  child.stderr!.on("data", (chunk) => (errors += chunk));
  child.stdout!.setEncoding("utf8");
  child.stdout!.on("data", (chunk: string) => {
    buffered += chunk;
    const parts = buffered.split("\n");
    buffered = parts.pop()!;
    for (const line of parts) {
      const next = waiting;
      waiting = undefined;
      if (next) next(line);
      else queue.push(line);
    }
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  return () => {
    const line = queue.shift();
    if (line !== undefined) return Promise.resolve(line);
    return new Promise((resolve, reject) => {
      waiting = resolve;
      exited.then((code) => reject(new Error(`exited ${code} before a line: ${errors}`)));
    });
  };
}

/** A process of tests/store/claim-race-harness.ts with `driver`, loaded: its pid and lines. */
async function racer(
  driver: string,
): Promise<{ child: ChildProcess; next: () => Promise<string> }> {
  const [command, args] = tsCommand(RACER, [driver]);
  const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"] });
  children.add(child);
  const next = lines(child);
  assert.equal(await next(), "ready");
  return { child, next };
}

for (const driver of DRIVERS) {
  describe(`two harnesses claiming one SQLite file at once, on ${RUNTIME} (${driver})`, {
    timeout: 240_000,
  }, () => {
    it(`exactly one holds it and the other names it, ${ROUNDS} rounds`, async () => {
      const racers = await Promise.all([racer(driver), racer(driver)]);
      const wrong: string[] = [];
      try {
        for (let round = 0; round < ROUNDS; round++) {
          const path = join(root, `race-${driver.replace(":", "-")}-${round}.db`);
          // Both lines leave in one turn: each harness starts as soon as its process reads it.
          for (const { child } of racers) child.stdin!.write(`claim ${path}\n`);
          const outcomes = await Promise.all(
            racers.map(async ({ child, next }) => ({ pid: child.pid!, said: await next() })),
          );
          const held = outcomes.filter((o) => o.said === "held");
          const refused = outcomes.filter((o) => o.said !== "held");
          const named = held.length === 1 && refused.length === 1 &&
            refused[0].said.startsWith(`refused StoreHeldError ${held[0].pid} `) &&
            refused[0].said.includes(`pid ${held[0].pid},`);
          if (!named) wrong.push(`round ${round}: ${JSON.stringify(outcomes)}`);
          for (const { child, next } of racers) {
            child.stdin!.write("end\n");
            assert.equal(await next(), "ended");
          }
        }
      } finally {
        for (const { child } of racers) {
          const exited = new Promise((resolve) => child.once("exit", resolve));
          child.stdin!.end();
          if (child.exitCode === null && child.signalCode === null) await exited;
          children.delete(child);
        }
      }
      assert.deepEqual(wrong, [], `${wrong.length} of ${ROUNDS} rounds went wrong`);
    });
  });
}

/** The state letter of process `pid` (Linux's /proc): `Z` for a zombie. */
function processState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
  } catch {
    return undefined;
  }
}

describe(`a harness store whose holder is a zombie, on ${RUNTIME}`, {
  timeout: 120_000,
  skip: !existsSync("/proc/self/stat") && "zombies are told apart through Linux's /proc",
}, () => {
  it("is claimed without takeover: a zombie holds nothing", async () => {
    const path = join(root, "zombie.db");
    // The holder runs in the background of a shell that then becomes `sleep`, which never
    // reaps it: killed, it stays a zombie while `sleep` lives.
    const [command, args] = tsCommand(HOLDER, [path, "plain"]);
    const quoted = [command, ...args].map((arg) => `'${arg.replace(/'/g, `'\\''`)}'`).join(" ");
    const parent = spawn(
      "/bin/sh",
      ["-c", `${quoted} </dev/null & echo "pid $!"; exec sleep 600`],
      {
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    children.add(parent);
    const next = lines(parent);
    const pid = Number(/^pid (\d+)$/.exec(await next())![1]);
    assert.match(await next(), /^listening ws:\/\//);
    let harness: Harness | undefined;
    const store = await openSqliteStore(path);
    try {
      assert.equal(store.get<{ pid: number }>("w/holder")?.pid, pid);
      process.kill(pid, "SIGKILL");
      await until(() => processState(pid) === "Z", "the killed holder to be a zombie");
      // kill(pid, 0) still answers for a zombie: what the probe must not trust alone.
      assert.doesNotThrow(() => process.kill(pid, 0));

      const warnings: string[] = [];
      const { Harness } = await import(`../../${RUNTIME}.ts`);
      harness = new Harness({
        store,
        insecureNoAuth: true,
        heartbeatIntervalMs: 120_000,
        storeRenewMs: 120_000,
        logger: { debug() {}, info() {}, warn: (m: string) => warnings.push(m), error() {} },
      }) as Harness;
      await harness.ready;
      assert.equal(harness.readiness, "serving");
      assert.equal(store.get<{ pid: number }>("w/holder")?.pid, process.pid);
      assert.ok(
        warnings.some((w) => w.startsWith("took the harness store from a harness that stopped")),
        warnings.join("\n"),
      );
      assert.equal(processState(pid), "Z", "the holder was a zombie throughout");
    } finally {
      await harness?.close();
      store.close();
      parent.kill("SIGKILL");
    }
  });
});
