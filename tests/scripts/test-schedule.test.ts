/**
 * The runner's order (scripts/test-schedule.ts): the stages that compute go to the `jobs` lanes
 * longest first, the stages that mostly wait to a lane of their own, and a recorded run is read
 * back as written (and in the older form of seconds alone). The CPU a stage used is read from a
 * real process (scripts/process-tree.ts).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { cpuSeconds } from "../../scripts/process-tree.ts";
import {
  mostlyWaits,
  readRecords,
  StageQueue,
  type StageRecord,
  writeRecords,
} from "../../scripts/test-schedule.ts";

describe("the test runner's schedule", () => {
  it("a stage mostly waits when it kept under 0.3 of a core busy for 3 s or more", () => {
    assert.equal(mostlyWaits({ seconds: 20, cpu: 2 }), true);
    assert.equal(mostlyWaits({ seconds: 20, cpu: 9 }), false);
    assert.equal(mostlyWaits({ seconds: 2, cpu: 0.1 }), false, "too short to matter");
    assert.equal(mostlyWaits({ seconds: 20 }), false, "no CPU recorded");
    assert.equal(mostlyWaits(undefined), false);
  });

  it("computing stages go to the job lanes longest first, waiting ones to their own lane", () => {
    const records = new Map<string, StageRecord>([
      ["eviction", { seconds: 25, cpu: 2 }],
      ["failover", { seconds: 16, cpu: 4 }],
      ["publication", { seconds: 37, cpu: 36 }],
      ["transfer", { seconds: 12, cpu: 11 }],
      ["small", { seconds: 1, cpu: 0.1 }],
      ["old", { seconds: 30 }],
    ]);
    const queue = new StageQueue(
      [...records.keys(), "new"],
      (name) => records.get(name),
      (name) => (name === "new" ? 1e6 : 0),
    );
    assert.equal(queue.size, 7);
    assert.equal(queue.next(true), "eviction");
    assert.equal(queue.next(false), "new");
    assert.equal(queue.next(false), "publication");
    assert.equal(queue.next(false), "old");
    assert.equal(queue.next(false), "transfer");
    assert.equal(queue.next(false), "small");
    // No computing stage left: a job lane takes a waiting one, and the waiting lane has none.
    assert.equal(queue.next(false), "failover");
    assert.equal(queue.next(true), undefined);
    assert.equal(queue.next(false), undefined);
    assert.equal(queue.size, 0);
  });

  it("reads back what it writes, and the older form of seconds alone", () => {
    const written = writeRecords(
      new Map([["b", { seconds: 1.234, cpu: 0.56 }], ["a", { seconds: 7.06 }]]),
    );
    assert.deepEqual(JSON.parse(JSON.stringify(written)), { a: 7.1, b: [1.2, 0.6] });
    assert.deepEqual(
      [...readRecords({ ...written, old: 3, broken: "x" } as never)],
      [["a", { seconds: 7.1 }], ["b", { seconds: 1.2, cpu: 0.6 }], ["old", { seconds: 3 }]],
    );
  });

  it(
    "reads the CPU a running process has used",
    { skip: process.platform !== "linux" && "/proc is Linux's" },
    async () => {
      const child = spawn(process.execPath, ["-e", "for (;;);"], { stdio: "ignore" });
      try {
        let used: number | undefined = 0;
        for (let i = 0; i < 600 && used !== undefined && used < 0.05; i++) {
          await new Promise((r) => setTimeout(r, 50));
          used = cpuSeconds(child.pid!);
        }
        assert.ok(used !== undefined && used >= 0.05, `read ${used} CPU seconds`);
      } finally {
        child.kill("SIGKILL");
      }
      await new Promise((r) => child.once("exit", r));
      assert.equal(cpuSeconds(child.pid!), undefined, "an ended process has none");
    },
  );
});
