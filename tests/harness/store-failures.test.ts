/**
 * A store that cannot write is said in the log, not only refused: a harness refuses to start on
 * a store it cannot write (its claim is the first write), and a harness on a store whose
 * writes fail (a user's own `HarnessStore`, as a read-only file or a full disk makes SQLite
 * fail) refuses the executor's register with -32004 as before, the logger gets the cause once as
 * an error, and a warning when writes succeed again, after which the executor's retried register
 * is accepted. A real `ExecutorClient` over a WebSocket on 127.0.0.1.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  ExecutorClient,
  Harness,
  type HarnessServer,
  type HarnessStore,
  MemoryHarnessStore,
  type StoreOp,
} from "../../node.ts";
import { CapturingLogger } from "../helpers/raw.ts";
import { ExecutorPeer, registerParams } from "../helpers/executor-peer.ts";

/** A memory store whose writes throw what SQLite throws on a read-only database, while told. */
class FailingStore implements HarnessStore {
  readonly #inner = new MemoryHarnessStore();
  failing = true;
  get<T>(key: string) {
    return this.#inner.get<T>(key);
  }
  list<T>(prefix: string, options?: Parameters<HarnessStore["list"]>[1]) {
    return this.#inner.list<T>(prefix, options);
  }
  write(batch: readonly StoreOp[]) {
    if (this.failing) {
      throw Object.assign(new Error("attempt to write a readonly database"), {
        code: "SQLITE_READONLY",
      });
    }
    return this.#inner.write(batch);
  }
}

describe("Harness: a store that cannot write", { timeout: 30_000 }, () => {
  let harness: Harness;
  let server: HarnessServer;
  let client: ExecutorClient;

  after(async () => {
    await client?.stop();
    await harness?.close();
    await server?.close();
  });

  it("refuses to start on a store that cannot be written from the start", () => {
    const store = new FailingStore();
    // The claim on the store is its first write: the harness fails there, with the cause.
    assert.throws(
      () => new Harness({ insecureNoAuth: true, store }),
      (error: Error & { code?: string }) =>
        /readonly database/.test(error.message) && error.code === "SQLITE_READONLY",
    );
    store.failing = false;
    const started = new Harness({ insecureNoAuth: true, store });
    return started.close();
  });

  it("logs the cause once, refuses with -32004, and says when writes succeed again", async () => {
    const store = new FailingStore();
    store.failing = false;
    const logger = new CapturingLogger();
    harness = new Harness({ insecureNoAuth: true, store, logger });
    store.failing = true;
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    client = new ExecutorClient({
      harnessUrl: server.url,
      executor: { name: "store-failures", os: "linux", arch: "amd64", version: "1.0.0" },
    });
    // Registered only once the store writes again: the client retries the refused register.
    const started = client.start();
    while (logger.records.filter((r) => r.level === "error").length === 0) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const errors = logger.records.filter((r) => r.level === "error");
    assert.equal(errors.length, 1, JSON.stringify(errors));
    assert.match(String(errors[0].fields?.error), /readonly database \(SQLITE_READONLY\)/);
    assert.equal(harness.executors.length, 0, "refused while the store cannot record it");
    store.failing = false;
    await started;
    await harness.waitExecutor();
    const recovered = logger.records.find((r) => r.message.includes("succeed again"));
    assert.ok(recovered, JSON.stringify(logger.records));
    assert.ok(Number(recovered.fields?.failed) >= 1);
  });

  it("a registration the store refuses leaves a known executor as it was, on its connection", async () => {
    const store = new FailingStore();
    store.failing = false;
    const own = new Harness({ insecureNoAuth: true, store, logger: new CapturingLogger() });
    const ownServer = await own.serve({ hostname: "127.0.0.1", port: 0 });
    const peers: ExecutorPeer[] = [];
    try {
      const first = await ExecutorPeer.dial(ownServer.url);
      peers.push(first);
      const { executor_id } = await first.start();
      const executor = own.executor(executor_id)!;
      // The same executor registers again on a second connection, with another capability,
      // while the store cannot write: refused, and nothing of it is kept.
      const second = await ExecutorPeer.dial(ownServer.url);
      peers.push(second);
      store.failing = true;
      const wider = registerParams({
        capabilities: { tools: ["bash", "read"], shell: { enabled: true }, process: true },
        resume: { executor_id, active_sessions: [] },
      });
      await assert.rejects(
        second.start(wider),
        (error: { code?: number }) => error.code === -32004,
      );
      store.failing = false;
      assert.deepEqual(executor.capabilities.tools, ["bash"]);
      // Its first connection serves on.
      const session = await executor.assignSession({ session_id: "ses_kept" });
      const call = session.tools.bash.call({ command: "true" });
      await first.completeBash(await first.nextToolCall(), "served");
      assert.equal((await call).structured_content?.stdout, "served");
      // And the store keeps what it is: a harness started again on it knows the first one.
      await own.close();
      const again = new Harness({ insecureNoAuth: true, store, logger: new CapturingLogger() });
      try {
        assert.deepEqual(again.executor(executor_id)?.capabilities.tools, ["bash"]);
      } finally {
        await again.close();
      }
    } finally {
      for (const peer of peers) await peer.close();
      await own.close();
      await ownServer.close();
    }
  });
});
