/**
 * The logger wrapper every end puts around the logger it is given: secret-named fields are
 * redacted at any depth, and a record without fields reaches the sink with its message alone
 * (so `logger: console` prints no trailing `undefined`).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { type Logger, REDACTED, redactingLogger } from "../../protocol/mod.ts";

function recording(): { sink: Logger; calls: unknown[][] } {
  const calls: unknown[][] = [];
  const record = (level: string) => (...args: unknown[]) => calls.push([level, ...args]);
  return {
    calls,
    sink: {
      debug: record("debug"),
      info: record("info"),
      warn: record("warn"),
      error: record("error"),
    },
  };
}

describe("redactingLogger", () => {
  it("passes a record without fields as its message alone, on every level", () => {
    const { sink, calls } = recording();
    const logger = redactingLogger(sink);
    logger.debug("a");
    logger.info("b");
    logger.warn("c");
    logger.error("d");
    assert.deepEqual(calls, [["debug", "a"], ["info", "b"], ["warn", "c"], ["error", "d"]]);
  });

  it("redacts secret-named fields, nested ones too, and keeps the rest", () => {
    const { sink, calls } = recording();
    redactingLogger(sink).info("registered", {
      executor_id: "exec_1",
      token: "eyJ.secret",
      nested: { environment_key: "ek_secret", count: 2 },
    });
    assert.deepEqual(calls, [[
      "info",
      "registered",
      { executor_id: "exec_1", token: REDACTED, nested: { environment_key: REDACTED, count: 2 } },
    ]]);
  });

  it("keeps `this` for a sink whose methods need it", () => {
    const lines: string[] = [];
    class Sink implements Logger {
      #prefix = "sdk";
      debug(message: string) {
        lines.push(`${this.#prefix} ${message}`);
      }
      info(message: string) {
        lines.push(`${this.#prefix} ${message}`);
      }
      warn(message: string) {
        lines.push(`${this.#prefix} ${message}`);
      }
      error(message: string) {
        lines.push(`${this.#prefix} ${message}`);
      }
    }
    redactingLogger(new Sink()).warn("x");
    assert.deepEqual(lines, ["sdk x"]);
  });
});
