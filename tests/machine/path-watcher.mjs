// A separate process that keeps checking that a path exists, as fast as it can, until its stdin
// closes; then prints how many checks it made and how many found the path missing. Used by
// skills.test.ts to see that replacing a skill never leaves its name missing.
//
//   path-watcher.mjs PATH
import { statSync } from "node:fs";
import process from "node:process";
import { setImmediate } from "node:timers";

const path = process.argv[2];
let checks = 0;
let missing = 0;
let stop = false;
process.stdin.on("data", () => {});
process.stdin.on("end", () => (stop = true));
process.stdin.on("close", () => (stop = true));

async function main() {
  process.stdout.write("ready\n");
  while (!stop) {
    for (let i = 0; i < 200; i++) {
      checks++;
      try {
        statSync(path);
      } catch {
        missing++;
      }
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  process.stdout.write(`checks ${checks} missing ${missing}\n`);
}

main();
