/**
 * A hostile grep cannot stall the executor: `(a+)+$` (seconds per line on a backtracking
 * engine) runs over a large real tree while the executor keeps heartbeating and answering other
 * calls, all through the wire with a short heartbeat interval; cancelling it ends it.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { link, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Fixtures, machineSession } from "./files-fixture.ts";
import { until } from "../helpers/executor-fixture.ts";

/** A line that takes a backtracking engine ~10 s with `(a+)+$`, and RE2 a microsecond. */
const HOSTILE_LINE = `${"a".repeat(26)}!\n`;

describe("grep against a pathological pattern", { timeout: 120_000 }, () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  it("heartbeats go on and another call answers while it runs; cancel ends it", async () => {
    const { root, session, executor } = await machineSession(fx, {
      // Short enough to count renewals while the grep runs; a lease of two intervals leaves
      // room for a loaded machine's scheduling hiccups.
      harness: { heartbeatIntervalMs: 1_000 },
      // A search far larger than the test waits for: it is canceled, never finished.
      serve: { limits: { grepBytes: 4 * 1024 * 1024 * 1024 } },
    });
    // Made without blocking the event loop, which the heartbeats share.
    await mkdir(join(root, "big"));
    await writeFile(join(root, "big/0.txt"), HOSTILE_LINE.repeat(300_000)); // 8 MiB
    for (let i = 1; i < 200; i++) await link(join(root, "big/0.txt"), join(root, `big/${i}.txt`));
    await writeFile(join(root, "small.txt"), "still here\n");

    const controller = new AbortController();
    let settled = false;
    const grep = session.tools.grep.call({ pattern: "(a+)+$", path: "big" }, {
      signal: controller.signal,
    }).finally(() => (settled = true));
    grep.catch(() => {});

    // The lease is renewed by heartbeats (every second) while the grep runs.
    const renewals = new Set<number>();
    await until(() => {
      renewals.add(executor.leaseExpiresAt ?? 0);
      return renewals.size >= 4 || settled;
    }, "three lease renewals");
    if (settled) assert.fail(`the grep ended early: ${JSON.stringify(await grep)}`);
    // Other calls are answered meanwhile.
    for (let i = 0; i < 3; i++) {
      const read = await session.tools.read.call({ path: "small.txt" });
      assert.equal(read.structured_content?.content, "still here");
    }
    assert.equal(settled, false, "the grep was still running");
    controller.abort();
    await assert.rejects(grep);
    assert.equal(executor.connected, true);
    assert.equal(executor.gone, false);
    assert.equal(session.state, "ready");
    const after = await session.tools.grep.call({ pattern: "here", path: "small.txt" });
    assert.equal(after.structured_content?.matches.length, 1);
  });

  it("answers as RE2 does over a real file: whole lines of a's match, lines ending in ! do not", async () => {
    const { root, session } = await machineSession(fx);
    writeFileSync(join(root, "mixed.txt"), `${HOSTILE_LINE.repeat(2_000)}aaaa\n${HOSTILE_LINE}`);
    const found = await session.tools.grep.call({ pattern: "(a+)+$", path: "mixed.txt" });
    assert.deepEqual(found.structured_content, {
      matches: [{ path: "mixed.txt", line: 2_001, text: "aaaa" }],
    });
  });
});
