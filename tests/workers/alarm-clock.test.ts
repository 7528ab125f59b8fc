/**
 * The object's clock puts its timers and the harness's deadlines on one alarm: set only when
 * what is due first comes before the alarm already set, run from the alarm, the alarm set
 * again for what is left. A unit test of the glue (the alarm is a recorded function); the
 * object itself runs on it in workerd in the other tests of this folder.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { AlarmClock } from "../../harness/workers/alarm-clock.ts";

describe("AlarmClock", () => {
  it("sets the alarm for the earliest of its timers and the deadline, and runs what is due", () => {
    const alarms: number[] = [];
    const harness: { deadline?: number } = {};
    const clock = new AlarmClock((at) => void alarms.push(at), () => harness.deadline);
    const now = clock.now();
    const fired: string[] = [];
    clock.setTimeout(() => fired.push("late"), 60_000);
    assert.equal(alarms.length, 1);
    assert.ok(alarms[0] >= now + 60_000);
    const early = clock.setTimeout(() => fired.push("early"), 0);
    assert.equal(alarms.length, 2, "an earlier timer moves the alarm");
    clock.setTimeout(() => fired.push("later"), 120_000);
    assert.equal(alarms.length, 2, "a later one leaves it");
    harness.deadline = now + 30_000;
    clock.wake();
    assert.equal(alarms.length, 2, "a deadline after the alarm leaves it");

    let ran = 0;
    clock.alarm(() => void ran++);
    assert.deepEqual(fired, ["early"], "only what is due ran");
    assert.equal(ran, 1, "then the deadlines");
    assert.equal(alarms.at(-1), harness.deadline, "the alarm is set for what is left first");
    clock.clearTimeout(early);

    const cleared = clock.setTimeout(() => fired.push("cleared"), 0);
    clock.clearTimeout(cleared);
    clock.alarm(() => {});
    assert.deepEqual(fired, ["early"], "a cleared timer never runs");
  });
});
