/**
 * Misbehaving tool handlers: whatever a handler throws or returns, every call the executor
 * accepted ends with a `tool.result`. A thrown value with no string form, a value whose getters
 * or Proxy traps throw, a `ToolError` the contract refuses, a result that cannot be serialized
 * (a nested BigInt or cycle) and a returned function or symbol each end the call `failed` with a
 * code, the message free of the value itself, and the executor serves the next call.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as z from "zod";
import { ToolError, ToolResult } from "../../executor/node.ts";
import { Fixtures } from "../helpers/executor-fixture.ts";

/** A cyclic object. */
function cyclic(): Record<string, unknown> {
  const value: Record<string, unknown> = { secret: "VALUE_SECRET" };
  value.self = value;
  return value;
}

/** A Proxy whose every trap throws. */
function throwingProxy(): object {
  const boom = () => {
    throw new Error("VALUE_SECRET trap");
  };
  return new Proxy({}, {
    get: boom,
    has: boom,
    ownKeys: boom,
    getOwnPropertyDescriptor: boom,
    getPrototypeOf: boom,
  });
}

/**
 * Runs `call` with a signal that stops the harness's wait after a bound far beyond any answer: a
 * call that never ends fails the test (RequestAbortedError) instead of hanging it.
 */
async function bounded<T>(call: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error("no tool.result")), 10_000);
  try {
    return await call(controller.signal);
  } finally {
    clearTimeout(timer);
  }
}

/** What the test reads of a call's result. */
interface Ended {
  readonly outcome: string;
  readonly error?: { readonly message: string; readonly code?: string };
  readonly content?: readonly unknown[];
}

interface Case {
  /** What the handler does. */
  readonly name: string;
  /** The handler of the custom tool `misbehaving` (or of the built-in `read`, with `read`). */
  readonly handler: () => unknown;
  /** Served as the built-in `read` tool instead of a custom one. */
  readonly read?: boolean;
  /** The failed result's `error.code`. */
  readonly code: "handler_failed" | "invalid_result";
}

const CASES: readonly Case[] = [
  {
    name: "throws a null-prototype object",
    handler: () => {
      throw Object.create(null);
    },
    code: "handler_failed",
  },
  {
    name: "rejects with a null-prototype object",
    handler: () => Promise.reject(Object.create(null)),
    code: "handler_failed",
  },
  {
    name: "throws an object whose toString throws",
    handler: () => {
      throw {
        toString() {
          throw new Error("VALUE_SECRET toString");
        },
      };
    },
    code: "handler_failed",
  },
  {
    name: "throws an Error whose message getter throws",
    handler: () => {
      const error = new Error("x");
      Object.defineProperty(error, "message", {
        get() {
          throw new Error("VALUE_SECRET getter");
        },
      });
      throw error;
    },
    code: "handler_failed",
  },
  {
    name: "throws a Proxy whose traps throw",
    handler: () => {
      throw throwingProxy();
    },
    code: "handler_failed",
  },
  { name: "returns a Proxy whose traps throw", handler: throwingProxy, code: "invalid_result" },
  {
    name: "throws a ToolError whose content the contract refuses",
    handler: () => {
      throw new ToolError("bad", { content: [{ type: "nope" }] as never });
    },
    code: "invalid_result",
  },
  {
    name: "throws a ToolError whose content has a BigInt member",
    handler: () => {
      throw new ToolError("bad", { content: [{ type: "text", text: "x", n: 1n }] as never });
    },
    code: "invalid_result",
  },
  {
    name: "returns a read result with an extra BigInt member",
    read: true,
    handler: () => ({ content: "x", total_lines: 1, truncated: false, extra: 7n }),
    code: "invalid_result",
  },
  {
    name: "returns a read result with a cyclic member",
    read: true,
    handler: () => ({ content: "x", total_lines: 1, truncated: false, extra: cyclic() }),
    code: "invalid_result",
  },
  {
    name: "returns content blocks with an extra BigInt field",
    handler: () => [{ type: "text", text: "ok", extra: 1n }],
    code: "invalid_result",
  },
  {
    name: "returns content blocks with a cyclic field",
    handler: () => [{ type: "text", text: "ok", extra: cyclic() }],
    code: "invalid_result",
  },
  {
    name: "returns a ToolResult whose structured content has a BigInt",
    handler: () => new ToolResult({ content: "ok", structuredContent: { n: 5n } }),
    code: "invalid_result",
  },
  {
    name: "returns an object with a BigInt member",
    handler: () => ({ n: 10n }),
    code: "invalid_result",
  },
  {
    name: "returns a function (its source is not sent)",
    handler: () =>
      function secret() {
        return "VALUE_SECRET";
      },
    code: "invalid_result",
  },
  { name: "returns a symbol", handler: () => Symbol("VALUE_SECRET"), code: "invalid_result" },
];

describe("ExecutorClient: misbehaving tool handlers", () => {
  const fx = new Fixtures();
  afterEach(() => fx.cleanup());

  for (const c of CASES) {
    it(`a handler that ${c.name} ends the call failed (${c.code}), and the next call completes`, {
      timeout: 30_000,
    }, async () => {
      const { harness, server } = await fx.harness();
      const { client } = fx.client(server);
      const input = z.object({});
      if (c.read) client.tools.read.handle(c.handler as never);
      else client.tool("misbehaving", { description: "misbehaves", input }, c.handler as never);
      client.tool("fine", { description: "answers", input }, () => "fine");
      await client.start();
      const executor = await harness.waitExecutor();
      const session = await executor.assignSession({ session_id: "ses_1" });
      const result = await bounded((signal): Promise<Ended> =>
        c.read
          ? session.tools.read.call({ path: "x" }, { signal })
          : session.callTool({ tool: "misbehaving", input: {} }, { signal })
      );
      assert.equal(result.outcome, "failed");
      assert.equal(result.error?.code, c.code);
      assert.equal(typeof result.error?.message, "string");
      assert.doesNotMatch(
        result.error!.message,
        /VALUE_SECRET/,
        "the message does not show the value",
      );
      assert.ok(!result.content?.length, "a failed call carries no content");
      const next = await session.callTool({ tool: "fine", input: {} });
      assert.equal(next.outcome, "completed");
      assert.deepEqual(next.content, [{ type: "text", text: "fine" }]);
    });
  }
});
