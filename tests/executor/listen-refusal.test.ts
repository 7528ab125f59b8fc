/**
 * A listening executor (`client.listen`) takes whoever dials its socket as its harness, so a
 * dialer that refuses its registration — a buggy or stray local process — ends only its own
 * connection: the executor logs it and waits for the next dial, and a real harness that dials
 * next registers it. Before, one refusal stopped the client for good (its socket removed).
 * A real Unix socket under a temp dir, a raw WebSocket dialer, a real `Harness`.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { dialWebSocket, ExecutorClient, Harness } from "../../node.ts";
import { CapturingLogger } from "../helpers/raw.ts";

const dir = mkdtempSync(join(tmpdir(), "bma-listen-refusal-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Waits for `what`, at most 10 s, naming it when it does not come. */
async function within<T>(what: string, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not within 10000 ms: ${what}`)), 10_000);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe("ExecutorClient.listen: a dialer that refuses", { timeout: 30_000 }, () => {
  it("ends only its connection; the next harness registers the executor", async () => {
    const logger = new CapturingLogger();
    const client = new ExecutorClient({
      executor: { name: "listening", os: "linux", arch: "x64", version: "1.0.0" },
      logger,
      reconnect: { initialDelayMs: 1, maxDelayMs: 1 },
    });
    const harness = new Harness();
    try {
      const { url, registered } = await client.listen(`unix://${join(dir, "executor.sock")}`);
      let registeredYet = false;
      registered.then(() => (registeredYet = true), () => {});

      // A stray dialer: answers executor.register with -32001, as the probe's did.
      const stray = await dialWebSocket(url, { protocols: ["bma.executor.v1.1"] });
      const registerSeen = new Promise<void>((resolve) => {
        stray.listen((frame) => {
          const message = JSON.parse(frame);
          if (message.method !== "executor.register") return;
          stray.send(JSON.stringify({
            jsonrpc: "2.0",
            id: message.id,
            error: { code: -32001, message: "forbidden", data: { reason: "forbidden" } },
          }));
          resolve();
        });
      });
      await within("the stray dialer's register", registerSeen);
      const strayClosed = await within("the executor closing the stray connection", stray.closed);
      assert.equal(strayClosed.code, 1000);
      assert.equal(registeredYet, false);

      // The real harness dials next, and the executor registers with it.
      const link = await within("the harness's dial", harness.dial(url));
      try {
        const result = await within("the registration", registered);
        assert.match(result.executor_id, /\S/);
        const executor = await within("the executor at the harness", harness.waitExecutor());
        assert.equal(executor.id, result.executor_id);
      } finally {
        await link.close();
      }
      const refusal = logger.records.find((r) =>
        r.message === "the harness that dialed in refused the executor"
      );
      assert.equal(refusal?.level, "error");
      assert.equal(refusal?.fields?.reason, "register_refused");
    } finally {
      await client.stop();
      await harness.close();
    }
  });
});
