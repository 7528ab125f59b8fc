/**
 * Suite 4: the single-file executor. Builds it as `npm run compile` does (`bun build --compile
 * --minify cli/executor.bun.ts`, into a temporary folder so the `dist/bma-executor` other work
 * uses is left alone), then measures its size and, several times, the time from spawning it to
 * its registration at a local harness (harness/node.ts in this process, on 127.0.0.1).
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Harness } from "../../harness/node.ts";
import { bin, ROOT } from "./procs.ts";

/** What suite 4 measured. */
export interface BinaryResult {
  bytes: number;
  buildMs: number;
  /** Spawn to registered, ms, one per start. */
  startMs: number[];
}

/** Builds the binary and measures `starts` start-ups. */
export async function runBinarySuite(starts: number): Promise<BinaryResult> {
  const dir = mkdtempSync(join(tmpdir(), "bma-bench-bin-"));
  const out = join(dir, "bma-executor");
  const built = performance.now();
  const build = spawnSync(
    bin("bun"),
    ["build", "--compile", "--minify", "cli/executor.bun.ts", "--outfile", out],
    { cwd: ROOT, encoding: "utf8" },
  );
  const buildMs = performance.now() - built;
  if (build.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`bun build --compile failed:\n${build.stderr}`);
  }
  const bytes = statSync(out).size;
  const harness = new Harness({ insecureNoAuth: true });
  const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  const startMs: number[] = [];
  try {
    for (let i = 0; i < starts; i++) {
      const registered = new Promise<number>((resolve) => {
        const listener = harness.onExecutor((event) => {
          if (event.type === "registered") {
            listener.dispose();
            resolve(performance.now());
          }
        });
      });
      const t0 = performance.now();
      const child = spawn(
        out,
        ["--harness", server.url, "--workdir", dir, "--log-level", "error"],
        {
          stdio: ["ignore", "ignore", "pipe"],
        },
      );
      let stderr = "";
      child.stderr.on("data", (chunk) => (stderr += chunk));
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      const failed = exited.then(() => {
        throw new Error(`the binary exited before registering:\n${stderr}`);
      });
      failed.catch(() => {}); // after a registration, its exit is expected
      const t1 = await Promise.race([registered, failed]);
      startMs.push(t1 - t0);
      child.kill("SIGTERM");
      await exited;
    }
  } finally {
    await harness.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return { bytes, buildMs, startMs };
}
