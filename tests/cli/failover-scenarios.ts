/** The failover scenarios, for any store the rig's harnesses can share (SQLite, PostgreSQL). */
import { it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { join } from "node:path";
import { callTools, checkNothingLost, readyStatus, startRig, until } from "./failover-rig.ts";
import { exited, sendSignal } from "./cli-helpers.ts";

const TICKS = 60;

/** Registers the kill and the freeze scenarios, each on a fresh store from `store()`. */
export function failoverScenarios(
  store: () => string,
  dir: string,
  /** What the store's server says about its sessions, printed when a takeover fails. */
  diagnose?: () => Promise<string>,
): void {
  it(
    "kill -9 of the active: the standby holds the store, executors resume, nothing lost or run twice",
    async () => {
      const rig = await startRig(mkdtempSync(join(dir, "kill-")), store());
      try {
        const [active, standby] = rig.harnesses;
        const [b, c] = rig.executors;
        const load = Promise.all([
          callTools(rig, "call_k", 12),
          b.tick("ses_client-b", 0, TICKS),
          c.tick("ses_client-c", 0, TICKS),
        ]);
        // Once some of the work is acknowledged, the active harness dies mid-load.
        await until(
          "some ticks acknowledged",
          () => (b.acked.get("ses_client-b")?.length ?? 0) >= 10,
        );
        sendSignal(active.cli.child, "SIGKILL");
        await exited(active.cli.child);
        await until(
          "the standby serves",
          async () => (await readyStatus(standby.url)) === "serving",
        );
        await load;
        await callTools(rig, "call_k_after", 3);
        await checkNothingLost(rig, TICKS);
      } finally {
        await rig.stop();
      }
    },
  );

  it(
    "a frozen active (SIGSTOP) is taken over; woken, it writes nothing more, turns fenced and closes its executors",
    async () => {
      const rig = await startRig(mkdtempSync(join(dir, "freeze-")), store());
      try {
        const [active, standby] = rig.harnesses;
        const [b, c] = rig.executors;
        const load = Promise.all([
          callTools(rig, "call_f", 12),
          b.tick("ses_client-b", 0, TICKS),
          c.tick("ses_client-c", 0, TICKS),
        ]);
        await until(
          "some ticks acknowledged",
          () => (b.acked.get("ses_client-b")?.length ?? 0) >= 10,
        );
        sendSignal(active.cli.child, "SIGSTOP");
        await until(
          "the standby serves",
          async () => (await readyStatus(standby.url)) === "serving",
        );
        await load;
        const log = [...standby.cli.stdout.lines, ...standby.cli.stderr.lines].join("\n");
        if (/ended the store's stale holder/.test(log)) {
          // SQLite: frozen inside a transaction, it held the file's write lock (POSIX locks last
          // while the process lives); the standby ended it (SIGKILL), the one way to break it.
          assert.equal((await exited(active.cli.child)).signal, "SIGKILL");
          assert.ok(log.includes(`pid ${active.cli.child.pid}`), log);
        } else {
          sendSignal(active.cli.child, "SIGCONT");
          await until(
            "the woken harness is fenced",
            async () => (await readyStatus(active.url)) === "fenced",
          );
        }
        await callTools(rig, "call_f_after", 3);
        await checkNothingLost(rig, TICKS);
        // Woken, it still runs (its health says so) but serves nobody.
        if (active.cli.child.signalCode === null) {
          assert.equal((await fetch(`${active.url}/healthz`)).status, 200);
        }
      } catch (error) {
        // What the harnesses and the CLI executor said: the story of a failed takeover.
        for (
          const { child, stdout, stderr } of [...rig.harnesses.map((h) => h.cli), rig.cliExecutor]
        ) {
          console.error(`pid ${child.pid}:\n${[...stdout.lines, ...stderr.lines].join("\n")}`);
        }
        if (diagnose) console.error(await diagnose().catch((e) => `diagnose failed: ${e}`));
        throw error;
      } finally {
        await rig.stop();
      }
    },
  );
}
