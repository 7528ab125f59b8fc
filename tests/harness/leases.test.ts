/**
 * The harness's executor leases on one timer (harness/lease.ts `Leases`): each lease still
 * expires exactly two heartbeat intervals after its last renewal, in renewal order, a renewal
 * or an end moves or removes only its own lease, and no timer is left once none is running.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ManualClock } from "../../mod.ts";
import { type Lease, Leases } from "../../harness/lease.ts";

const INTERVAL = 1_000;

function setup() {
  const clock = new ManualClock();
  const leases = new Leases(clock, INTERVAL);
  const expired: { name: string; at: number }[] = [];
  const lease = (name: string): Lease =>
    leases.lease({ leaseExpired: () => expired.push({ name, at: clock.now() }) });
  return { clock, leases, expired, lease, start: clock.now() };
}

describe("Harness: leases on one timer", () => {
  it("expires each lease two intervals after its last renewal, in renewal order", async () => {
    const { clock, expired, lease, start } = setup();
    const a = lease("a");
    const b = lease("b");
    const c = lease("c");
    assert.equal(a.renew(), start + 2 * INTERVAL);
    await clock.advance(100);
    b.renew();
    c.renew();
    await clock.advance(500);
    a.renew(); // now the last: b and c expire before it
    assert.equal(a.expiresAt, start + 600 + 2 * INTERVAL);
    await clock.advance(5_000);
    assert.deepEqual(expired, [
      { name: "b", at: start + 100 + 2 * INTERVAL },
      { name: "c", at: start + 100 + 2 * INTERVAL },
      { name: "a", at: start + 600 + 2 * INTERVAL },
    ]);
    assert.ok(a.ended && b.ended && c.ended);
    assert.equal(clock.pendingTimers, 0);
  });

  it("does not expire a lease renewed in time, nor renew one that ended", async () => {
    const { clock, expired, lease, start } = setup();
    const a = lease("a");
    a.renew();
    for (let i = 0; i < 5; i++) {
      await clock.advance(INTERVAL);
      a.renew();
    }
    assert.deepEqual(expired, []);
    await clock.advance(2 * INTERVAL);
    assert.deepEqual(expired, [{ name: "a", at: start + 7 * INTERVAL }]);
    a.renew();
    assert.equal(a.expiresAt, start + 7 * INTERVAL, "an expired lease stays expired");
    assert.equal(clock.pendingTimers, 0);
  });

  it("ends a lease without expiring it, and leaves no timer once none runs", async () => {
    const { clock, expired, lease, start } = setup();
    const a = lease("a");
    const b = lease("b");
    a.renew();
    b.renew();
    a.end();
    assert.equal(clock.pendingTimers, 1);
    await clock.advance(3 * INTERVAL);
    assert.deepEqual(expired, [{ name: "b", at: start + 2 * INTERVAL }]);
    const c = lease("c");
    c.renew();
    c.end();
    assert.equal(clock.pendingTimers, 0);
    await clock.advance(3 * INTERVAL);
    assert.equal(expired.length, 1);
  });

  it("keeps expiry order when the clock goes back", async () => {
    const clock = new (class extends ManualClock {
      offset = 0;
      override now(): number {
        return super.now() + this.offset;
      }
    })();
    const leases = new Leases(clock, INTERVAL);
    const expired: string[] = [];
    const lease = (name: string) => leases.lease({ leaseExpired: () => expired.push(name) });
    const a = lease("a");
    const b = lease("b");
    a.renew();
    clock.offset = -500; // the wall clock was set back
    b.renew();
    assert.ok(b.expiresAt! < a.expiresAt!);
    await clock.advance(5 * INTERVAL);
    assert.deepEqual(expired, ["b", "a"]);
  });

  it("lets an expiring holder renew or end the other leases", async () => {
    const { clock, leases, start } = setup();
    const order: string[] = [];
    const b = leases.lease({ leaseExpired: () => order.push("b") });
    const c = leases.lease({ leaseExpired: () => order.push("c") });
    const a = leases.lease({
      leaseExpired: () => {
        order.push("a");
        b.renew();
        c.end();
      },
    });
    a.renew();
    b.renew();
    c.renew();
    await clock.advance(2 * INTERVAL);
    assert.deepEqual(order, ["a"]);
    assert.equal(b.expiresAt, start + 4 * INTERVAL);
    await clock.advance(2 * INTERVAL);
    assert.deepEqual(order, ["a", "b"]);
    assert.equal(clock.pendingTimers, 0);
  });
});
