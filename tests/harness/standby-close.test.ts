/**
 * A standby closed while another harness holds the store never served: its `ready` rejects
 * (`HarnessClosedError`) instead of resolving as if it held the store, so `bma-harness serve`
 * stopped with SIGTERM while standing by does not log that it serves. Injected clocks and
 * identities over one memory store (the process-level story is tests/store/one-writer.test.ts).
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  Harness,
  HarnessClosedError,
  type HarnessStore,
  type HolderIdentity,
  ManualClock,
  MemoryHarnessStore,
  StoreHeldError,
  type StoreHolderRecord,
  type StoreOp,
} from "../../node.ts";
import { CapturingLogger } from "../helpers/raw.ts";

const RENEW = 1_000;

function identity(host: string, pid: number): HolderIdentity {
  return { host, pid, processStarted: 1, alive: () => true };
}

describe("a standby closed while it stands by", { timeout: 20_000 }, () => {
  const harnesses: Harness[] = [];
  afterEach(async () => {
    for (const harness of harnesses.splice(0)) await harness.close();
  });
  function harness(store: HarnessStore, who: HolderIdentity, standby: boolean): Harness {
    const made = new Harness({
      store,
      clock: new ManualClock(),
      holderIdentity: who,
      standby,
      storeRenewMs: RENEW,
      heartbeatIntervalMs: 60_000,
    });
    harnesses.push(made);
    return made;
  }

  it("rejects ready with HarnessClosedError, and never claims the store", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    const holder = harness(store, identity("a", 10), false);
    await holder.ready;
    const standby = harness(store, identity("b", 20), true);
    assert.equal(standby.readiness, "standby");
    // Asked before the close, as `bma-harness serve` asks it at start.
    const ready = standby.ready;
    await standby.close();
    await assert.rejects(ready, HarnessClosedError);
    await assert.rejects(standby.ready, HarnessClosedError);
    assert.equal(standby.readiness, "closed");
    assert.equal(store.get<StoreHolderRecord>("w/holder")!.host, "a");
    assert.equal(holder.readiness, "serving");
  });

  it("a standby that came to hold the store resolves ready, closed since or not", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    const standby = harness(store, identity("b", 20), true);
    await standby.ready;
    assert.equal(standby.readiness, "serving");
    await standby.close();
    await standby.ready;
  });

  it("a harness that finds an asynchronous store held logs who holds it, not an option to set", async () => {
    // As PostgreSQL answers: later, so the claim fails during start-up, not in the constructor.
    const inner = new MemoryHarnessStore({ values: "json" });
    const later: HarnessStore = {
      get: (key) => Promise.resolve(inner.get(key)),
      list: (prefix, options) => Promise.resolve(inner.list(prefix, options)),
      write: (batch: readonly StoreOp[]) => Promise.resolve().then(() => inner.write(batch)),
    };
    const holder = harness(later, identity("a", 10), false);
    await holder.ready;
    const logger = new CapturingLogger();
    const second = new Harness({
      store: later,
      clock: new ManualClock(),
      holderIdentity: identity("b", 20),
      storeRenewMs: RENEW,
      heartbeatIntervalMs: 60_000,
      logger,
    });
    harnesses.push(second);
    await assert.rejects(second.ready, StoreHeldError);
    const record = logger.records.find((r) => r.level === "error");
    assert.equal(record?.message, "the harness store is held by another harness");
    assert.match(String(record?.fields?.holder), /^host a, pid 10/);
    assert.ok(!JSON.stringify(logger.records).includes("takeover: true"));
  });
});
