// A separate process that keeps swapping what names in a directory point at, as fast as it can,
// until its stdin closes, printing how many swaps it made so far after every batch. Used by
// confinement.test.ts.
//
//   symlink-racer.mjs DIR
//
// In DIR it flips, each in one rename(2):
//   link    a symlink to "inside.txt" / to the outside file (OUTSIDE_FILE env)
//   dirlink a symlink to "sub" / to the outside directory (OUTSIDE_DIR env)
// and, in three renames, swapdir between a real directory inside and a symlink to OUTSIDE_DIR.
import { renameSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { setImmediate } from "node:timers";

const dir = process.argv[2];
const outsideFile = process.env.OUTSIDE_FILE;
const outsideDir = process.env.OUTSIDE_DIR;
let swaps = 0;
let stop = false;
process.stdin.on("data", () => {});
process.stdin.on("end", () => (stop = true));
process.stdin.on("close", () => (stop = true));

function point(name, target) {
  const temp = join(dir, `.racer-${name}`);
  symlinkSync(target, temp);
  renameSync(temp, join(dir, name));
  swaps++;
}

let parity = 0;
let trashed = 0;
/** How many times in a row a writer may take the free name swapdir before the racer gives up. */
const TAKEN_LIMIT = 1_000;
function flipSwapdir() {
  // swapdir and .spare hold the real directory and the link to outside, in turn.
  renameSync(join(dir, "swapdir"), join(dir, ".swap-tmp"));
  for (let taken = 0;; taken++) {
    try {
      renameSync(join(dir, ".spare"), join(dir, "swapdir"));
      break;
    } catch (error) {
      // A writer made a new swapdir while the name was free (EISDIR, ENOTEMPTY, EEXIST): put it
      // aside and try again; a writer may take the name again in between, any number of times.
      if (taken === TAKEN_LIMIT) throw error;
      try {
        renameSync(join(dir, "swapdir"), join(dir, `.trash-${trashed++}`));
      } catch { /* gone again: the next rename tells */ }
    }
  }
  renameSync(join(dir, ".swap-tmp"), join(dir, ".spare"));
  swaps++;
}

async function main() {
  process.stdout.write("ready\n");
  while (!stop) {
    for (let i = 0; i < 100; i++) {
      parity ^= 1;
      point("link", parity ? outsideFile : "inside.txt");
      point("dirlink", parity ? outsideDir : "sub");
      flipSwapdir();
    }
    process.stdout.write(`swaps ${swaps}\n`);
    await new Promise((resolve) => setImmediate(resolve));
  }
  process.stdout.write(`swaps ${swaps}\n`);
}

main().catch((error) => {
  process.stderr.write(`${error}\n`);
  process.exit(1);
});
