/**
 * The public surface, face by face: every name each subpath of `deno.json`'s exports (npm's
 * `exports` are the same list) exports, marked `value` (there at run time: a class, function or
 * constant) or `type`, as the type checker sees it through TypeScript's compiler API, compared
 * with the committed `surface.snapshot.txt` beside this file, so that a change to the surface
 * shows in review. After a deliberate change, rewrite the snapshot and commit it with the change:
 *
 *     BMA_UPDATE_SURFACE=1 npx tsx scripts/test.ts --only node tests/publication/surface.test.ts
 *
 * And the rules the faces keep:
 * - no face exports a value as a type only (as `export type *` once leaked the contract's zod
 *   schemas and predicates: an editor offered `FooSchema` where it was no value);
 * - the contract's schemas and predicates (and its method and tool tables) are values of
 *   `/protocol` alone;
 * - `/node`, `/deno`, `/bun` and `/workers` export the same names, each apart from its runtime's
 *   own ({@linkcode RUNTIME_OWN}), and all of the portable root's; `/executor/{node,deno,bun}`
 *   agree apart from their PTY, `/harness/{node,deno,bun}` agree entirely.
 *
 * The type checker's part runs from Node only: the compiler API (`typescript/unstable/sync`)
 * reads the `tsgo` process's pipes synchronously through their file descriptors, which Deno
 * (EBADF) and Bun (no `_handle.fd`) do not give; the surface is the same sources everywhere.
 * On every runtime, each face's module is imported and its run-time exports must be the
 * snapshot's `value` names: the values are really there, and nothing else is.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const SNAPSHOT = join(ROOT, "tests/publication/surface.snapshot.txt");
const onNode = !("Deno" in globalThis) && !("Bun" in globalThis);
const UPDATE = onNode && process.env.BMA_UPDATE_SURFACE === "1";

/** The public subpaths and their source modules (`deno.json`; npm's exports are the same). */
const EXPORTS: Record<string, string> = JSON.parse(
  readFileSync(join(ROOT, "deno.json"), "utf8"),
).exports;

/** The faces of the SDK: the ones that name what a user calls, not the wire vocabulary. */
const SDK_FACES = Object.keys(EXPORTS).filter((face) => face !== "./protocol");

/** The contract's values any face may export: its version and its method and tool names. */
const CONTRACT_CONSTANTS = new Set(["CONTRACT_VERSION", "methods", "PROTOCOLS", "TOOL_NAMES"]);

/** What Node, Deno and Bun serve that a Worker cannot: this machine, a listening socket, a file. */
const PROCESS_RUNTIME = [
  "ChildEnvironmentOptions",
  "InspectorServer",
  "MachineLimits",
  "McpServerConfig",
  "openPostgresStore",
  "openSqliteStore",
  "OpenPostgresStoreOptions",
  "PostgresClientLike",
  "PostgresCommitUnknownError",
  "PostgresHarnessStore",
  "PostgresQueryable",
  "PostgresRows",
  "PostgresStoreOptions",
  "PostgresStoreUnavailableError",
  "Pty",
  "PtyEvents",
  "PtyExit",
  "PtyHost",
  "PtySpawnError",
  "PtySpawnOptions",
  "serveInspector",
  "ServeInspectorOptions",
  "serveMachine",
  "ServeMachineOptions",
  "serveWebSocket",
];

/** Each runtime entry point's own names: the others export the rest alike. */
const RUNTIME_OWN: Record<string, readonly string[]> = {
  "./node": [...PROCESS_RUNTIME, "nodePty", "NodeSqliteDriver", "NodeSqliteStoreOptions"],
  "./deno": [...PROCESS_RUNTIME, "nodePty", "DenoSqliteDriver", "DenoSqliteStoreOptions"],
  "./bun": [...PROCESS_RUNTIME, "bunPty", "BunSqliteDriver", "BunSqliteStoreOptions"],
  "./workers": [
    "BRAIN_API_PREFIX",
    "createHarnessWorker",
    "DurableObjectIdLike",
    "DurableObjectKvStore",
    "DurableObjectListOptions",
    "DurableObjectNamespaceLike",
    "durableObjectSqlDriver",
    "DurableObjectSqlLike",
    "DurableObjectStateLike",
    "DurableObjectStorageLike",
    "DurableObjectStoreOptions",
    "DurableObjectStoreStorage",
    "DurableObjectStubLike",
    "DurableObjectTransactionLike",
    "HarnessEnv",
    "HarnessObject",
    "HarnessObjectOptions",
    "harnessOptionsFromEnv",
    "HarnessWorker",
    "HarnessWorkerOptions",
    "openDurableObjectStore",
    "routeOfToken",
    "WorkersWebSocket",
  ],
};

/** How a face exports a name. */
interface Exported {
  /** `value`: usable at run time; `type`: a type only (declared so, or exported with `export type`). */
  readonly kind: "value" | "type";
  /** The name is a value exported as a type only (`export type { aValue }`, `export type *`). */
  readonly typeOnlyValue: boolean;
  /** The declaration is in the generated contract module. */
  readonly fromContract: boolean;
}

type Surface = Map<string, Map<string, Exported>>;

const byName = (a: string, b: string) => {
  const [x, y] = [a.toLowerCase(), b.toLowerCase()];
  return x < y ? -1 : x > y ? 1 : a < b ? -1 : a > b ? 1 : 0;
};

/**
 * Every face's exports, read by the type checker. A name whose symbol is a value is a value of
 * the face unless using it as one fails to compile (what `export type` makes of a value), which
 * a probe module that touches each such name on each face's namespace shows.
 */
async function readSurface(): Promise<Surface> {
  const { API, SymbolFlags } = await import("typescript/unstable/sync");
  const dir = mkdtempSync(join(tmpdir(), "bma-surface-"));
  try {
    const probe = join(dir, "probe.ts");
    const config = join(dir, "tsconfig.json");
    writeFileSync(probe, "export {};\n");
    writeFileSync(
      config,
      JSON.stringify({
        extends: join(ROOT, "tsconfig.base.json"),
        compilerOptions: {
          lib: ["ES2022", "DOM"],
          types: ["node"],
          typeRoots: [join(ROOT, "node_modules/@types")],
        },
        files: [...Object.values(EXPORTS).map((file) => join(ROOT, file)), probe],
      }),
    );
    const api = new API({ cwd: ROOT });
    try {
      let project = api.updateSnapshot({ openProjects: [config] }).getProjects()[0];
      const contract = join(ROOT, "protocol/generated/contract.ts");
      const surface: Surface = new Map();
      const probed: { at: number; face: string; name: string }[] = [];
      let text = "";
      for (const [i, [face, file]] of Object.entries(EXPORTS).entries()) {
        const source = project.program.getSourceFile(join(ROOT, file));
        assert.ok(source, `${file} is in the program`);
        const module = project.checker.getSymbolAtLocation(source);
        assert.ok(module, `${file} is a module`);
        const names = new Map<string, Exported>();
        surface.set(face, names);
        text += `import * as f${i} from ${JSON.stringify(join(ROOT, file))};\n`;
        for (const exported of project.checker.getExportsOfModule(module)) {
          const symbol = exported.flags & SymbolFlags.Alias
            ? project.checker.getAliasedSymbol(exported)
            : exported;
          const value = (symbol.flags & SymbolFlags.Value) !== 0;
          const fromContract = symbol.declarations.some((d) => d.path === contract);
          names.set(exported.name, {
            kind: value ? "value" : "type",
            typeOnlyValue: false,
            fromContract,
          });
          if (value) {
            text += `f${i}.`;
            probed.push({ at: text.length, face, name: exported.name });
            text += `${exported.name};\n`;
          }
        }
      }
      writeFileSync(probe, text);
      project = api.updateSnapshot({ fileChanges: { changed: [probe] } }).getProjects()[0];
      const at = new Map(probed.map((p) => [p.at, p]));
      for (const diagnostic of project.program.getSemanticDiagnostics(probe)) {
        const hit = at.get(diagnostic.pos);
        assert.ok(hit, `the probe fails only where it touches a name: ${diagnostic.text}`);
        const names = surface.get(hit.face)!;
        names.set(hit.name, { ...names.get(hit.name)!, kind: "type", typeOnlyValue: true });
      }
      return surface;
    } finally {
      api.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The snapshot's text: each face's names, sorted, one a line. */
function render(surface: Surface): string {
  let out =
    "# The public surface: every subpath's exported names, `value` (there at run time) or\n" +
    "# `type`. Written by tests/publication/surface.test.ts (BMA_UPDATE_SURFACE=1 rewrites it).\n";
  for (const [face, names] of surface) {
    const values = [...names.values()].filter((e) => e.kind === "value").length;
    out += `\n## ${face} (${names.size} names: ${values} values, ${names.size - values} types)\n`;
    for (const name of [...names.keys()].sort(byName)) out += `${names.get(name)!.kind} ${name}\n`;
  }
  return out;
}

/** The names of `face` less `except`. */
function namesOf(surface: Surface, face: string, except: readonly string[] = []): string[] {
  const names = surface.get(face);
  assert.ok(names, `${face} is a face`);
  const skip = new Set(except);
  return [...names].filter(([name]) => !skip.has(name)).map(([name, e]) => `${e.kind} ${name}`)
    .sort();
}

describe("the public surface", {
  timeout: 120_000,
  skip: !onNode && "the compiler API's synchronous pipes run on Node only",
}, () => {
  let surface: Surface;
  before(async () => {
    surface = await readSurface();
  });
  after(() => {
    if (UPDATE && surface) writeFileSync(SNAPSHOT, render(surface));
  });

  it("matches surface.snapshot.txt (BMA_UPDATE_SURFACE=1 rewrites it)", () => {
    if (UPDATE) return;
    let committed = "";
    try {
      committed = readFileSync(SNAPSHOT, "utf8");
    } catch { /* missing: the comparison below says so */ }
    assert.equal(
      render(surface),
      committed,
      "the surface changed: if on purpose, rewrite tests/publication/surface.snapshot.txt " +
        "(BMA_UPDATE_SURFACE=1) and commit it",
    );
  });

  it("exports no value as a type only (no zod schema or predicate as a type)", () => {
    const leaked: string[] = [];
    for (const [face, names] of surface) {
      for (const [name, e] of names) if (e.typeOnlyValue) leaked.push(`${face}: ${name}`);
    }
    const contractLeaks = leaked.filter((l) => /: (\w+Schema|is[A-Z]\w*)$/.test(l));
    assert.deepEqual(contractLeaks, [], "schemas or predicates of the contract as types");
    assert.deepEqual(leaked, [], "values as types only");
  });

  it("keeps the contract's schemas, predicates and tables under /protocol alone", () => {
    const protocol = surface.get("./protocol")!;
    for (const face of SDK_FACES) {
      const misplaced = [...surface.get(face)!]
        .filter(([name, e]) =>
          e.fromContract && (e.kind === "value" || e.typeOnlyValue) &&
          !CONTRACT_CONSTANTS.has(name)
        )
        .map(([name]) => name);
      assert.deepEqual(misplaced, [], `${face} exports values of the contract module`);
    }
    // And /protocol has them, apart from the types: one of each for a wire type.
    for (const name of ["AckSchema", "isAck", "METHOD_SPECS", "TOOL_SPECS"]) {
      assert.equal(protocol.get(name)?.kind, "value", `/protocol exports ${name} as a value`);
    }
    assert.equal(protocol.get("Ack")?.kind, "type");
  });

  it("/node, /deno, /bun and /workers export the same names apart from their runtime's own", () => {
    const runtimes = Object.keys(RUNTIME_OWN);
    for (const face of runtimes) {
      const names = surface.get(face)!;
      const missing = RUNTIME_OWN[face].filter((name) => !names.has(name));
      assert.deepEqual(missing, [], `${face} exports its own names (or the allow-list is stale)`);
    }
    const common = namesOf(surface, runtimes[0], RUNTIME_OWN[runtimes[0]]);
    for (const face of runtimes.slice(1)) {
      assert.deepEqual(namesOf(surface, face, RUNTIME_OWN[face]), common, `${face} vs /node`);
    }
    // The runtime entry points export the whole portable API (the root), presets included.
    const root = namesOf(surface, ".");
    const shared = new Set(common);
    assert.deepEqual(root.filter((name) => !shared.has(name)), [], "names of . missing there");
  });

  it("the runtime presets of /executor and /harness agree with each other", () => {
    const pty: Record<string, string[]> = {
      "./executor/node": ["nodePty"],
      "./executor/deno": ["nodePty"],
      "./executor/bun": ["bunPty"],
    };
    const executor = namesOf(surface, "./executor/node", pty["./executor/node"]);
    for (const face of ["./executor/deno", "./executor/bun"]) {
      assert.deepEqual(namesOf(surface, face, pty[face]), executor, `${face} vs /executor/node`);
    }
    const harness = namesOf(surface, "./harness/node");
    for (const face of ["./harness/deno", "./harness/bun"]) {
      assert.deepEqual(namesOf(surface, face), harness, `${face} vs /harness/node`);
    }
  });
});

/** The committed snapshot's `value` names of each face. */
function snapshotValues(): Map<string, string[]> {
  const faces = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const line of readFileSync(SNAPSHOT, "utf8").split("\n")) {
    const face = /^## (\S+) /.exec(line)?.[1];
    if (face) faces.set(face, current = []);
    else if (line.startsWith("value ")) current?.push(line.slice("value ".length));
  }
  return faces;
}

describe(
  "the public surface at run time",
  { timeout: 120_000, skip: UPDATE && "rewriting" },
  () => {
    it("each face's module exports exactly the snapshot's values", async () => {
      const expected = snapshotValues();
      assert.deepEqual([...expected.keys()], Object.keys(EXPORTS), "the snapshot has every face");
      for (const [face, file] of Object.entries(EXPORTS)) {
        const module: Record<string, unknown> = await import(join(ROOT, file));
        assert.deepEqual(
          Object.keys(module).sort(byName),
          [...expected.get(face)!].sort(byName),
          `${face} (${file}) at run time`,
        );
      }
    });
  },
);
