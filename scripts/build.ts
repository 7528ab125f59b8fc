/**
 * `npm run build`: the npm package's compiled JavaScript and declarations in dist/ (tsc with
 * tsconfig.build.json: relative `.ts` imports are rewritten to `.js`). Earlier output is removed
 * first, so a deleted source file cannot linger in the package; other artifacts in dist/ (the
 * single-file `bma-executor` of `npm run compile`) are kept.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, rmSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(fileURLToPath(new URL("..", import.meta.url)));
const dist = join(root, "dist");

function clean(dir: string): void {
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) {
      clean(path);
      if (readdirSync(path).length === 0) rmSync(path, { recursive: true });
    } else if (/\.(js|d\.ts|js\.map)$/.test(entry)) rmSync(path);
  }
}

if (existsSync(dist)) clean(dist);
const result = spawnSync(join(root, "node_modules/.bin/tsc"), ["-p", "tsconfig.build.json"], {
  cwd: root,
  stdio: "inherit",
});
process.exit(result.status ?? 1);
