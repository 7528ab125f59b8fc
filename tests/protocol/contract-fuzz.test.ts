/**
 * Hostile parameters for every method of the contract, made from its examples: each method's
 * first valid example, then that example with one member (top level, or one level down) left out
 * or replaced by a hostile value (wrong types, out-of-range and timer-overflowing numbers,
 * invalid base64, long and NUL strings, deep nesting, unknown members), and params that are no
 * object at all. Both ends run for real over WebSockets on 127.0.0.1: this runtime's
 * `ExecutorClient` with the machine and an agent served, driven by a scripted harness that sends
 * what no well-behaved harness would; and the project's `Harness`, driven by a raw executor.
 *
 * Every answer is a result or a contract error, never -32603 (an internal error is a bug: bad
 * input must be named as such), nothing crashes, and the connection answers the next call.
 * URLs in the examples are pointed at a closed port on 127.0.0.1, commands at `true`.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type * as Entry from "../../node.ts";
import { ALL_CAPABILITIES } from "../helpers/raw.ts";
import { ScriptedHarness } from "../helpers/scripted-harness.ts";
import { serveAgent } from "../../agent/mod.ts";
import { createBashAgent } from "../../agent/examples/bash-agent.node.ts";
import { dialWebSocket } from "../../transport/node.ts";
import { OFFERED, registerParams } from "../helpers/executor-peer.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const sdk: typeof Entry = await import(`../../${RUNTIME}.ts`);
const CONTRACT = fileURLToPath(new URL("../../protocol/contract/", import.meta.url));
const INTERNAL_ERROR = -32603;
const SESSION = "ses_fuzz";

interface MethodDoc {
  name: string;
  "x-kind": "request" | "notification";
  "x-direction": "executor_to_harness" | "harness_to_executor" | "both";
}
const METHODS: MethodDoc[] = JSON.parse(readFileSync(join(CONTRACT, "openrpc.json"), "utf8"))
  .methods;

/** The params of a method's first valid example, made safe to run here. */
function baseline(method: string): Record<string, unknown> {
  const doc = JSON.parse(readFileSync(join(CONTRACT, "examples", `${method}.json`), "utf8"));
  return tame(doc.valid?.[0]?.frame?.params ?? {}) as Record<string, unknown>;
}

/** Points URLs at a closed local port, commands at `true`, ids at the test's session. */
function tame(value: unknown, key = ""): unknown {
  if (typeof value === "string") {
    if (/^(https?|wss?):\/\//.test(value)) return "http://127.0.0.1:9/fuzz";
    if (key === "session_id") return SESSION;
    if (key === "command") return "true";
    return value;
  }
  if (Array.isArray(value)) {
    if (key === "argv") return ["true"];
    return value.map((item) => tame(item));
  }
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, tame(v, k)]));
  }
  return value;
}

const deep = (depth: number): unknown => {
  let value: unknown = [];
  for (let i = 1; i < depth; i++) value = [value];
  return value;
};

/** Values put in place of one member. */
const HOSTILE: readonly unknown[] = [
  null,
  true,
  -1,
  0,
  1.5,
  2 ** 31,
  5e9,
  1e308,
  -1e308,
  "",
  "\u0000",
  "@@@ not base64 @@@",
  "../../../../etc/passwd",
  "x".repeat(70_000),
  [],
  {},
  { unexpected: true },
  deep(100),
];

/** The variants of `base`: see the module comment. */
function* variants(base: Record<string, unknown>): Generator<unknown> {
  yield base;
  for (const whole of [null, [], 42, "params", { ...base, unknown_member: 1 }]) yield whole;
  for (const [key, value] of Object.entries(base)) {
    const { [key]: _, ...without } = base;
    yield without;
    for (const hostile of HOSTILE) yield { ...base, [key]: hostile };
    if (key === "data" || key === "encoding") {
      yield { ...base, data: "@@@", encoding: "base64" };
    }
    if (value && typeof value === "object" && !Array.isArray(value)) {
      for (const inner of Object.keys(value)) {
        const { [inner]: __, ...innerWithout } = value as Record<string, unknown>;
        yield { ...base, [key]: innerWithout };
        for (const hostile of HOSTILE) yield { ...base, [key]: { ...value, [inner]: hostile } };
      }
    }
  }
}

/** Which methods run last: they end the session or the executor's willingness. */
const LAST = ["session.close", "session.stop", "executor.drain"];
const order = (methods: MethodDoc[]) =>
  [...methods].sort((a, b) => LAST.indexOf(a.name) - LAST.indexOf(b.name));

/** A code of a JSON-RPC error answer, or undefined for a result (or no answer in time). */
function codeOf(error: unknown): number | undefined {
  const code = (error as { code?: unknown })?.code;
  return typeof code === "number" && (error as Error).name !== "ConnectionClosedError"
    ? code
    : undefined;
}

describe(`contract fuzz: the executor on ${RUNTIME}`, { timeout: 300_000 }, () => {
  let dir: string;
  let harness: ScriptedHarness;
  let client: Entry.ExecutorClient;
  let peer: Entry.Peer;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "bma-fuzz-"));
    mkdirSync(join(dir, "work"));
    mkdirSync(join(dir, "agent"));
    harness = await ScriptedHarness.start();
    client = new sdk.ExecutorClient({
      harnessUrl: harness.url,
      executor: { name: "fuzz", os: "linux", arch: "amd64", version: "1.0.0" },
    });
    sdk.serveMachine(client, { workdir: join(dir, "work"), graceMs: 100 });
    serveAgent(client, createBashAgent({ workdir: join(dir, "agent") }));
    await client.start();
    await harness.waitForConnections(1);
    await harness.waitFor(() => harness.last.register !== undefined);
    peer = harness.last.peer as unknown as Entry.Peer;
    // Every gated method goes out: one the executor did not advertise must be refused there.
    peer.capabilities = ALL_CAPABILITIES;
    await peer.call("session.assign", { session_id: SESSION, metadata: { source: "harness" } });
    await peer.call("terminal.open", { session_id: SESSION, terminal_id: "t_1", argv: ["cat"] });
    await peer.call("process.start", { session_id: SESSION, process_id: "p_1", argv: ["cat"] });
  });

  after(async () => {
    await client?.stop();
    await harness?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("answers every request with a result or a contract error, and serves the next", async () => {
    const internal: string[] = [];
    let sent = 0;
    const served = order(METHODS.filter((m) => m["x-direction"] !== "executor_to_harness"));
    for (const method of served) {
      if (method.name === "executor.close") continue; // it ends the connection, as it must
      for (const params of variants(baseline(method.name))) {
        sent++;
        if (method["x-kind"] === "notification") {
          try {
            peer.notify(method.name as never, params as never);
          } catch { /* refused locally (too large, ...): nothing was sent */ }
          continue;
        }
        try {
          await peer.call(method.name as never, params as never, {
            prevalidated: true,
            timeoutMs: 3_000,
          });
        } catch (error) {
          if (codeOf(error) === INTERNAL_ERROR) {
            internal.push(`${method.name} ${JSON.stringify(params).slice(0, 160)}: ${error}`);
          }
        }
      }
      // The connection still serves.
      const listed = await peer.call("process.list", {
        session_id: SESSION,
      }).catch((error) => error);
      assert.ok(!(listed instanceof Error) || codeOf(listed) !== undefined, String(listed));
    }
    assert.deepEqual(internal, [], `${internal.length} of ${sent} answered -32603`);
  });
});

describe(`contract fuzz: the harness on ${RUNTIME}`, { timeout: 300_000 }, () => {
  let harness: Entry.Harness;
  let server: Entry.HarnessServer;

  before(async () => {
    harness = new sdk.Harness({ insecureNoAuth: true });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  });

  after(async () => {
    await harness?.close();
    await server?.close();
  });

  it("answers every request with a result or a contract error, and serves the next", async () => {
    const transport = await dialWebSocket(server.url, { protocols: OFFERED });
    const answers = new Map<number, (frame: { error?: { code: number } }) => void>();
    transport.listen((text) => {
      const frame = JSON.parse(text);
      if (frame.id !== undefined && !frame.method) answers.get(frame.id)?.(frame);
    });
    let nextId = 1;
    const request = (method: string, params: unknown) => {
      const id = nextId++;
      transport.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
      return new Promise<{ error?: { code: number } } | undefined>((resolve) => {
        const timer = setTimeout(() => resolve(undefined), 3_000);
        answers.set(id, (frame) => {
          clearTimeout(timer);
          answers.delete(id);
          resolve(frame);
        });
      });
    };
    const registered = await request("executor.register", {
      ...registerParams(),
      capabilities: ALL_CAPABILITIES,
    });
    assert.equal(registered?.error, undefined, JSON.stringify(registered));
    const internal: string[] = [];
    let sent = 0;
    const served = METHODS.filter((m) =>
      m["x-direction"] !== "harness_to_executor" && m.name !== "executor.register" &&
      m.name !== "executor.close"
    );
    for (const method of served) {
      for (const params of variants(baseline(method.name))) {
        sent++;
        if (method["x-kind"] === "notification") {
          transport.send(JSON.stringify({ jsonrpc: "2.0", method: method.name, params }));
          continue;
        }
        const answer = await request(method.name, params);
        if (answer?.error?.code === INTERNAL_ERROR) {
          internal.push(`${method.name} ${JSON.stringify(params).slice(0, 160)}`);
        }
      }
      const beat = await request("executor.heartbeat", { active_sessions: [] });
      assert.ok(beat && !beat.error, `after ${method.name}: ${JSON.stringify(beat)}`);
    }
    assert.deepEqual(internal, [], `${internal.length} of ${sent} answered -32603`);
    transport.close();
  });
});
