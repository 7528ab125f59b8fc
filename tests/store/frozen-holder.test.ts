/**
 * A harness frozen (SIGSTOP) inside a SQLite write transaction still holds the file's write
 * lock: POSIX locks last while the process lives. A claim that finds that holder stale, on this
 * machine, ends it (SIGKILL, after checking the pid still names the process that claimed) and
 * claims the store, with `takeover` or as a standby; the uncommitted batch is gone, the
 * committed one kept. A claimant that cannot end it refuses to start naming the holder
 * (`StoreLockedError`), or, standing by, waits, never serving a store it did not read back.
 * The frozen holder is a child process of this runtime (tests/store/frozen-holder.ts).
 *
 * On PostgreSQL the server ends a transaction left idle (`idle_in_transaction_session_timeout`,
 * set by the store in each of its transactions): a takeover or a standby claims once it did, and
 * the holder, woken (SIGCONT), finds its batch refused and itself fenced
 * (tests/store/frozen-holder-postgres.ts).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { tsCommand } from "../helpers/runtime-command.ts";
import type { Harness, HolderIdentity, SqlHarnessStore } from "../../node.ts";
import { StoreLockedError } from "../../node.ts";
import { openSqliteStore, RUNTIME } from "./sqlite-fixture.ts";
import { until } from "./harness-process.ts";
import { PostgresServer } from "../helpers/postgres-server.ts";
import { freshTable, openPostgresStore } from "./postgres-fixture.ts";

const HOLDER = fileURLToPath(new URL("./frozen-holder.ts", import.meta.url));
const PG_HOLDER = fileURLToPath(new URL("./frozen-holder-postgres.ts", import.meta.url));
const RENEW = 100;
const root = mkdtempSync(join(tmpdir(), "bma-frozen-holder-"));
const children = new Set<ChildProcess>();
after(() => {
  for (const child of children) child.kill("SIGKILL");
  rmSync(root, { recursive: true, force: true });
});

/** A holder frozen inside a transaction (`script` with `argv`): its process, its lines, how it ended. */
async function frozenHolder(path: string, renewMs: number, script = HOLDER, argv?: string[]) {
  const [command, args] = tsCommand(script, argv ?? [path, String(renewMs)]);
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  let out = "";
  let err = "";
  child.stderr!.on("data", (chunk) => (err += chunk));
  const ended = new Promise<string | null>((resolve) =>
    child.once("exit", (_code, signal) => resolve(signal))
  );
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (chunk) => {
      out += chunk;
      if (/frozen \d+\n/.test(out)) resolve();
    });
    child.once("exit", (code) => reject(new Error(`the holder exited (${code}): ${err}`)));
  });
  const pid = Number(/frozen (\d+)/.exec(out)![1]);
  const printed = () => out;
  return { child, pid, ended, printed };
}

/** A logger that keeps its lines. */
function recorder() {
  const lines: string[] = [];
  const log = (level: string) => (message: string, fields?: Record<string, unknown>) =>
    lines.push(`${level} ${message} ${JSON.stringify(fields ?? {})}`);
  return {
    lines,
    logger: { debug() {}, info: log("info"), warn: log("warn"), error: log("error") },
  };
}

/** Waits until the holder's record has not been renewed for three renewals. */
async function stale(store: SqlHarnessStore, renewMs: number): Promise<void> {
  await until(() => {
    const holder = store.get<{ renewedAt: number }>("w/holder");
    return holder !== undefined && Date.now() - holder.renewedAt > 3 * renewMs + 50;
  }, "the frozen holder's record to go stale");
}

describe(`a SQLite store whose holder froze inside a transaction, on ${RUNTIME}`, {
  timeout: 120_000,
}, () => {
  let made: Harness[] = [];
  after(async () => {
    for (const harness of made) await harness.close();
    made = [];
  });
  async function harness(options: Record<string, unknown>): Promise<Harness> {
    const { Harness } = await import(`../../${RUNTIME}.ts`);
    const created = new Harness({
      insecureNoAuth: true,
      heartbeatIntervalMs: 120_000,
      storeRenewMs: RENEW,
      ...options,
    }) as Harness;
    made.push(created);
    return created;
  }

  /** What the file holds once the claim is done: the committed batch, not the frozen one. */
  function assertTakenFrom(store: SqlHarnessStore, pid: number): void {
    assert.equal(store.get("x/committed"), "before the freeze");
    assert.equal(store.get("x/uncommitted"), undefined, "the frozen transaction rolled back");
    const holder = store.get<{ pid: number }>("w/holder")!;
    assert.notEqual(holder.pid, pid);
    assert.equal(holder.pid, (globalThis as any).process.pid);
  }

  it("a takeover ends the frozen holder and claims the store", async () => {
    const path = join(root, "takeover.db");
    const holder = await frozenHolder(path, RENEW);
    const store = await openSqliteStore(path, { busyTimeoutMs: 300 });
    await stale(store, RENEW);
    const { lines, logger } = recorder();
    const taking = await harness({ store, takeover: true, logger });
    await taking.ready;
    assert.equal(await holder.ended, "SIGKILL");
    assert.equal(taking.readiness, "serving");
    assertTakenFrom(store, holder.pid);
    const warned = lines.find((line) => line.startsWith("warn ended the store's stale holder"));
    assert.ok(warned, lines.join("\n"));
    assert.ok(warned.includes(`pid ${holder.pid}`) && warned.includes(hostname()), warned);
    await taking.close();
    store.close();
  });

  it("a standby ends the frozen holder once it is stale, and serves what it read back", async () => {
    const path = join(root, "standby.db");
    const holder = await frozenHolder(path, RENEW);
    const store = await openSqliteStore(path, { busyTimeoutMs: 300 });
    const { lines, logger } = recorder();
    const standby = await harness({ store, standby: true, logger });
    await standby.ready;
    assert.equal(await holder.ended, "SIGKILL");
    assert.equal(standby.readiness, "serving");
    assertTakenFrom(store, holder.pid);
    assert.ok(lines.some((line) => line.startsWith("warn ended the store's stale holder")));
    await standby.close();
    store.close();
  });

  it("a claim that cannot end the holder refuses to start, naming it; a standby waits", async () => {
    const path = join(root, "locked.db");
    const holder = await frozenHolder(path, RENEW);
    const store = await openSqliteStore(path, { busyTimeoutMs: 200 });
    await stale(store, RENEW);
    const { processHolderIdentity } = await import("../../harness/store/holder.node.ts");
    // This process without the means to end another: as a runtime that cannot.
    const { stop: _stop, ...unable }: HolderIdentity = processHolderIdentity();
    await assert.rejects(
      async () => {
        const refused = await harness({ store, takeover: true, holderIdentity: unable });
        await refused.ready;
      },
      (error: unknown) => {
        assert.ok(error instanceof StoreLockedError, String(error));
        assert.match(error.message, /^the store is locked by another harness \(host /);
        assert.ok(error.message.includes(`pid ${holder.pid}`), error.message);
        return true;
      },
    );
    assert.equal(store.get("w/holder") !== undefined, true);

    // A standby keeps trying, says why once, and serves nothing until it holds the store.
    const { lines, logger } = recorder();
    const standby = await harness({ store, standby: true, holderIdentity: unable, logger });
    await until(
      () => lines.some((line) => line.startsWith("warn standing by: the store cannot be claimed")),
      "the standby's warning",
    );
    assert.equal(standby.readiness, "standby");
    const ready = standby.ready;
    holder.child.kill("SIGKILL");
    assert.equal(await holder.ended, "SIGKILL");
    await ready;
    assert.equal(standby.readiness, "serving");
    assertTakenFrom(store, holder.pid);
    assert.equal(
      lines.filter((line) => line.startsWith("warn standing by: the store cannot be claimed"))
        .length,
      1,
      lines.join("\n"),
    );
    await standby.close();
    store.close();
  });
});

describe(`a PostgreSQL table whose holder froze inside a transaction, on ${RUNTIME}`, {
  timeout: 120_000,
}, () => {
  let server: PostgresServer;
  before(async () => {
    server = await PostgresServer.start();
  });
  after(async () => {
    await server?.stop();
  });

  for (const mode of ["takeover", "standby"] as const) {
    it(`${mode === "takeover" ? "a takeover" : "a standby"} claims once the server ended the frozen transaction; woken, the holder is fenced`, async () => {
      const table = freshTable("frozen");
      const holder = await frozenHolder("", 0, PG_HOLDER, [server.url, table]);
      const store = await openPostgresStore(server.url, { table });
      const { Harness } = await import(`../../${RUNTIME}.ts`);
      const harness = new Harness({
        store,
        insecureNoAuth: true,
        heartbeatIntervalMs: 120_000,
        storeRenewMs: 200,
        ...(mode === "takeover" ? { takeover: true } : { standby: true }),
      }) as Harness;
      try {
        // The claim waits on the frozen transaction's locks until the server ends it.
        await harness.ready;
        assert.equal(harness.readiness, "serving");
        const record = await store.get<{ pid: number }>("w/holder");
        assert.equal(record?.pid, (globalThis as any).process.pid);
        assert.equal(await store.get("x/frozen"), undefined);

        holder.child.kill("SIGCONT");
        await until(() => /fenced \w+/.test(holder.printed()), "the woken holder fenced");
        assert.match(holder.printed(), /fenced StoreFencedError/);
        const write = /write (\w+)/.exec(holder.printed())![1];
        assert.notEqual(write, "committed", "the frozen batch was refused");
        assert.equal(await store.get("x/frozen"), undefined);
        assert.equal((await store.get<{ pid: number }>("w/holder"))?.pid, record?.pid);
      } finally {
        await harness.close();
        await store.close();
      }
    });
  }
});
