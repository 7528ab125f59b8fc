/**
 * Tools of your own defined by zod schemas: `client.tool(name, { description, input, output },
 * handler)`. The executor advertises each with its JSON Schemas (`capabilities.tool_definitions`)
 * in `executor.register` and `executor.capabilities.update`, refuses input its schema refuses
 * before the ack (-32602, like a built-in tool's), hands the handler the parsed input, and checks
 * the result against `output` before sending it as `structured_content`. The harness builds a
 * validator from the advertised JSON Schema and refuses invalid input locally, sending nothing.
 *
 * Real parts: the project's `Harness` over a real WebSocket on 127.0.0.1, a scripted harness for
 * frames a correct harness never sends, a Peer playing the executor to count what the harness
 * sends, and workerd (Miniflare) where `new Function` throws.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import * as z from "zod";
import * as zm from "zod/mini";
import {
  type Capabilities,
  type ExecutorClient,
  ExecutorConfigError,
  InvalidOutgoingParamsError,
  InvalidParamsError,
  ToolError,
  ToolResult,
} from "../../executor/node.ts";
import type { ToolCallParams } from "../../protocol/mod.ts";
import { Harness, type HarnessServer } from "../../harness/node.ts";
import { Fixtures, until } from "../helpers/executor-fixture.ts";
import { ScriptedHarness } from "../helpers/scripted-harness.ts";
import { ExecutorPeer, registerParams, turns } from "../helpers/executor-peer.ts";
import { CapturingLogger } from "../helpers/raw.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";

const WEATHER_INPUT = z.object({
  city: z.string().min(1),
  days: z.int().min(1).max(14).default(1),
  unit: z.enum(["c", "f"]).optional(),
});
const WEATHER_OUTPUT = z.object({ celsius: z.number(), summary: z.string() });

/** Serves `weather`, counting the handler's runs and keeping the inputs it got. */
function serveWeather(client: ExecutorClient) {
  const seen: unknown[] = [];
  const registration = client.tool("weather", {
    description: "Current weather of a city",
    input: WEATHER_INPUT,
    output: WEATHER_OUTPUT,
  }, (input) => {
    seen.push(input);
    return { celsius: 21.5, summary: `${input.city} for ${input.days} day(s)` };
  });
  return { seen, registration };
}

describe("custom tools: the executor end", { timeout: 30_000 }, () => {
  const fx = new Fixtures();
  const scripted: ScriptedHarness[] = [];
  afterEach(async () => {
    await fx.cleanup();
    for (const harness of scripted.splice(0)) await harness.close();
  });

  /** The project's harness with a registered client and a ready session. */
  async function harnessSession(setup: (client: ExecutorClient) => void) {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server);
    setup(client);
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_1" });
    await session.ready();
    return { harness, executor, session, client };
  }

  /** A scripted harness with a registered client holding session ses_1. */
  async function scriptedSession(setup: (client: ExecutorClient) => void) {
    const harness = await ScriptedHarness.start();
    scripted.push(harness);
    const { client } = fx.client(harness);
    setup(client);
    await client.start();
    const peer = harness.last.peer;
    await peer.call("session.assign", { session_id: "ses_1", metadata: { source: "harness" } });
    await harness.waitForRequests("session.ready");
    return { harness, client, peer };
  }

  it("advertises the tool with its description and JSON Schemas in executor.register, as the Harness sees it", async () => {
    const { executor } = await harnessSession((c) => {
      serveWeather(c);
      c.tools.bash.handle(() => "ok");
    });
    const caps = executor.capabilities;
    assert.deepEqual(caps.tools, ["bash", "weather"]);
    // Built-in tools are described by the contract, not here.
    assert.deepEqual(Object.keys(caps.tool_definitions ?? {}), ["weather"]);
    assert.deepEqual(caps.tool_definitions?.weather, {
      description: "Current weather of a city",
      input_schema: {
        $schema: "https://json-schema.org/draft/2020-12/schema",
        type: "object",
        properties: {
          city: { type: "string", minLength: 1 },
          days: { default: 1, type: "integer", minimum: 1, maximum: 14 },
          unit: { type: "string", enum: ["c", "f"] },
        },
        required: ["city"],
      },
      output_schema: {
        $schema: "https://json-schema.org/draft/2020-12/schema",
        type: "object",
        properties: { celsius: { type: "number" }, summary: { type: "string" } },
        required: ["celsius", "summary"],
        additionalProperties: false,
      },
    });
    // It is exactly what zod says of the schemas (input side for the input).
    assert.deepEqual(
      caps.tool_definitions?.weather.input_schema,
      z.toJSONSchema(WEATHER_INPUT, { io: "input" }),
    );
  });

  it("a tool defined after start() is published with executor.capabilities.update; disposing withdraws it", async () => {
    const { harness, client } = await scriptedSession((c) => c.tools.bash.handle(() => "ok"));
    assert.equal(harness.last.register?.capabilities.tool_definitions, undefined);
    const { registration } = serveWeather(client);
    const updates = () =>
      harness.notifications.filter((n) => n.method === "executor.capabilities.update");
    await harness.waitFor(() => updates().length === 1);
    const published: Capabilities = updates()[0].params.capabilities;
    assert.deepEqual(published.tools, ["bash", "weather"]);
    assert.equal(published.tool_definitions?.weather.description, "Current weather of a city");
    assert.deepEqual(published.tool_definitions?.weather.input_schema.required, ["city"]);
    registration.dispose();
    await harness.waitFor(() => updates().length === 2);
    const withdrawn: Capabilities = updates()[1].params.capabilities;
    assert.deepEqual(withdrawn.tools, ["bash"]);
    assert.equal(withdrawn.tool_definitions, undefined);
  });

  it("refuses input the schema refuses with -32602 before the ack; the handler never runs", async () => {
    let seen: unknown[] = [];
    const { harness, peer } = await scriptedSession((c) => {
      seen = serveWeather(c).seen;
      c.tools.bash.handle(() => "ok");
    });
    const refusal = (params: Record<string, unknown>): Promise<any> =>
      peer.call("tool.call", { session_id: "ses_1", ...params } as ToolCallParams)
        .then(() => undefined, (e) => e);
    const wrongType = await refusal({ tool_call_id: "c1", tool: "weather", input: { city: 5 } });
    assert.ok(wrongType instanceof InvalidParamsError, String(wrongType));
    assert.deepEqual(wrongType.data, {
      reason: "invalid_params",
      field: "/input/city",
      issues: [{
        path: ["input", "city"],
        message: "Invalid input: expected string, received number",
        code: "invalid_type",
      }],
      issue_count: 1,
    });
    const tooMany = await refusal({
      tool_call_id: "c2",
      tool: "weather",
      input: { city: "Oslo", days: 15 },
    });
    const paths = (error: any) => error.data.issues.map((i: { path: unknown }) => i.path);
    assert.deepEqual(paths(tooMany), [["input", "days"]]);
    // The same answer a built-in tool's invalid input gets from the contract.
    const bash = await refusal({ tool_call_id: "c3", tool: "bash", input: {} });
    assert.ok(bash instanceof InvalidParamsError);
    assert.equal(bash.message, wrongType.message);
    assert.deepEqual(Object.keys(bash.data as object), Object.keys(wrongType.data));
    assert.deepEqual(paths(bash), [["input", "command"]]);
    await new Promise((resolve) => setTimeout(resolve, 0));
    assert.deepEqual(seen, []);
    assert.equal(harness.requests("tool.result").length, 0);
    // A refused id was never acknowledged: the same id with valid input runs.
    assert.deepEqual(
      await peer.call("tool.call", {
        session_id: "ses_1",
        tool_call_id: "c1",
        tool: "weather",
        input: { city: "Oslo" },
      }),
      { ok: true },
    );
    await harness.waitForRequests("tool.result");
    assert.deepEqual(seen, [{ city: "Oslo", days: 1 }]);
  });

  it("hands the handler the parsed input and sends its checked result as structured_content", async () => {
    let seen: unknown[] = [];
    const { session } = await harnessSession((c) => (seen = serveWeather(c).seen));
    const result = await session.callTool({
      tool: "weather",
      input: { city: "Oslo", unit: "c", extra: "stripped" },
    });
    // Defaults applied, unknown members stripped, as z.object parses.
    assert.deepEqual(seen, [{ city: "Oslo", days: 1, unit: "c" }]);
    assert.equal(result.outcome, "completed");
    assert.deepEqual(result.structured_content, { celsius: 21.5, summary: "Oslo for 1 day(s)" });
    assert.deepEqual(result.content, [{
      type: "text",
      text: JSON.stringify({ celsius: 21.5, summary: "Oslo for 1 day(s)" }),
    }]);
  });

  it("checks the result against output: a result it refuses ends the call failed (invalid_result)", async () => {
    const { session } = await harnessSession((c) => {
      const definition = {
        description: "",
        input: z.object({ mode: z.string() }),
        output: WEATHER_OUTPUT,
      };
      c.tool("forecast", definition, ({ mode }) => {
        switch (mode) {
          case "wrong-type":
            return { celsius: "warm", summary: "" } as unknown as {
              celsius: number;
              summary: string;
            };
          case "text":
            return "sunny" as unknown as { celsius: number; summary: string };
          case "tool-error":
            throw new ToolError("no such city");
          case "is-error":
            return new ToolResult({ content: "partial", isError: true });
          case "full":
            return new ToolResult({
              content: "sunny",
              structuredContent: { celsius: 3, summary: "cold", extra: 1 },
            });
          default:
            return new ToolResult({ content: "no structured content" });
        }
      });
    });
    const call = (mode: string) => session.callTool({ tool: "forecast", input: { mode } });
    const wrong = await call("wrong-type");
    assert.equal(wrong.outcome, "failed");
    assert.equal(wrong.error?.code, "invalid_result");
    assert.match(wrong.error?.message ?? "", /output schema refuses \(\/celsius: /);
    assert.equal(wrong.structured_content, undefined);
    for (const mode of ["text", "none"]) {
      const missing = await call(mode);
      assert.equal(missing.outcome, "failed", mode);
      assert.equal(missing.error?.code, "invalid_result", mode);
    }
    // A tool-level error needs no typed result.
    const toolError = await call("tool-error");
    assert.deepEqual([toolError.outcome, toolError.is_error], ["completed", true]);
    const isError = await call("is-error");
    assert.deepEqual([isError.outcome, isError.is_error], ["completed", true]);
    // A ToolResult's structuredContent is parsed like a plain value (extra members stripped).
    const full = await call("full");
    assert.equal(full.outcome, "completed");
    assert.deepEqual(full.structured_content, { celsius: 3, summary: "cold" });
    assert.deepEqual(full.content, [{ type: "text", text: "sunny" }]);
  });

  it("takes zod/mini schemas alike", async () => {
    const { session, executor } = await harnessSession((c) => {
      c.tool("double", {
        description: "Doubles n",
        input: zm.object({ n: zm.number() }),
        output: zm.object({ doubled: zm.number() }),
      }, ({ n }) => ({ doubled: n * 2 }));
    });
    assert.deepEqual(executor.capabilities.tool_definitions?.double.input_schema.properties, {
      n: { type: "number" },
    });
    await assert.rejects(
      session.callTool({ tool: "double", input: { n: "2" } }),
      InvalidOutgoingParamsError,
    );
    const result = await session.callTool({ tool: "double", input: { n: 2 } });
    assert.deepEqual(result.structured_content, { doubled: 4 });
  });

  it("refuses definitions that cannot work, at registration", () => {
    const { client } = fx.client({ httpUrl: "http://127.0.0.1:1" });
    const handler = () => "";
    const input = z.object({ a: z.string() });
    const bad: [string, unknown, RegExp][] = [
      ["bash", { description: "", input }, /built-in tool/],
      ["t", { input }, /description/],
      ["t", { description: "", input: { type: "object" } }, /not a zod schema/],
      ["t", { description: "", input, output: "x" }, /not a zod schema/],
      ["t", { description: "", input: z.string() }, /not an object schema/],
      ["t", { description: "", input: z.object({ when: z.date() }) }, /no JSON Schema/],
      ["", { description: "", input }, /non-empty/],
    ];
    for (const [name, definition, message] of bad) {
      assert.throws(
        () => client.tool(name, definition as never, handler),
        (error: unknown) => error instanceof ExecutorConfigError && message.test(error.message),
        `${name}: ${message}`,
      );
    }
    assert.throws(
      () => client.tool("t", { description: "", input }, "no function" as never),
      ExecutorConfigError,
    );
    assert.equal(client.tool("t").handled, false);
  });

  it("keeps the untyped client.tool(name) slot: served unchecked, advertised by name only", async () => {
    let defined: ExecutorClient | undefined;
    const { session, executor } = await harnessSession((c) => {
      defined = c;
      c.tool("echo").handle((input) => String(input.text));
      serveWeather(c);
    });
    assert.deepEqual(Object.keys(executor.capabilities.tool_definitions ?? {}), ["weather"]);
    const echo = await session.callTool({ tool: "echo", input: { text: 7 } });
    assert.deepEqual(echo.content, [{ type: "text", text: "7" }]);
    // The slot shows what is advertised; handle() there replaces the tool with an untyped one.
    const slot = defined!.tool("weather");
    assert.equal(slot.definition?.description, "Current weather of a city");
    slot.handle(() => "untyped now");
    await until(() => executor.capabilities.tool_definitions === undefined, "the update");
    assert.equal(slot.definition, undefined);
    const untyped = await session.callTool({ tool: "weather", input: { city: 5 } });
    assert.deepEqual(untyped.content, [{ type: "text", text: "untyped now" }]);
  });
});

describe("custom tools: the harness end", { timeout: 30_000 }, () => {
  const fx = new Fixtures();
  const peers: ExecutorPeer[] = [];
  let open: { harness: Harness; server: HarnessServer; logger: CapturingLogger } | undefined;
  let next = 0;
  afterEach(async () => {
    for (const peer of peers.splice(0)) await peer.close().catch(() => {});
    if (open) {
      await open.harness.close();
      await open.server.close();
      open = undefined;
    }
    await fx.cleanup();
  });

  /** A Peer playing an executor that advertises `capabilities`, with a ready session. */
  async function rawExecutor(capabilities: Capabilities) {
    const logger = new CapturingLogger();
    const harness = new Harness({ insecureNoAuth: true, logger });
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    open = { harness, server, logger };
    const peer = await ExecutorPeer.dial(server.url);
    peers.push(peer);
    const machineId = `m_ct${++next}`;
    await peer.start(registerParams({
      environment_id: "",
      machine_id: machineId,
      capabilities: { process: true, ...capabilities },
    }));
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_h" });
    await peer.peer.call("session.ready", { session_id: "ses_h" });
    await session.ready();
    return { peer, executor, session, logger };
  }

  const WEATHER: Capabilities = {
    tools: ["weather"],
    tool_definitions: {
      weather: {
        description: "Current weather of a city",
        input_schema: z.toJSONSchema(WEATHER_INPUT, { io: "input" }) as Record<string, unknown>,
      },
    },
  };

  /** Rejects how callTool rejected, or says it did not. */
  const rejection = (promise: Promise<unknown>) =>
    promise.then(() => "resolved", (error: unknown) => error);

  it("refuses input the advertised schema refuses, with the issue paths, and sends nothing", async () => {
    const { peer, session } = await rawExecutor(WEATHER);
    const error = await rejection(session.callTool({ tool: "weather", input: { city: 5 } }));
    assert.ok(error instanceof InvalidOutgoingParamsError, String(error));
    assert.equal(error.method, "tool.call");
    assert.deepEqual(error.issues, [{
      path: ["input", "city"],
      message: "Invalid input: expected string, received number",
      code: "invalid_type",
    }]);
    const missing = await rejection(session.callTool({ tool: "weather", input: { days: 0 } }));
    assert.deepEqual(
      (missing as InvalidOutgoingParamsError).issues.map((i) => (i as { path: unknown }).path),
      [["input", "city"], ["input", "days"]],
    );
    await turns();
    assert.deepEqual(peer.toolCalls, []);
    // Valid input is sent as given (the executor applies defaults).
    const pending = session.callTool({ tool: "weather", input: { city: "Oslo" } });
    const call = await peer.nextToolCall();
    assert.deepEqual(call.input, { city: "Oslo" });
    await peer.peer.call("tool.result", {
      session_id: call.session_id,
      tool_call_id: call.tool_call_id,
      outcome: "completed",
      content: [],
    });
    assert.equal((await pending).outcome, "completed");
    assert.equal(peer.toolCalls.length, 1);
  });

  it("with the SDK's executor: the handler never runs for input refused locally", async () => {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server);
    const { seen } = serveWeather(client);
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_1" });
    await session.ready();
    await assert.rejects(
      session.callTool({ tool: "weather", input: { city: "" } }),
      InvalidOutgoingParamsError,
    );
    const ok = await session.callTool({ tool: "weather", input: { city: "Oslo", days: 2 } });
    assert.deepEqual(ok.structured_content, { celsius: 21.5, summary: "Oslo for 2 day(s)" });
    assert.deepEqual(seen, [{ city: "Oslo", days: 2 }]);
  });

  it("checks against the latest advertisement (executor.capabilities.update)", async () => {
    const { peer, session, executor } = await rawExecutor(WEATHER);
    await assert.rejects(
      session.callTool({ tool: "weather", input: { city: "Oslo", days: 30 } }),
      InvalidOutgoingParamsError,
    );
    const longer = z.object({ city: z.string().min(1), days: z.int().min(1).max(60) });
    peer.peer.notify("executor.capabilities.update", {
      capabilities: {
        process: true,
        tools: ["weather"],
        tool_definitions: {
          weather: {
            input_schema: z.toJSONSchema(longer, { io: "input" }) as Record<string, unknown>,
          },
        },
      },
    });
    await until(() => executor.capabilities.tool_definitions?.weather.description === undefined);
    const pending = session.callTool({ tool: "weather", input: { city: "Oslo", days: 30 } });
    assert.deepEqual((await peer.nextToolCall()).input, { city: "Oslo", days: 30 });
    void pending.catch(() => {});
    // Without a definition, a tool is called unchecked.
    peer.peer.notify("executor.capabilities.update", {
      capabilities: { process: true, tools: ["weather"] },
    });
    await until(() => executor.capabilities.tool_definitions === undefined);
    void session.callTool({ tool: "weather", input: { city: 5 } }).catch(() => {});
    assert.deepEqual((await peer.nextToolCall()).input, { city: 5 });
  });

  it("never runs an advertised regular expression, and still checks the rest of the schema", async () => {
    // (a+)+$ backtracks for minutes on 40 a's and a '!' in V8: were the harness to run it, this
    // test would not end before its timeout, and no other executor would be served meanwhile.
    const schema = {
      type: "object",
      properties: {
        name: { type: "string", pattern: "^(a+)+$" },
        tags: {
          type: "object",
          patternProperties: { "^(b+)+$": { type: "string" } },
          additionalProperties: false,
        },
        pattern: { type: "string" },
      },
      required: ["name", "pattern"],
    };
    const { peer, session } = await rawExecutor({
      tools: ["hostile"],
      tool_definitions: { hostile: { input_schema: schema } },
    });
    const hostile = `${"a".repeat(40)}!`;
    void session.callTool({
      tool: "hostile",
      input: { name: hostile, tags: { [`${"b".repeat(40)}!`]: "x" }, pattern: "p" },
    }).catch(() => {});
    assert.equal((await peer.nextToolCall()).input.name, hostile);
    // A property named `pattern` is a property, not the keyword: still required.
    const error = await rejection(session.callTool({ tool: "hostile", input: { name: "a" } }));
    assert.ok(error instanceof InvalidOutgoingParamsError, String(error));
    assert.deepEqual(error.issues.map((i) => (i as { path: unknown }).path), [[
      "input",
      "pattern",
    ]]);
  });

  it("leaves calls unchecked when the advertised schema is unusable, and says so once", async () => {
    const { peer, session, logger } = await rawExecutor({
      tools: ["odd", "constructor"],
      tool_definitions: {
        odd: { input_schema: { type: "object", properties: { x: { type: "no-such-type" } } } },
      },
    });
    for (const id of ["c1", "c2"]) {
      void session.callTool({ tool: "odd", tool_call_id: id, input: { x: 1 } }).catch(() => {});
      assert.equal((await peer.nextToolCall()).tool_call_id, id);
    }
    const warnings = logger.records.filter((r) => r.message.startsWith("advertised input schema"));
    assert.equal(warnings.length, 1);
    assert.equal(warnings[0].fields?.tool, "odd");
    // A tool named after an Object.prototype member has no definition (own members only).
    void session.callTool({ tool: "constructor", input: {} }).catch(() => {});
    assert.equal((await peer.nextToolCall()).tool, "constructor");
  });

  it("checks built-in tools against the contract, whatever an executor advertises for them", async () => {
    const { peer, session } = await rawExecutor({
      tools: ["bash"],
      shell: { enabled: true },
      tool_definitions: {
        bash: { input_schema: { type: "object", properties: { command: { type: "number" } } } },
      },
    });
    void session.tools.bash.call({ command: "ls" }).catch(() => {});
    assert.deepEqual((await peer.nextToolCall()).input, { command: "ls" });
    await assert.rejects(session.tools.bash.call({ command: "" }), InvalidOutgoingParamsError);
  });
});

describe("custom tools in workerd", {
  timeout: 60_000,
  skip: RUNTIME !== "node" && "Miniflare runs from Node",
}, () => {
  it("both checks run where new Function throws", async () => {
    const { build } = await import("esbuild");
    const { Miniflare } = await import("miniflare");
    const bundle = await build({
      entryPoints: [fileURLToPath(new URL("./custom-tools-worker.ts", import.meta.url))],
      bundle: true,
      write: false,
      format: "esm",
      platform: "browser",
      target: "es2022",
      conditions: ["workerd", "worker", "browser"],
      logLevel: "silent",
    });
    const mf = new Miniflare({
      modules: true,
      script: bundle.outputFiles[0].text,
      compatibilityDate: "2025-09-01",
    });
    try {
      const response = await mf.dispatchFetch("http://localhost/");
      const body = await response.json() as Record<string, any>;
      assert.equal(body.evalAllowed, false);
      assert.deepEqual(body.harness.definition.input_schema.required, ["city"]);
      assert.deepEqual(body.harness.refused, [{
        path: ["input", "city"],
        message: "Invalid input: expected string, received number",
        code: "invalid_type",
      }]);
      assert.equal(body.harness.ranBefore, 0);
      assert.deepEqual(body.harness.structured, { celsius: 5 });
      assert.deepEqual(body.executor.refused, {
        reason: "invalid_params",
        field: "/input/city",
        issues: [{
          path: ["input", "city"],
          message: "Too small: expected string to have >=1 characters",
          code: "too_small",
        }],
        issue_count: 1,
      });
      assert.equal(body.executor.ran, 0);
    } finally {
      await mf.dispose();
    }
  });
});
