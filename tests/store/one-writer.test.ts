/**
 * One writer per store, fenced: harness processes of this runtime on one SQLite file. A second
 * harness refuses to start while the first lives, naming it (host, pid, since); a third, with
 * `takeover`, claims the store: the first's next write (a tool call its brain makes) is refused,
 * the first closes its executor's connection, the executor reconnects — through a proxy now
 * pointing at the new holder — and resumes there, and no session the first held is written as
 * ended. A harness whose process is gone (SIGKILL) leaves a store the next one claims without
 * `takeover`. The executor is an `ExecutorClient` in this process.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { ExecutorClient } from "../../node.ts";
import { ChaosProxy } from "../helpers/chaos-proxy.ts";
import { openSqliteStore, RUNTIME } from "./sqlite-fixture.ts";
import { HarnessProcess, stopHarnessProcesses, until } from "./harness-process.ts";

const root = mkdtempSync(join(tmpdir(), "bma-one-writer-"));
const FAST = { initialDelayMs: 5, maxDelayMs: 100 };
after(() => {
  stopHarnessProcesses();
  rmSync(root, { recursive: true, force: true });
});

describe(`one writer per SQLite store, on ${RUNTIME}`, { timeout: 120_000 }, () => {
  it("refuses a second harness, naming the first; a takeover fences the first", async () => {
    const path = join(root, "fenced.db");
    const first = new HarnessProcess(path, "plain");
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

      // A second harness on the file refuses to start, and names the first.
      const second = new HarnessProcess(path, "plain");
      const refused = await second.next();
      assert.equal(await second.exited, 3, second.log);
      assert.match(refused, /^refused StoreHeldError /);
      assert.ok(refused.includes(`pid ${first.child.pid}`), refused);
      assert.ok(refused.includes(`host ${hostname()}`), refused);
      assert.match(refused, /since \d{4}-\d\d-\d\dT[\d:.]+Z/);
      assert.match(refused, /takeover/);
      // The first went on untouched.
      assert.equal(await first.ask("state ses_live"), "state ready");
      assert.equal(await first.ask("fenced"), "fenced no");

      // A third takes the store over; the executor's next connection goes to it.
      const third = new HarnessProcess(path, "takeover");
      proxy.retarget(await third.listening());
      await until(
        () => /took the harness store over from a live harness/.test(third.log),
        "the takeover's warning",
      );
      assert.equal(await third.ask("state ses_live"), "state ready");

      // The first's next write is refused: it knows it is fenced, and closes its connections.
      const call = await first.ask("call ses_live after");
      assert.match(
        call,
        /^call refused StoreFencedError another harness took the harness store over/,
      );
      assert.equal(await first.ask("fenced"), "fenced StoreFencedError");
      await until(
        () => /another harness took the harness store over/.test(first.log),
        "the fenced harness's error",
      );
      assert.deepEqual(runs, ["before"], "the refused call never reached the executor");

      // The executor reconnects, resumes at the new holder, and its session lives on there.
      await until(async () => {
        const answer = await third.ask("call ses_live resumed");
        return answer.startsWith("call ok ");
      }, "a call through the new holder");
      assert.deepEqual(runs, ["before", "resumed"]);
      assert.equal(await third.ask("state ses_live"), "state ready");
      await first.close();
      await third.close();

      // The file says what the third harness saw: the session is held, never ended.
      const store = await openSqliteStore(path);
      try {
        const record = store.get<{ state: string; endedAt?: number }>("s/ses_live");
        assert.ok(record, "the session's record");
        assert.equal(record.endedAt, undefined, JSON.stringify(record));
        assert.notEqual(record.state, "ended", JSON.stringify(record));
        assert.equal(store.get("c/call_after"), undefined, "the fenced call was not recorded");
        const holder = store.get<{ pid: number; releasedAt?: number }>("w/holder")!;
        assert.equal(holder.pid, third.child.pid);
        assert.equal(typeof holder.releasedAt, "number", "the last holder let go on close");
      } finally {
        store.close();
      }
    } finally {
      await client.stop();
      await proxy.close();
    }
  });

  it("claims without takeover a store whose holder's process is gone", async () => {
    const path = join(root, "killed.db");
    const first = new HarnessProcess(path, "plain");
    await first.listening();
    first.child.kill("SIGKILL");
    await first.exited;
    const next = new HarnessProcess(path, "plain");
    await next.listening();
    await until(
      () => /took the harness store from a harness that stopped renewing it/.test(next.log),
      "the claim's warning",
    );
    await next.close();
    // A store let go of (harness.close()) is claimed at once, with nothing to say.
    const again = new HarnessProcess(path, "plain");
    await again.listening();
    assert.doesNotMatch(again.log, /took the harness store/);
    await again.close();
  });
});
