/**
 * An executor process reduced to its reaper, for tests/machine/reaper.test.ts: registers the
 * sessions led by the pids it is given, withdraws some, says `ready`, then waits to be killed.
 *
 *   <runtime> tests/machine/reaper-program.ts <kept pid> <withdrawn pid> <pid registered twice>
 *     [at-once]
 *
 * With `at-once` it kills itself (`kill -9`) in the same turn as the registrations, ready or not.
 */
import { reapSessionOnExit } from "../../executor/machine/reaper.node.ts";

const [kept, withdrawn, twice] = process.argv.slice(2, 5).map(Number);
const atOnce = process.argv[5] === "at-once";
reapSessionOnExit(kept);
reapSessionOnExit(withdrawn)();
// Two holders, one lets go: it stays registered.
reapSessionOnExit(twice);
reapSessionOnExit(twice)();
if (atOnce) process.kill(process.pid, "SIGKILL");
console.log("ready");
setInterval(() => {}, 60_000);
