/**
 * The test files built for Node: one esbuild build of every file (ES modules; the SDK's sources,
 * the tests' helpers and the pure ES-module packages in chunks the files share, the other
 * packages left to Node's resolution), run by
 * plain `node` instead of through tsx. Through tsx, a Node stage spent most of its time loading
 * the SDK: every module resolved and transformed in tsx's loader thread, with a cache that each
 * stage's own `TMPDIR` starts empty. The build takes a few seconds; a Node stage then starts in
 * about the time Deno's does.
 *
 * The build keeps what a module sees of itself: `import.meta.url` is the source file's URL (a
 * test finds its fixtures beside it, `createRequire` resolves from the source's folder), names of
 * functions and classes are kept (`keepNames`, as tsx does), and stack traces point into the
 * sources (a source map beside each file, `--enable-source-maps`; inline, it doubled the text
 * every process read and compiled). A dynamic import of
 * `` `…/${RUNTIME}.ts` `` is this runtime's file (`RUNTIME` is `"node"` wherever Node runs it);
 * any other template in an `import()` would make esbuild take in every file its pattern matches,
 * so it fails the build instead.
 *
 * A file that imports TypeScript by a path it computes at run time (which plain Node cannot load)
 * runs through tsx as before: `THROUGH_TSX`.
 *
 * The same build makes the programs the tests start as processes (`NODE_PROGRAMS`: the CLIs, the
 * fixtures' servers and holders, the conformance children), and the runner names its folder in
 * `BMA_TEST_NODE_BUNDLES`: `tests/helpers/runtime-command.ts` starts a program's bundle with plain
 * Node when there is one. Through tsx, each of those processes loaded the whole SDK through tsx's
 * loader before doing anything, and the CLI tests start hundreds (docs/benchmarks.md has the cost).
 */
import { readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { pathToFileURL } from "node:url";
import { build, type Plugin } from "esbuild";

/** Test files that import `.ts` files by computed paths: tsx loads those. */
export const THROUGH_TSX: ReadonlySet<string> = new Set([
  // Imports each public entry point's source by its path from deno.json.
  "tests/publication/publication.test.ts",
  "tests/publication/surface.test.ts",
]);

/**
 * The TypeScript programs the tests run as Node processes (`tsCommand`), built beside the test
 * files. One left out still runs, through tsx.
 */
export const NODE_PROGRAMS: readonly string[] = [
  "cli/executor.node.ts",
  "cli/harness.node.ts",
  "tests/conformance/executor-child.ts",
  "tests/conformance/harness-child.ts",
  "tests/inspector/http-server.ts",
  "tests/inspector/slow-stream-server.ts",
  "tests/machine/flow-executor.ts",
  "tests/machine/reaper-program.ts",
  "tests/machine/sdk-program.ts",
  "tests/store/claim-race-harness.ts",
  "tests/store/frozen-holder-postgres.ts",
  "tests/store/frozen-holder.ts",
  "tests/store/holder-harness.ts",
  "tests/store/sqlite-writer.ts",
];

/** An `import()` of a template with this runtime's name in it: `` import(`../../${RUNTIME}.ts`) ``. */
const RUNTIME_IMPORT = /\bimport\(\s*`([^`$]*)\$\{RUNTIME\}([^`$]*)`\s*\)/g;
/** Any other template in an `import()`. */
const TEMPLATE_IMPORT = /\bimport\(\s*`[^`]*\$\{/;

/** What `import.meta.url`, `.filename` and `.dirname` read in a bundle: the module's own values. */
const META = {
  url: "__bmaModuleUrl",
  filename: "__bmaModuleFilename",
  dirname: "__bmaModuleDirname",
} as const;

/** Source rewrites that keep each module's view of itself once it is inlined in a bundle. */
function sourcesAsThemselves(root: string): Plugin {
  return {
    name: "sources-as-themselves",
    setup(b) {
      b.onLoad({ filter: /\.[cm]?ts$/ }, (args) => {
        let source = readFileSync(args.path, "utf8")
          .replace(
            RUNTIME_IMPORT,
            (_, before, after) => `import(${JSON.stringify(`${before}node${after}`)})`,
          );
        // Declared on the first line (line numbers stay), read through `define` below: esbuild
        // renames each module's own, so every module reads its own.
        if (source.includes("import.meta")) {
          const own = {
            [META.url]: pathToFileURL(args.path).href,
            [META.filename]: args.path,
            [META.dirname]: dirname(args.path),
          };
          source = Object.entries(own).map(([name, value]) =>
            `var ${name} = ${JSON.stringify(value)};`
          )
            .join(" ") + " " + source;
        }
        if (TEMPLATE_IMPORT.test(source)) {
          return {
            errors: [{
              text: `${relative(root, args.path)}: an import() of a template other than` +
                " `…${RUNTIME}…` cannot be bundled: it would take in every file it matches",
            }],
          };
        }
        return { contents: source, loader: "ts" };
      });
    },
  };
}

/**
 * Pure ES-module packages built into the bundles; every other package is left to Node's
 * resolution. Loaded as packages, zod's and hono's files were resolved, read and compiled one by
 * one in every process a test started.
 */
const INLINED_PACKAGES: ReadonlySet<string> = new Set([
  "zod",
  "hono",
  "@hono/node-server",
  "re2js",
  "modern-tar",
]);

/** The package a bare specifier names (`@scope/name` or `name`). */
function packageOf(specifier: string): string {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
}

/** Leaves every package but those of {@linkcode INLINED_PACKAGES} to Node's resolution. */
function inlinedPackages(): Plugin {
  return {
    name: "inlined-packages",
    setup(b) {
      b.onResolve({ filter: /^[^./]/ }, (args) => {
        if (args.path.startsWith("node:") || INLINED_PACKAGES.has(packageOf(args.path))) {
          return undefined;
        }
        return { path: args.path, external: true };
      });
    },
  };
}

/**
 * Builds `files` (paths relative to `root`, as `./tests/x.test.ts`) and `NODE_PROGRAMS` into
 * `outdir`, which must be inside `root` (the bundles import packages from `root`'s node_modules):
 * a file's bundle is `outdir/<its path>.mjs`. Returns each test file's bundle, or the build's
 * errors (then nothing has a bundle).
 */
export async function bundleTests(
  root: string,
  files: string[],
  outdir: string,
): Promise<{ bundles: Map<string, string>; errors: string[] }> {
  const entries = files.filter((f) => !THROUGH_TSX.has(relative(root, join(root, f))));
  const bundles = new Map<string, string>();
  const programs = NODE_PROGRAMS.map((p) => `./${p}`).filter((p) => !entries.includes(p));
  try {
    await build({
      absWorkingDir: root,
      entryPoints: [...entries, ...programs],
      outdir,
      outbase: root,
      outExtension: { ".js": ".mjs" },
      bundle: true,
      platform: "node",
      format: "esm",
      target: `node${process.versions.node}`,
      keepNames: true,
      // Shared chunks: one build of the SDK for all files, not one per file (40 times the output).
      splitting: true,
      chunkNames: "chunks/[name]-[hash]",
      sourcemap: "linked",
      sourcesContent: false,
      logLevel: "silent",
      define: {
        "import.meta.url": META.url,
        "import.meta.filename": META.filename,
        "import.meta.dirname": META.dirname,
      },
      plugins: [inlinedPackages(), sourcesAsThemselves(root)],
    });
  } catch (error) {
    const errors =
      (error as { errors?: { text: string; location?: { file: string; line: number } }[] })
        .errors?.map((
          e,
        ) => (e.location ? `${e.location.file}:${e.location.line}: ${e.text}` : e.text));
    return { bundles, errors: errors ?? [String(error)] };
  }
  for (const file of entries) {
    bundles.set(file, join(outdir, relative(root, join(root, file)).replace(/\.ts$/, ".mjs")));
  }
  return { bundles, errors: [] };
}
