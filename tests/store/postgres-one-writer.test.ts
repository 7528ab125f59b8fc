/**
 * One writer per PostgreSQL table, fenced: harness processes of this runtime on one real server
 * (tests/helpers/postgres-server.ts). A second harness refuses to start while the first lives,
 * naming it; a third, with `takeover`, claims the table: the first's next write is refused and
 * writes nothing, it knows it is fenced and closes its executor's connection, the executor
 * resumes at the new holder (through a proxy pointing there), and no session is written as
 * ended. Two harnesses started together on an empty table: exactly one holds, the other is
 * refused naming it; a harness on another table of the database holds that one beside. A harness
 * whose process is gone (SIGKILL) leaves a table the next one claims without `takeover`.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { hostname } from "node:os";
import { ExecutorClient, type PostgresHarnessStore } from "../../node.ts";
import { ChaosProxy } from "../helpers/chaos-proxy.ts";
import { PostgresServer } from "../helpers/postgres-server.ts";
import { HarnessProcess, stopHarnessProcesses, until } from "./harness-process.ts";
import { freshTable, openPostgresStore, RUNTIME } from "./postgres-fixture.ts";

const FAST = { initialDelayMs: 5, maxDelayMs: 100 };
let server: PostgresServer;
before(async () => {
  server = await PostgresServer.start();
});
after(async () => {
  stopHarnessProcesses();
  await server?.stop();
});

/** The store spec of `table` on the test's server, for a harness process. */
const spec = (table: string) => `${server.url}#${table}`;

async function reading<T>(table: string, read: (store: PostgresHarnessStore) => Promise<T>) {
  const store = await openPostgresStore(server.url, { table });
  try {
    return await read(store);
  } finally {
    await store.close();
  }
}

describe(`one writer per PostgreSQL table, on ${RUNTIME}`, { timeout: 280_000 }, () => {
  it("refuses a second harness, naming the first; a takeover fences the first", async () => {
    const table = freshTable("fenced");
    const first = new HarnessProcess(spec(table), "plain");
    const proxy = await ChaosProxy.start(await first.listening());
    const runs: string[] = [];
    const client = new ExecutorClient({
      harnessUrl: proxy.url,
      executor: { name: "one-writer", os: "linux", arch: "amd64", version: "1.0.0" },
      reconnect: FAST,
      retry: FAST,
    });
    client.tools.bash.handle(({ command }) => {
      runs.push(command);
      return { stdout: `ran ${command}`, stderr: "", exit_code: 0 };
    });
    try {
      await client.start();
      assert.equal(await first.ask("assign ses_live"), "assigned ses_live");
      assert.match(await first.ask("call ses_live before"), /^call ok /);

      const second = new HarnessProcess(spec(table), "plain");
      const refused = await second.next();
      assert.equal(await second.exited, 3, second.log);
      assert.match(refused, /^refused StoreHeldError /);
      assert.ok(refused.includes(`pid ${first.child.pid}`), refused);
      assert.ok(refused.includes(`host ${hostname()}`), refused);
      assert.match(refused, /takeover/);
      assert.equal(await first.ask("state ses_live"), "state ready");
      assert.equal(await first.ask("fenced"), "fenced no");

      const third = new HarnessProcess(spec(table), "takeover");
      proxy.retarget(await third.listening());
      await until(
        () => /took the harness store over from a live harness/.test(third.log),
        "the takeover's warning",
      );
      assert.equal(await third.ask("state ses_live"), "state ready");

      const call = await first.ask("call ses_live after");
      assert.match(
        call,
        /^call refused StoreFencedError another harness took the harness store over/,
      );
      assert.equal(await first.ask("fenced"), "fenced StoreFencedError");
      assert.deepEqual(runs, ["before"], "the refused call never reached the executor");
      // The fenced harness wrote nothing of the refused call.
      assert.equal(await reading(table, (s) => s.get("c/call_after")), undefined);

      await until(async () => {
        const answer = await third.ask("call ses_live resumed");
        return answer.startsWith("call ok ");
      }, "a call through the new holder");
      assert.deepEqual(runs, ["before", "resumed"]);
      await first.close();
      await third.close();

      await reading(table, async (store) => {
        const record = await store.get<{ state: string; endedAt?: number }>("s/ses_live");
        assert.ok(record, "the session's record");
        assert.equal(record.endedAt, undefined, JSON.stringify(record));
        assert.notEqual(record.state, "ended", JSON.stringify(record));
        assert.equal(await store.get("c/call_after"), undefined);
        const holder = (await store.get<{ pid: number; releasedAt?: number }>("w/holder"))!;
        assert.equal(holder.pid, third.child.pid);
        assert.equal(typeof holder.releasedAt, "number", "the last holder let go on close");
      });
    } finally {
      await client.stop();
      await proxy.close();
    }
  });

  it("lets one of two harnesses started together hold a table; another table is apart", async () => {
    const table = freshTable("race");
    const racers = [
      new HarnessProcess(spec(table), "plain"),
      new HarnessProcess(spec(table), "plain"),
    ];
    const lines = await Promise.all(racers.map((racer) => racer.next()));
    const holding = lines.filter((line) => line.startsWith("listening "));
    const refused = lines.filter((line) => line.startsWith("refused "));
    assert.equal(holding.length, 1, lines.join("\n"));
    assert.equal(refused.length, 1, lines.join("\n"));
    const holder = racers[lines.findIndex((line) => line.startsWith("listening "))];
    const loser = racers[lines.findIndex((line) => line.startsWith("refused "))];
    assert.match(refused[0], /^refused StoreHeldError /);
    assert.ok(refused[0].includes(`pid ${holder.child.pid}`), refused[0]);
    assert.equal(await loser.exited, 3);
    const record = await reading(table, (s) => s.get<{ pid: number; epoch: number }>("w/holder"));
    assert.equal(record?.pid, holder.child.pid);
    assert.equal(record?.epoch, 1);
    // Another table of the same database is another store: held at once beside this one.
    const beside = new HarnessProcess(spec(freshTable("beside")), "plain");
    await beside.listening();
    assert.equal(await holder.ask("fenced"), "fenced no");
    await beside.close();
    await holder.close();
  });

  it("claims without takeover a table whose holder's process is gone", async () => {
    const table = freshTable("killed");
    const first = new HarnessProcess(spec(table), "plain");
    await first.listening();
    first.child.kill("SIGKILL");
    await first.exited;
    const next = new HarnessProcess(spec(table), "plain");
    await next.listening();
    await until(
      () => /took the harness store from a harness that stopped renewing it/.test(next.log),
      "the claim's warning",
    );
    await next.close();
    const again = new HarnessProcess(spec(table), "plain");
    await again.listening();
    assert.doesNotMatch(again.log, /took the harness store/);
    await again.close();
  });
});
