/**
 * `npm run build`: the npm package's compiled JavaScript and declarations in dist/ (tsc with
 * tsconfig.build.json: relative `.ts` imports are rewritten to `.js`). Earlier output is removed
 * first, so a deleted source file cannot linger in the package; other artifacts in dist/ (the
 * single-file `bma-executor` of `npm run compile`) are kept.
 *
 * A declaration that names `Symbol.asyncDispose` gets `/// <reference lib="esnext.disposable" />`
 * (tsc does not keep one from the source): a consumer whose `lib` predates it (ES2022) still
 * type-checks the package, its `await using` included.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
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
if (result.status !== 0) process.exit(result.status ?? 1);

const DISPOSABLE_LIB = '/// <reference lib="esnext.disposable" />\n';
function referenceDisposable(dir: string): void {
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) referenceDisposable(path);
    else if (entry.endsWith(".d.ts")) {
      const text = readFileSync(path, "utf8");
      if (text.includes("Symbol.asyncDispose") && !text.startsWith(DISPOSABLE_LIB)) {
        writeFileSync(path, DISPOSABLE_LIB + text);
      }
    }
  }
}
referenceDisposable(dist);
