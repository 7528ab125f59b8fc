/**
 * The seams an edge harness is built on (a Durable Object evicted between two events while its
 * WebSockets live on): a harness made anew on the same store takes a socket back with the
 * connection snapshot kept beside it (`onConnectionChange` → `restore`) — registered, bound to
 * its executor, without a new `executor.register` — and its deadlines run from a driver of its
 * own (`deadlines`, `nextDeadline`, `runDeadlines`), the lease continuing from the snapshot.
 *
 * The socket here is an in-memory pair; the harness side of it is a `fedTransport` per
 * incarnation of the harness, fed the frames the way a Durable Object's `webSocketMessage` is.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  type ConnectionSnapshot,
  createLinkedTransportPair,
  ExecutorClient,
  type FedTransport,
  fedTransport,
  Harness,
  type HarnessObservation,
  ManualClock,
  MemoryHarnessStore,
  type SchedulerDriver,
  type Transport,
} from "../../node.ts";
import { until } from "../helpers/executor-fixture.ts";

const INFO = { name: "edge-executor", os: "linux", arch: "amd64", version: "0.0.1" };
const PROTOCOL = "bma.executor.v1.1";

/** A socket that outlives the harness listening on it. */
class HibernatableSocket {
  readonly executorSide: Transport;
  #harnessSide: Transport;
  #current: FedTransport | undefined;

  constructor() {
    const [executorSide, harnessSide] = createLinkedTransportPair({ protocol: PROTOCOL });
    this.executorSide = executorSide;
    this.#harnessSide = harnessSide;
    harnessSide.listen((frame) => this.#current?.deliver(frame));
    harnessSide.closed.then((info) => this.#current?.end(info.code, info.reason));
  }

  /** The transport a new incarnation of the harness reads the socket through. */
  attach(): FedTransport {
    const side = this.#harnessSide;
    this.#current = fedTransport({
      protocol: PROTOCOL,
      send: (frame) => side.send(frame),
      close: (code, reason) => side.close(code, reason),
    });
    return this.#current;
  }

  /** The harness was evicted: nothing listens until the next one attaches. */
  detach(): void {
    this.#current = undefined;
  }
}

describe("Harness seams for an evicted edge harness", { timeout: 20_000 }, () => {
  const closing: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close().catch(() => {});
  });

  it("restores a live socket from its snapshot after an eviction, without a new register", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    const socket = new HibernatableSocket();
    const snapshots = new Map<Transport, ConnectionSnapshot>();
    const first = new Harness({
      store,
      clock: new ManualClock(Date.now()),
      heartbeatIntervalMs: 1_000,
      onConnectionChange: (transport, snapshot) => snapshots.set(transport, snapshot),
    });
    const fed = socket.attach();
    await first.accept(fed);

    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const runs = new Map<string, number>();
    const client = new ExecutorClient({
      executor: INFO,
      harnessUrl: "ws://edge.invalid/",
      dial: () => Promise.resolve(socket.executorSide),
    });
    client.tools.bash.handle(async ({ command }) => {
      runs.set(command, (runs.get(command) ?? 0) + 1);
      if (command === "slow") await gate;
      return { stdout: command, stderr: "", exit_code: 0 };
    });
    closing.push(() => client.stop());
    await client.start();
    const executor = await first.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_edge" });
    await session.ready();
    await client.call("session.event", { session_id: "ses_edge", event: { type: "one" } });
    const slow = session.callTool({ tool: "bash", input: { command: "slow" }, tool_call_id: "c1" });
    slow.catch(() => {});
    await until(() => runs.get("slow") === 1, "the call runs");

    const snapshot = snapshots.get(fed)!;
    assert.equal(snapshot.state, "registered");
    assert.equal(snapshot.executorId, executor.id);
    assert.equal(snapshot.protocol, PROTOCOL);
    assert.equal(snapshot.leaseExpiresAt, executor.leaseExpiresAt);
    assert.deepEqual(JSON.parse(JSON.stringify(snapshot)), snapshot, "the snapshot is JSON");

    // Evicted: the first harness is gone; a new one is made on the same store.
    socket.detach();
    const wakes: (number | undefined)[] = [];
    const driver: SchedulerDriver = { wake: (at) => void wakes.push(at) };
    const observed: HarnessObservation[] = [];
    // The evicted object lives on in this process: its successor takes the store over.
    const second = new Harness({
      store,
      takeover: true,
      heartbeatIntervalMs: 1_000,
      deadlines: driver,
    });
    closing.push(() => second.close());
    second.observe((observation) => observed.push(observation));
    assert.equal(second.session("ses_edge")?.state, "ready", "read back from the store");
    await second.restore(socket.attach(), JSON.parse(JSON.stringify(snapshot)));
    assert.equal(second.executor(executor.id)?.connected, true);
    assert.equal(second.executor(executor.id)?.leaseExpiresAt, snapshot.leaseExpiresAt);
    assert.ok(second.nextDeadline! <= snapshot.leaseExpiresAt!, "the lease is a deadline");
    assert.ok(wakes.length > 0 && wakes.at(-1) === second.nextDeadline, "the driver was told");

    // The socket goes on: an event, the call's result, a new call — no register in between.
    const ack = await client.call("session.event", {
      session_id: "ses_edge",
      event: { type: "two" },
    });
    assert.equal(ack.duplicate, undefined);
    release();
    const recovered = second.session("ses_edge")!;
    const result = await recovered.callTool({
      tool: "bash",
      input: { command: "slow" },
      tool_call_id: "c1",
    });
    assert.equal(result.structured_content?.stdout, "slow");
    assert.equal(runs.get("slow"), 1, "sent again after the restore, run once");
    const fresh = await recovered.tools.bash.call({ command: "fresh" });
    assert.equal(fresh.structured_content?.stdout, "fresh");
    assert.deepEqual(recovered.eventRecords.map((r) => r.event.type), ["one", "two"]);
    assert.equal(
      observed.filter((o) => o.type === "executor.registered" || o.type === "executor.reconnected")
        .length,
      0,
      "the executor never registered again",
    );
    assert.ok(observed.some((o) => o.type === "tool.settled" && o.toolCallId === "c1"));
  });

  it("refuses to restore a snapshot of an executor whose lease ran out meanwhile", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    const harness = new Harness({ store });
    closing.push(() => harness.close());
    const socket = new HibernatableSocket();
    const snapshot: ConnectionSnapshot = {
      protocol: PROTOCOL,
      url: "http://localhost/",
      principal: {},
      trusted: true,
      state: "registered",
      executorId: "exec_unknown",
    };
    await harness.restore(socket.attach(), snapshot);
    assert.deepEqual(await socket.executorSide.closed, { code: 4005, reason: "lease expired" });
  });
});
