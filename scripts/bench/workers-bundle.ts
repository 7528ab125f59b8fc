/**
 * Builds the Workers bundle of the edge harness (examples/workers/worker.ts: the Worker and
 * its Durable Object) with esbuild, minified, as `wrangler deploy` would, and prints its size
 * raw and gzipped. The tests in tests/workers run this very bundle in workerd.
 *
 *   npx tsx scripts/bench/workers-bundle.ts [--out dist/workers/worker.mjs]
 */
import { build } from "esbuild";
import { gzipSync } from "node:zlib";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** The bundle and its sizes. */
export interface WorkersBundle {
  /** The ES module, ready for workerd. */
  readonly code: string;
  /** Its size in bytes. */
  readonly bytes: number;
  /** Its gzipped size in bytes (gzip level 9, as a deploy would be measured). */
  readonly gzipBytes: number;
  /** Bytes per input file in the bundle, largest first. */
  readonly inputs: readonly [path: string, bytes: number][];
  /** Imports left for the runtime to resolve (none: Workers get one self-contained module). */
  readonly external: readonly string[];
}

/** Bundles the example Worker (minified by default). */
export async function buildWorkersBundle(
  options: { minify?: boolean } = {},
): Promise<WorkersBundle> {
  const result = await build({
    entryPoints: [join(root, "examples/workers/worker.ts")],
    bundle: true,
    write: false,
    format: "esm",
    platform: "browser",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    minify: options.minify ?? true,
    metafile: true,
    logLevel: "silent",
  });
  const code = result.outputFiles[0].text;
  const output = Object.values(result.metafile.outputs)[0];
  const inputs = Object.entries(output.inputs)
    .map(([path, info]) => [path, info.bytesInOutput] as [string, number])
    .sort((a, b) => b[1] - a[1]);
  return {
    code,
    bytes: new TextEncoder().encode(code).byteLength,
    gzipBytes: gzipSync(code, { level: 9 }).byteLength,
    inputs,
    external: output.imports.filter((i) => i.external).map((i) => i.path),
  };
}

function kb(bytes: number): string {
  return `${(bytes / 1024).toFixed(1)} KiB`;
}

async function main(): Promise<void> {
  const bundle = await buildWorkersBundle();
  const outAt = process.argv.indexOf("--out");
  if (outAt >= 0) {
    const out = resolve(process.argv[outAt + 1]);
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, bundle.code);
  }
  const packages = new Map<string, number>();
  for (const [path, bytes] of bundle.inputs) {
    const name = path.includes("node_modules/")
      ? path.split("node_modules/")[1].split("/").slice(0, path.includes("node_modules/@") ? 2 : 1)
        .join("/")
      : path.split("/").slice(0, -1).join("/") || path;
    packages.set(name, (packages.get(name) ?? 0) + bytes);
  }
  console.log("Workers bundle of the edge harness (esbuild, minified, esm):");
  console.log(`  raw:  ${bundle.bytes} bytes (${kb(bundle.bytes)})`);
  console.log(`  gzip: ${bundle.gzipBytes} bytes (${kb(bundle.gzipBytes)})`);
  console.log("  by source:");
  for (const [name, bytes] of [...packages].sort((a, b) => b[1] - a[1])) {
    console.log(`    ${name.padEnd(40)} ${kb(bytes)}`);
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await main();
}
