/**
 * What `ExecutorClient` tells the logger it is given (the lines `bma-executor` prints come from
 * here, so every user of the SDK gets them): a failed dial with its URL (no query), errno and the
 * next delay; each tool call's end with its outcome and duration, never its input.
 * Against the project's Harness on 127.0.0.1.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ExecutorClient } from "../../executor/node.ts";
import { Harness, type HarnessServer } from "../../harness/node.ts";
import type { LogFields, Logger } from "../../protocol/logger.ts";
import { refusedPort } from "../helpers/ports.ts";

const INFO = { name: "logging", os: "linux", arch: "x64", version: "1.0.0" };

/** A logger that keeps every record. */
function recorder(): {
  logger: Logger;
  records: { level: string; message: string; fields: LogFields }[];
} {
  const records: { level: string; message: string; fields: LogFields }[] = [];
  const at = (level: string) => (message: string, fields: LogFields = {}) =>
    void records.push({ level, message, fields });
  return {
    records,
    logger: { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") },
  };
}

describe("ExecutorClient: what it logs", { timeout: 30_000 }, () => {
  let harness: Harness | undefined;
  let server: HarnessServer | undefined;
  after(async () => {
    await server?.close();
    await harness?.close();
  });

  it("a failed dial: the URL without its query, the errno, and the delay before the next attempt", async () => {
    const port = await refusedPort();
    const { logger, records } = recorder();
    let failed!: () => void;
    const twice = new Promise<void>((resolve) => (failed = resolve));
    const client = new ExecutorClient({
      harnessUrl: `ws://127.0.0.1:${port}/x?token=in-the-query`,
      executor: INFO,
      // No jitter: the delays are the policy's own.
      reconnect: { initialDelayMs: 20, multiplier: 3, jitter: 0 },
      logger: {
        ...logger,
        warn: (message, fields) => {
          logger.warn(message, fields);
          if (records.filter((r) => r.level === "warn").length === 2) failed();
        },
      },
    });
    const started = client.start();
    started.catch(() => {});
    await twice;
    await client.stop();
    const attempts = records.filter((r) => r.message === "connection attempt failed: retrying");
    assert.deepEqual(
      attempts.slice(0, 2).map(({ fields }) => [fields.url, fields.cause, fields.retry_in_ms]),
      [[`ws://127.0.0.1:${port}/x`, "ECONNREFUSED", 20], [
        `ws://127.0.0.1:${port}/x`,
        "ECONNREFUSED",
        60,
      ]],
    );
    assert.doesNotMatch(JSON.stringify(records), /in-the-query/);
  });

  it("each tool call's end: id, tool, outcome, duration; never its input", async () => {
    harness = new Harness({ insecureNoAuth: true });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    const { logger, records } = recorder();
    const logged = new ExecutorClient({ harnessUrl: server.url, executor: INFO, logger });
    logged.tools.bash.handle(({ command }) => ({ stdout: command, stderr: "", exit_code: 0 }));
    try {
      await logged.start();
      const executor = harness.executor(logged.executorId!)!;
      const session = await executor.assignSession({ session_id: "ses_log" });
      await session.ready();
      const result = await session.tools.bash.call({ command: "echo the-input" }, {
        toolCallId: "call_logged",
      });
      assert.equal(result.outcome, "completed");
      const ended = records.filter((r) => r.message === "tool call ended");
      assert.equal(ended.length, 1);
      assert.equal(ended[0].level, "info");
      const { duration_ms, ...fields } = ended[0].fields;
      assert.deepEqual(fields, {
        tool_call_id: "call_logged",
        tool: "bash",
        session_id: "ses_log",
        outcome: "completed",
      });
      assert.equal(typeof duration_ms, "number");
      assert.doesNotMatch(JSON.stringify(records), /the-input/);
      assert.equal(records.filter((r) => r.message === "registered").length, 1);
    } finally {
      await logged.stop();
    }
  });
});
