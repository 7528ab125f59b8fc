/**
 * Writes what the faces repeat of each other, so that each name is listed by hand once: the
 * union and the shared parts of the portable faces, and the runtime entry points. The lists are
 * read with the TypeScript compiler API from `protocol/core.ts` (the protocol core's part the SDK
 * exports, each list under a `// faces:` line naming the end faces it is in), the end faces
 * (`executor/mod.ts`, `harness/mod.ts`, `transport/mod.ts`, `agent/mod.ts`) and
 * `harness/workers/mod.ts`. It writes
 *
 * - the `<core-names>` block of `executor/mod.ts` and `harness/mod.ts`: the lists of
 *   `protocol/core.ts` marked for that face; and of `protocol/mod.ts`: the names of
 *   `protocol/core.ts` beside the contract's (which `scripts/gen-contract.ts` lists there);
 * - `mod.ts`: `protocol/core.ts` whole and each end face but its protocol part, a name two ends
 *   define (`SessionState`) under each end's prefix ({@linkcode JOINED});
 *
 * and for each runtime of {@linkcode RUNTIMES},
 *
 * - `executor/<runtime>.ts`: the executor face, its `ExecutorClient` preset with the runtime's
 *   record (`runtime/<runtime>.ts`) and, on a runtime with a machine, `serveMachine` and the
 *   machine's names;
 * - `harness/<runtime>.ts` (where the runtime has one): the harness face and its `Harness`
 *   preset with the record, and the runtime's own harness names;
 * - `<runtime>.ts`: the whole portable API (`mod.ts`), the two ends' presets and own names from
 *   the files above, and the runtime's own names (its transport, its SQLite store).
 *
 * A file's leading doc comment (the module's documentation, which `deno doc` shows and whose
 * examples `npm run check` type-checks) is written by hand and kept, and so is a face's text
 * outside its block; the rest is generated. `--check` fails when a file differs from what would
 * be written (run by `npm run check`); `npm run gen` rewrites them. Adding a runtime: write its
 * record in `runtime/<runtime>.ts`, add it to {@linkcode RUNTIMES}, run `npm run gen`, then write
 * the new files' doc comments and add the subpaths to `deno.json` and `package.json`.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { API } from "typescript/unstable/sync";
import { SyntaxKind } from "typescript/unstable/ast";
import { isExportDeclaration, isNamedExports, isStringLiteral } from "typescript/unstable/ast/is";

const root = resolve(fileURLToPath(new URL("..", import.meta.url)));

/** Names an entry point takes from a module (paths from the root): `"type X"` for a type. */
interface Names {
  readonly from: string;
  /** `"all"`: every name the module exports (a face of its own, with an explicit list). */
  readonly names: readonly string[] | "all";
}

/** What a runtime's entry points add to the portable faces. */
interface RuntimeEntries {
  /** Its record is `runtime/<name>.ts`'s `<name>Runtime`; its entries are named `<name>.ts`. */
  readonly name: string;
  /** The runtime in prose. */
  readonly label: string;
  /** The PTY host the runtime's `serveMachine` uses by default; null: it serves no machine. */
  readonly machine: { readonly pty: string; readonly from: string } | null;
  /** The harness entry's own names beside its `Harness`; null: no harness entry (no preset). */
  readonly harness: readonly Names[] | null;
  /** The root entry's own names, beside the portable API and the ends' entries. */
  readonly root: readonly Names[];
}

/** What every runtime with a machine adds to the executor face (`executor/machine/`). */
const MACHINE: readonly Names[] = [
  { from: "executor/machine/child-env.node.ts", names: ["type ChildEnvironmentOptions"] },
  { from: "executor/machine/limits.ts", names: ["type MachineLimits"] },
  { from: "executor/machine/mcp-config.ts", names: ["type McpServerConfig"] },
  {
    from: "executor/machine/pty.ts",
    names: [
      "type Pty",
      "type PtyEvents",
      "type PtyExit",
      "type PtyHost",
      "PtySpawnError",
      "type PtySpawnOptions",
    ],
  },
  { from: "executor/machine/serve.node.ts", names: ["type ServeMachineOptions"] },
];

/** The inspector's server (`node:http`, which Node, Deno and Bun run). */
const INSPECTOR: readonly Names[] = [{
  from: "http/inspector/serve.node.ts",
  names: ["type InspectorServer", "serveInspector", "type ServeInspectorOptions"],
}];

/** The runtimes, each with what its entry points export beside the portable faces. */
const RUNTIMES: readonly RuntimeEntries[] = [
  {
    name: "node",
    label: "Node",
    machine: { pty: "nodePty", from: "executor/machine/pty.node.ts" },
    harness: INSPECTOR,
    root: [
      { from: "transport/node.ts", names: ["dialWebSocket", "serveWebSocket"] },
      { from: "runtime/node.ts", names: ["openSqliteStore"] },
      {
        from: "harness/store/sqlite.node.ts",
        names: ["type NodeSqliteDriver", "type NodeSqliteStoreOptions"],
      },
    ],
  },
  {
    name: "deno",
    label: "Deno",
    machine: { pty: "nodePty", from: "executor/machine/pty.node.ts" },
    harness: INSPECTOR,
    root: [
      { from: "transport/deno.ts", names: ["dialWebSocket", "serveWebSocket"] },
      {
        from: "harness/store/sqlite.deno.ts",
        names: ["type DenoSqliteDriver", "type DenoSqliteStoreOptions", "openSqliteStore"],
      },
    ],
  },
  {
    name: "bun",
    label: "Bun",
    machine: { pty: "bunPty", from: "executor/machine/pty.bun.ts" },
    harness: INSPECTOR,
    root: [
      { from: "transport/bun.ts", names: ["dialWebSocket", "serveWebSocket"] },
      {
        from: "harness/store/sqlite.bun.ts",
        names: ["type BunSqliteDriver", "type BunSqliteStoreOptions", "openSqliteStore"],
      },
    ],
  },
  {
    name: "workers",
    label: "Cloudflare Workers",
    machine: null,
    // The harness on Workers is the portable one, hosted by a Durable Object.
    harness: null,
    root: [
      { from: "transport/workers.ts", names: ["dialWebSocket"] },
      { from: "harness/workers/mod.ts", names: "all" },
      {
        from: "harness/store/durable-object.workers.ts",
        names: [
          "DurableObjectKvStore",
          "type DurableObjectListOptions",
          "durableObjectSqlDriver",
          "type DurableObjectSqlLike",
          "type DurableObjectStoreOptions",
          "type DurableObjectStoreStorage",
          "type DurableObjectTransactionLike",
          "openDurableObjectStore",
        ],
      },
    ],
  },
];

/** One exported name. */
interface Name {
  readonly name: string;
  readonly type: boolean;
  /** The name in the module it comes from, where the face renames it (`export { a as b }`). */
  readonly local?: string;
}

/** A name as a face's export list has it: where from, and what stands around its statement. */
interface Export extends Name {
  /** The module it comes from, from the root. */
  readonly origin: string;
  /** Its statement stands inside the file's generated `<core-names>` block. */
  readonly generated: boolean;
  /** The end faces the `// faces:` line above its statement names (`protocol/core.ts`). */
  readonly faces: readonly string[] | undefined;
}

const local = (n: Name) => n.local ?? n.name;

const byName = (a: Name, b: Name) => {
  const [x, y] = [local(a).toLowerCase(), local(b).toLowerCase()];
  if (x !== y) return x < y ? -1 : 1;
  if (local(a) !== local(b)) return local(a) < local(b) ? -1 : 1;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
};

const LISTS_ONLY = 'a face lists its names (`export { … } from "…"`); found another export';

const parse = (spec: string): Name =>
  spec.startsWith("type ") ? { name: spec.slice(5), type: true } : { name: spec, type: false };

/** The block of a face that this script writes: the protocol core's names it exports. */
const BEGIN_CORE = "// <core-names>";
const END_CORE = "// </core-names>";

/** A `// faces: executor, harness (why)` line: the end faces a list of `protocol/core.ts` is in. */
const FACES_LINE = /^\/\/ faces: ([^(\n]*)/m;

/**
 * The names each of `files` exports, from its export lists (`export { … } from`, `export type
 * { … }`), read by the compiler's parser. A face lists its names: anything else it exports
 * (`export *`, a declaration) is refused.
 */
function exportLists(files: readonly string[]): Map<string, Export[]> {
  const dir = mkdtempSync(join(tmpdir(), "bma-faces-"));
  const api = new API({ cwd: root });
  try {
    const config = join(dir, "tsconfig.json");
    writeFileSync(
      config,
      JSON.stringify({
        extends: join(root, "tsconfig.base.json"),
        compilerOptions: { lib: ["ES2022"], types: [], noResolve: true },
        files: files.map((file) => join(root, file)),
      }),
    );
    const { program } = api.updateSnapshot({ openProjects: [config] }).getProjects()[0];
    const lists = new Map<string, Export[]>();
    for (const file of files) {
      const source = program.getSourceFile(join(root, file));
      if (!source) throw new Error(`${file}: not read`);
      const text = readFileSync(join(root, file), "utf8");
      const block = [text.indexOf(BEGIN_CORE), text.indexOf(END_CORE)];
      const names: Export[] = [];
      let faces: string[] | undefined;
      for (const statement of source.statements) {
        if (isExportDeclaration(statement)) {
          const clause = statement.exportClause;
          const from = statement.moduleSpecifier;
          if (!clause || !isNamedExports(clause) || !from || !isStringLiteral(from)) {
            throw new Error(`${file}: ${LISTS_ONLY}`);
          }
          const leading = text.slice(statement.pos, statement.end);
          const line = FACES_LINE.exec(leading.slice(0, leading.search(/^export\b/m)));
          if (line) faces = line[1].split(/[\s,]+/).filter(Boolean);
          const origin = relative(root, resolve(root, dirname(file), from.text));
          const generated = block[0] < statement.end && statement.end < block[1];
          for (const specifier of clause.elements) {
            const type = statement.isTypeOnly || specifier.isTypeOnly;
            const name = specifier.name.text;
            const renamed = specifier.propertyName?.text;
            names.push({
              name,
              type,
              ...(renamed && renamed !== name ? { local: renamed } : {}),
              origin,
              generated,
              faces,
            });
          }
        } else {
          const { modifiers } = statement as { modifiers?: readonly { kind: SyntaxKind }[] };
          if (modifiers?.some((m) => m.kind === SyntaxKind.ExportKeyword)) {
            throw new Error(`${file}: ${LISTS_ONLY}`);
          }
        }
      }
      lists.set(file, names);
    }
    return lists;
  } finally {
    api.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A file's leading doc comment, or `fallback` where it has none (or is not there yet). */
function docComment(file: string, fallback: string): string {
  const path = join(root, file);
  const text = existsSync(path) ? readFileSync(path, "utf8") : "";
  return /^\/\*\*[\s\S]*?\*\/\n/.exec(text)?.[0] ?? fallback;
}

/** A module specifier from `file` to `target` (both from the root). */
function specifier(file: string, target: string): string {
  const path = relative(dirname(file), target);
  return path.startsWith(".") ? path : `./${path}`;
}

/** `export … from` statements of `names`: values and types apart (`split`), or in one list. */
function reexport(names: readonly Name[], from: string, split = false): string {
  const sorted = [...names].sort(byName);
  const spelled = (n: Name) => n.local ? `${n.local} as ${n.name}` : n.name;
  const values = sorted.filter((n) => !n.type).map(spelled);
  const types = sorted.filter((n) => n.type).map(spelled);
  const statement = (type: boolean, list: readonly string[]) =>
    list.length ? `export ${type ? "type " : ""}{ ${list.join(", ")} } from "${from}";\n` : "";
  if (split || !values.length) return statement(false, values) + statement(true, types);
  return statement(false, sorted.map((n) => (n.type ? `type ${spelled(n)}` : spelled(n))));
}

/** The source's names, read once: the faces' lists and the names of the table. */
interface Lists {
  /** The names of `names`, as its module exports them. */
  of(names: Names): Name[];
  /** The names of `face` (`mod.ts`, …) but `taken`, which the entry point exports otherwise. */
  faceBut(face: string, taken: readonly Name[]): Name[];
  /** Whether `file` is a public subpath (deno.json's exports): then it carries its face. */
  published(file: string): boolean;
}

/** `label`'s, in prose. */
const possessive = (label: string) => label.endsWith("s") ? `${label}'` : `${label}'s`;

/** An entry point of `runtime`: its kept doc comment, the generated header, `body`. */
function entry(file: string, face: string, runtime: RuntimeEntries, body: string): string {
  const fallback = `/**\n * bma-executor-sdk for ${runtime.label}: what this entry point injects.` +
    `\n *\n * @module\n */\n`;
  return docComment(file, fallback) +
    `// Generated by scripts/gen-faces.ts from ${face} and runtime/${runtime.name}.ts. Do not edit:\n` +
    "// `npm run gen` rewrites what is below the doc comment (which is written by hand).\n" +
    body;
}

/** A generated entry point: its path, its text, and what it adds to its face. */
interface Entry {
  readonly file: string;
  readonly text: string;
  /** Its presets and its runtime's own names, which the root entry takes from it. */
  readonly adds: readonly Name[];
}

/** Each of `names` re-exported from its module, as seen from `file`, under a comment. */
function ownNames(file: string, names: readonly Names[], lists: Lists): string {
  if (!names.length) return "";
  return "// This runtime's own.\n" +
    names.map((n) => reexport(lists.of(n), specifier(file, n.from))).join("");
}

/** `executor/<runtime>.ts`: `ExecutorClient` (and `serveMachine`) on the runtime's record. */
function executorEntry(runtime: RuntimeEntries, lists: Lists): Entry {
  const { name, label, machine } = runtime;
  const theirs = possessive(label);
  const file = `executor/${name}.ts`;
  const own: Names[] = machine ? [...MACHINE, { from: machine.from, names: [machine.pty] }] : [];
  const adds = [
    ...["ExecutorClient", ...(machine ? ["serveMachine"] : [])].map(parse),
    ...own.flatMap(lists.of),
  ];
  const face = lists.published(file)
    ? "// The portable executor face (`mod.ts`); the names declared or re-exported below take\n" +
      "// the place of its own (a module's own export wins over one of `export *`).\n" +
      'export * from "./mod.ts";\n'
    : "";
  const client = `
/**
 * {@linkcode PortableExecutorClient} with the transports of \`runtime/${name}.ts\` as its
 * defaults (\`dial\`, \`server\`, \`socketFetch\`): ${theirs}.
 */
export class ExecutorClient extends PortableExecutorClient {
  /** A client with ${theirs} transports unless its options name their own. */
  constructor(options: ExecutorClientOptions) {
    super(executorOptions(runtime, options));
  }
}
`;
  const serveMachine = machine && `
/**
 * Serves this machine on \`client\`: the \`bash\` and file tools confined to \`options.workdir\`,
 * \`process.*\`, \`terminal.*\` (PTYs of {@linkcode ${machine.pty}} unless \`options.pty\` names
 * others; \`pty: false\` leaves terminals out), file transfer, \`skill.install\`,
 * \`git.credentials\`, \`workspace.backup\` and, with \`mcpServers\`, the MCP relay. Each
 * advertises its capability. Dispose to withdraw them: \`dispose()\` ends the machine's
 * processes in the background, \`await using\` waits until they are gone.
 *
 * \`\`\`ts
 * import { ExecutorClient, serveMachine } from "bma-executor-sdk/${name}";
 *
 * const client = new ExecutorClient({
 *   harnessUrl: "ws://127.0.0.1:7700",
 *   executor: { name: "my-app", os: "linux", arch: "x64", version: "1.0.0" },
 * });
 * const machine = serveMachine(client, { workdir: "./work" });
 * await client.start();
 * // machine.dispose() withdraws it all and ends the terminals.
 * \`\`\`
 */
export function serveMachine(
  client: PortableExecutorClient,
  options: ServeMachineOptions,
): Disposable & AsyncDisposable {
  return serveMachineWith(client, { pty: runtime.pty, ...options });
}
`;
  const imports = `import { ${name}Runtime as runtime } from "../runtime/${name}.ts";
import { executorOptions } from "../runtime/runtime.ts";
${
    serveMachine
      ? `import { serveMachine as serveMachineWith, type ServeMachineOptions } from "./machine/serve.node.ts";
import { type Disposable, ExecutorClient as PortableExecutorClient, type ExecutorClientOptions } from "./mod.ts";`
      : `import { ExecutorClient as PortableExecutorClient, type ExecutorClientOptions } from "./mod.ts";`
  }

`;
  const body = imports + face + ownNames(file, own, lists) + client + (serveMachine || "");
  return { file, text: entry(file, "executor/mod.ts", runtime, body), adds };
}

/** `harness/<runtime>.ts`: `Harness` on the runtime's record; null where it has none. */
function harnessEntry(runtime: RuntimeEntries, lists: Lists): Entry | null {
  const { name, label, harness: own } = runtime;
  if (!own) return null;
  const theirs = possessive(label);
  const file = `harness/${name}.ts`;
  const adds = [parse("Harness"), ...own.flatMap(lists.of)];
  const face = lists.published(file)
    ? "// The portable harness face (`mod.ts`); the names declared or re-exported below take\n" +
      "// the place of its own (a module's own export wins over one of `export *`).\n" +
      'export * from "./mod.ts";\n'
    : "";
  const body = `import { ${name}Runtime as runtime } from "../runtime/${name}.ts";
import { harnessOptions } from "../runtime/runtime.ts";
import { Harness as PortableHarness, type HarnessOptions } from "./mod.ts";

${face}${ownNames(file, own, lists)}
/**
 * {@linkcode PortableHarness} with the server, dialer and holder identity of
 * \`runtime/${name}.ts\` as its defaults (\`server\`, \`dial\`, \`holderIdentity\`): ${theirs}.
 */
export class Harness extends PortableHarness {
  /** A harness with ${theirs} server and dialer unless its options name their own. */
  constructor(options: HarnessOptions = {}) {
    super(harnessOptions(runtime, options));
  }
}
`;
  return { file, text: entry(file, "harness/mod.ts", runtime, body), adds };
}

/** `<runtime>.ts`: the portable API, the ends' entries' names, the runtime's own. */
function rootEntry(runtime: RuntimeEntries, ends: readonly Entry[], lists: Lists): string {
  const file = `${runtime.name}.ts`;
  const taken = [...ends.flatMap((e) => e.adds), ...runtime.root.flatMap(lists.of)];
  void taken; // the names below shadow mod.ts's own
  const body =
    "// The portable API (`mod.ts`); the names re-exported below take the place of its\n" +
    "// own (a module's own export wins over one of `export *`).\n" +
    'export * from "./mod.ts";\n' +
    `// The ends on ${runtime.label}: their presets and the names of this runtime they add.\n` +
    ends.map((e) => reexport(e.adds, specifier(file, e.file))).join("") +
    ownNames(file, runtime.root, lists);
  return entry(file, "mod.ts", runtime, body);
}

/** The protocol core's part the SDK's faces export, each list marked with the faces it is in. */
const CORE = "protocol/core.ts";

/** The end faces whose `<core-names>` block lists what of {@linkcode CORE} they export. */
const ENDS: readonly { readonly face: string; readonly word: string }[] = [
  { face: "executor/mod.ts", word: "executor" },
  { face: "harness/mod.ts", word: "harness" },
];

/** The words a `// faces:` line of {@linkcode CORE} may say (`none`: the root's alone). */
const FACE_WORDS = new Set([...ENDS.map((e) => e.word), "none"]);

/**
 * The faces the root (`mod.ts`) joins after {@linkcode CORE}, each but its protocol part. A name
 * a later face shares with an earlier one, from another module (each end's `SessionState`), is
 * exported under both faces' prefixes, and the first face's also as it is.
 */
const JOINED: readonly { readonly face: string; readonly prefix: string; readonly what: string }[] =
  [
    { face: "transport/mod.ts", prefix: "Transport", what: "the transports" },
    { face: "executor/mod.ts", prefix: "Executor", what: "the executor end" },
    { face: "harness/mod.ts", prefix: "Harness", what: "the harness end" },
    { face: "agent/mod.ts", prefix: "Agent", what: "the agent end" },
  ];

/** The `/protocol` face: {@linkcode CORE}'s names but the contract's come in its block. */
const PROTOCOL = "protocol/mod.ts";

const plain = (n: Name): Name => ({ name: n.name, type: n.type });

/** `text` (of `file`) with its `<core-names>` block re-exporting `names` from `from`. */
function withCoreBlock(file: string, names: readonly Name[], from: string): string {
  const text = readFileSync(join(root, file), "utf8");
  const begin = text.indexOf(BEGIN_CORE);
  const end = text.indexOf(END_CORE);
  if (begin < 0 || end < begin) {
    throw new Error(`${file} lacks its ${BEGIN_CORE} … ${END_CORE} block`);
  }
  return text.slice(0, begin) + `${BEGIN_CORE}\n` + reexport(names, from, true) + text.slice(end);
}

/** `mod.ts`: {@linkcode CORE} whole, then each of {@linkcode JOINED} but what it repeats. */
function rootFace(read: Map<string, Export[]>): { text: string; names: Name[] } {
  /** Each name the root exports as it is: where it comes from, and the part that lists it. */
  const taken = new Map<string, { origins: string[]; part: Name[]; prefix: string | undefined }>();
  const core = read.get(CORE)!.map(plain);
  // A face takes a name of the core from it (the agent's face) or from where it comes.
  for (const n of read.get(CORE)!) {
    taken.set(n.name, { origins: [CORE, n.origin], part: core, prefix: undefined });
  }
  const parts = JOINED.map(({ face, prefix }) => {
    const part: Name[] = [];
    for (const n of read.get(face)!) {
      if (n.generated) continue;
      const first = taken.get(n.name);
      if (first?.origins.includes(n.origin)) continue;
      if (!first) {
        part.push(plain(n));
        taken.set(n.name, { origins: [n.origin], part, prefix });
        continue;
      }
      if (first.prefix === undefined) throw new Error(`${face}: ${n.name} is a name of ${CORE}`);
      const ours = { name: prefix + n.name, type: n.type, local: n.name };
      const theirs = { name: first.prefix + n.name, type: n.type, local: n.name };
      for (const alias of [ours, theirs]) {
        if (taken.has(alias.name)) throw new Error(`${face}: ${alias.name} is taken`);
      }
      if (!first.part.some((m) => m.name === theirs.name)) first.part.push(theirs);
      part.push(ours);
    }
    return part;
  });
  const fallback = "/**\n * bma-executor-sdk: the portable API.\n *\n * @module\n */\n";
  const text = docComment("mod.ts", fallback) +
    `// Generated by scripts/gen-faces.ts from ${CORE} and the faces it names. Do not edit:\n` +
    "// `npm run gen` rewrites what is below the doc comment (which is written by hand).\n" +
    `// The protocol core's part the SDK names (${CORE}), whole.\n` +
    reexport(core, specifier("mod.ts", CORE), true) +
    JOINED.map(({ face, what }, i) =>
      `// ${what[0].toUpperCase()}${what.slice(1)} (${face}), but the names above.\n` +
      reexport(parts[i], specifier("mod.ts", face), true)
    ).join("");
  const names = [core, ...parts].flat().map((n) => ({ name: n.name, type: n.type }));
  return { text, names };
}

/**
 * The faces this script writes, each under its path from the root, before formatting: `mod.ts`
 * whole, the `<core-names>` blocks of {@linkcode ENDS} and {@linkcode PROTOCOL}; and the names
 * each face of the portable API then exports.
 */
function faces(
  read: Map<string, Export[]>,
): { files: Map<string, string>; names: Map<string, Name[]> } {
  const core = read.get(CORE)!;
  for (const n of core) {
    const unknown = n.faces?.find((word) => !FACE_WORDS.has(word));
    if (!n.faces || unknown !== undefined) {
      throw new Error(
        `${CORE}: ${n.name}'s list needs a \`// faces:\` line above it naming ` +
          `${[...FACE_WORDS].join(", ")}${unknown === undefined ? "" : ` (not ${unknown})`}`,
      );
    }
  }
  const files = new Map<string, string>();
  const names = new Map<string, Name[]>();
  for (const { face, word } of ENDS) {
    const part = core.filter((n) => n.faces!.includes(word)).map(plain);
    files.set(face, withCoreBlock(face, part, specifier(face, CORE)));
    names.set(face, [...part, ...read.get(face)!.filter((n) => !n.generated).map(plain)]);
  }
  const beside = core.filter((n) => !n.origin.startsWith("protocol/generated/")).map(plain);
  files.set(PROTOCOL, withCoreBlock(PROTOCOL, beside, specifier(PROTOCOL, CORE)));
  const rootNames = rootFace(read);
  files.set("mod.ts", rootNames.text);
  names.set("mod.ts", rootNames.names);
  return { files, names };
}

/** The generated files, each under its path from the root, before formatting. */
function generate(): Map<string, string> {
  const whole = RUNTIMES.flatMap((r) => r.root.filter((n) => n.names === "all").map((n) => n.from));
  const read = exportLists([CORE, ...JOINED.map((j) => j.face), ...whole]);
  const { files, names } = faces(read);
  const exports: Record<string, string> = JSON.parse(
    readFileSync(join(root, "deno.json"), "utf8"),
  ).exports;
  const published = new Set(Object.values(exports).map((path) => relative(".", path)));
  const lists: Lists = {
    of: (n) => n.names === "all" ? read.get(n.from)! : n.names.map(parse),
    faceBut: (face, taken) => {
      const skip = new Set(taken.map((n) => n.name));
      return names.get(face)!.filter((n) => !skip.has(n.name));
    },
    published: (file) => published.has(file),
  };
  for (const runtime of RUNTIMES) {
    const ends = [executorEntry(runtime, lists), harnessEntry(runtime, lists)]
      .filter((e): e is Entry => e !== null);
    for (const end of ends) files.set(end.file, end.text);
    files.set(`${runtime.name}.ts`, rootEntry(runtime, ends, lists));
  }
  return files;
}

/** `files` formatted as `deno fmt` formats the repository. */
function formatted(files: Map<string, string>): Map<string, string> {
  const dir = mkdtempSync(join(tmpdir(), "bma-faces-fmt-"));
  try {
    const paths = [...files].map(([file, text]) => {
      const path = join(dir, file.replaceAll("/", "__"));
      writeFileSync(path, text);
      return path;
    });
    execFileSync(
      join(root, "node_modules/.bin/deno"),
      ["fmt", "--quiet", "--no-config", "--line-width", "100", ...paths],
      { stdio: ["ignore", "inherit", "inherit"] },
    );
    return new Map([...files.keys()].map((file, i) => [file, readFileSync(paths[i], "utf8")]));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function main(): void {
  const check = process.argv.includes("--check");
  let stale = false;
  for (const [file, text] of formatted(generate())) {
    const path = join(root, file);
    const current = existsSync(path) ? readFileSync(path, "utf8") : "";
    if (current === text) continue;
    if (check) {
      console.error(`${file} is out of date with the faces it joins: run npm run gen`);
      stale = true;
    } else {
      writeFileSync(path, text);
      console.log(`wrote ${file}`);
    }
  }
  if (stale) process.exit(1);
  if (check) console.log("the runtime entry points and the joined faces match the faces");
}

main();
