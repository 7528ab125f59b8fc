/**
 * The project's static gates, in order: generated code matches the contract, deno fmt, deno
 * lint, deno check, tsc for the portable core (no @types/node: a node: import cannot compile)
 * and for everything, the runtime-import guard, and JSR's publish checks (slow types included).
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(fileURLToPath(new URL("..", import.meta.url)));
const bin = (name: string) => join(root, "node_modules/.bin", name);

const steps: [string, string, string[]][] = [
  ["contract drift", process.execPath, ["--import", "tsx", "scripts/gen-contract.ts", "--check"]],
  ["deno fmt", bin("deno"), ["fmt", "--check", "--quiet"]],
  ["deno lint", bin("deno"), ["lint", "--quiet"]],
  ["deno check", bin("deno"), ["check", "--quiet", "."]],
  ["tsc (portable core, no node types)", bin("tsc"), ["--noEmit", "-p", "tsconfig.core.json"]],
  ["tsc (everything)", bin("tsc"), ["--noEmit", "-p", "tsconfig.json"]],
  ["deno publish --dry-run", bin("deno"), ["publish", "--dry-run", "--allow-dirty", "--quiet"]],
];

/** Runtime-specific imports may appear only in files named for their runtime. */
function runtimeImportGuard(): string[] {
  const runtimeNamed = /(^|[/._-])(node|bun|deno|workers|cloudflare)([/._-]|$)/;
  const bad: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) {
        if (entry !== "node_modules") walk(path);
      } else if (path.endsWith(".ts") && !path.endsWith(".test.ts")) {
        const rel = relative(root, path);
        if (runtimeNamed.test(rel)) continue;
        if (/from\s+["'](node:[^"']+|ws)["']|require\(/.test(readFileSync(path, "utf8"))) {
          bad.push(rel);
        }
      }
    }
  };
  for (const dir of ["protocol", "transport", "executor", "harness", "agent"]) {
    if (existsSync(join(root, dir))) walk(join(root, dir));
  }
  if (/from\s+["'](node:|ws["'])/.test(readFileSync(join(root, "mod.ts"), "utf8"))) {
    bad.push("mod.ts");
  }
  return bad;
}

let failed = false;
for (const [name, command, args] of steps) {
  const started = performance.now();
  const result = spawnSync(command, args, {
    cwd: root,
    stdio: "inherit",
    env: { ...process.env, NO_COLOR: "1" },
  });
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  const ok = result.status === 0;
  failed ||= !ok;
  console.log(`${ok ? "ok  " : "FAIL"} ${name} (${seconds} s)`);
}
const bad = runtimeImportGuard();
if (bad.length) {
  failed = true;
  console.log(`FAIL runtime imports outside runtime-named files: ${bad.join(", ")}`);
} else console.log("ok   runtime-import guard");
if (failed) {
  console.log("check failed");
  process.exit(1);
}
console.log("check passed");
