/**
 * The contract's conformance examples: every valid frame is accepted and answered with a result
 * the contract allows; every invalid frame gets the error the example states.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { METHOD_SPECS, methods, type RequestMethod } from "../../protocol/mod.ts";
import { ALL_CAPABILITIES, peerWithRawEnd } from "../helpers/raw.ts";

const dir = fileURLToPath(new URL("../../protocol/contract/examples/", import.meta.url));
const contract = JSON.parse(
  readFileSync(
    fileURLToPath(new URL("../../protocol/contract/openrpc.json", import.meta.url)),
    "utf8",
  ),
);

interface Example {
  method?: string;
  valid?: { description: string; frame: any; result?: unknown }[];
  invalid?: { description: string; frame?: unknown; text?: string; error: { code: number } }[];
}

const files = readdirSync(dir).filter((f) => f.endsWith(".json")).sort();

const SEED_000_METHODS = [
  "executor.register",
  "executor.heartbeat",
  "executor.token.refresh",
  "executor.capabilities.update",
  "executor.drain",
  "executor.close",
  "session.assign",
  "session.ready",
  "session.event",
  "session.status",
  "session.stop",
  "session.ended",
  "tool.call",
  "tool.result",
  "tool.cancel",
  "tool.progress",
  "fs.mount",
  "fs.unmount",
  "turn.start",
  "turn.input",
  "turn.cancel",
  "session.close",
  "session.event_delta",
  "interaction.request",
  "interaction.response",
  "agent.custom_tool_result",
  "interaction.cancel",
  "model_token.refresh",
  "tools_token.refresh",
];

describe("contract", () => {
  it("lists all 29 methods of seed 000, each with params and a result schema for requests", () => {
    assert.equal(SEED_000_METHODS.length, 29);
    for (const name of SEED_000_METHODS) {
      const spec = METHOD_SPECS.get(name);
      assert.ok(spec, `${name} is in the contract`);
      assert.ok(spec.params, `${name} has a params schema`);
      if (spec.kind === "request") assert.ok(spec.result, `${name} has a result schema`);
      else assert.equal(spec.result, undefined);
    }
    // Capability requests of seed 003 are there too.
    for (
      const prefix of [
        "process.",
        "terminal.",
        "skill.install",
        "workspace.backup",
        "mcp.",
        "file.",
        "git.",
      ]
    ) {
      assert.ok([...METHOD_SPECS.keys()].some((m) => m.startsWith(prefix)), `a ${prefix} method`);
    }
    assert.equal(methods.TOOL_CALL, "tool.call");
    assert.equal(METHOD_SPECS.size, contract.methods.length);
  });

  it("names every error code and close code the seeds use", () => {
    const codes = Object.values(contract.components.errors).map((e: any) => e.code);
    for (
      const code of [
        -32700,
        -32600,
        -32601,
        -32602,
        -32603,
        -32001,
        -32004,
        -32007,
        -32009,
        -32010,
        -32012,
        -32013,
      ]
    ) {
      assert.ok(codes.includes(code), `error ${code}`);
    }
    const closes = Object.values(contract["x-close-codes"]).map((c: any) => c.code);
    for (const code of [1000, 1001, 1008, 1012, 1013, 4001, 4002, 4003, 4004, 4005]) {
      assert.ok(closes.includes(code), `close ${code}`);
    }
  });

  it("has an example file with valid and invalid frames for every method", () => {
    const covered = new Set(files.map((f) => JSON.parse(readFileSync(dir + f, "utf8")).method));
    for (const name of METHOD_SPECS.keys()) {
      assert.ok(covered.has(name), `examples for ${name}`);
      const example: Example = JSON.parse(readFileSync(dir + `${name}.json`, "utf8"));
      assert.ok((example.valid?.length ?? 0) >= 1, `${name}: a valid frame`);
      assert.ok((example.invalid?.length ?? 0) >= 1, `${name}: an invalid frame`);
    }
  });
});

describe("contract examples", { timeout: 30_000 }, () => {
  for (const file of files) {
    const example: Example = JSON.parse(readFileSync(dir + file, "utf8"));
    it(file, async () => {
      const { peer, raw, logger } = peerWithRawEnd({ capabilities: ALL_CAPABILITIES });
      try {
        const spec = example.method ? METHOD_SPECS.get(example.method) : undefined;
        let handled = 0;
        let reply: unknown;
        if (spec?.kind === "request") {
          peer.onRequest(spec.name as RequestMethod, () => {
            handled++;
            return reply as never;
          });
        } else if (spec) {
          peer.onNotification(spec.name as any, () => void handled++);
        }
        for (const valid of example.valid ?? []) {
          handled = 0;
          reply = valid.result;
          raw.sendJson(valid.frame);
          if (spec?.kind === "request") {
            const response = await raw.next();
            assert.equal(
              response.error,
              undefined,
              `${valid.description}: ${JSON.stringify(response.error)}`,
            );
            assert.deepEqual(response.result, valid.result, valid.description);
            assert.ok(spec.result!.safeParse(valid.result).success, `${valid.description}: result`);
          } else {
            await raw.idle();
            assert.equal(raw.frames.length, 0, "a notification is never answered");
          }
          assert.equal(handled, 1, `${valid.description}: handled once`);
        }
        for (const invalid of example.invalid ?? []) {
          handled = 0;
          const before = logger.records.length;
          raw.send(invalid.text ?? JSON.stringify(invalid.frame));
          const frame = invalid.frame as any;
          const isNotification = invalid.text === undefined && typeof frame === "object" &&
            frame !== null &&
            !Array.isArray(frame) && "method" in frame && !("id" in frame);
          if (isNotification) {
            await raw.idle();
            assert.equal(raw.frames.length, 0, "a notification is never answered");
            const rejection = logger.records.slice(before).find((r) =>
              r.message === "notification rejected"
            );
            assert.equal(rejection?.fields?.code, invalid.error.code, invalid.description);
          } else {
            const response = await raw.next();
            assert.equal(response.error?.code, invalid.error.code, invalid.description);
          }
          assert.equal(handled, 0, `${invalid.description}: the handler did not run`);
        }
      } finally {
        await peer.close();
      }
    });
  }
});
