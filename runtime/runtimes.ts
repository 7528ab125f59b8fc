/**
 * The runtimes, as data: the one list of them, and what each one's entry points export beside
 * the portable faces. `scripts/gen-faces.ts` writes from it each runtime's entry points
 * (`<name>.ts`, `executor/<name>.ts`, `harness/<name>.ts`), their subpaths in `package.json` and
 * `deno.json` and `tsconfig.core.json`'s exclusion of the files named for a runtime; the surface
 * test and `npm run check`'s runtime-import guard read it too. A runtime's pieces are its
 * `Runtime` record (`runtime/runtime.ts`), `runtime/<name>.ts`'s `<name>Runtime`.
 *
 * Plain data with no imports, so that scripts and tests read it without loading any runtime's
 * code. Adding a runtime: write its record, add it to {@linkcode RUNTIMES}, run `npm run gen`
 * and write the doc comments of the new entry points.
 *
 * @module
 */
/** Names an entry point takes from a module (paths from the root): `"type X"` for a type. */
export interface Names {
  readonly from: string;
  /** `"all"`: every name the module exports (a face of its own, with an explicit list). */
  readonly names: readonly string[] | "all";
}

/** A runtime, as its entry points and the manifests name it. */
export interface RuntimeEntries {
  /**
   * Its name: its record is `runtime/<name>.ts`'s `<name>Runtime`, its
   * entries are named `<name>.ts`, and so are the files of its own code (`*.<name>.ts`).
   */
  readonly name: string;
  /** The runtime in prose. */
  readonly label: string;
  /** The ends' entries are public subpaths (`./executor/<name>`, `./harness/<name>`). */
  readonly endSubpaths: boolean;
  /** The PTY host the runtime's `serveMachine` uses by default; null: it serves no machine. */
  readonly machine: { readonly pty: string; readonly from: string } | null;
  /** The harness entry's own names beside its `Harness`; null: no harness entry (no preset). */
  readonly harness: readonly Names[] | null;
  /** The root entry's own names, beside the portable API and the ends' entries. */
  readonly root: readonly Names[];
}

/** What every runtime with a machine adds to the executor face (`executor/machine/`). */
export const MACHINE: readonly Names[] = [
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
  { from: "executor/machine/workdir-check.node.ts", names: ["WorkdirError"] },
];

/** The inspector's server (`node:http`, which Node, Deno and Bun run). */
export const INSPECTOR: readonly Names[] = [{
  from: "http/inspector/serve.node.ts",
  names: ["type InspectorServer", "serveInspector", "type ServeInspectorOptions"],
}];

/** The PostgreSQL store (the `postgres` client, which Node, Deno and Bun run). */
export const POSTGRES: readonly Names[] = [
  {
    from: "harness/store/postgres.node.ts",
    names: ["openPostgresStore", "type OpenPostgresStoreOptions"],
  },
  {
    from: "harness/store/postgres.ts",
    names: [
      "PostgresCommitUnknownError",
      "type PostgresClientLike",
      "PostgresHarnessStore",
      "type PostgresQueryable",
      "type PostgresRows",
      "type PostgresStoreOptions",
      "PostgresStoreUnavailableError",
    ],
  },
];

/** The runtimes, each with what its entry points export beside the portable faces. */
export const RUNTIMES: readonly RuntimeEntries[] = [
  {
    name: "node",
    label: "Node",
    endSubpaths: true,
    machine: { pty: "nodePty", from: "executor/machine/pty.node.ts" },
    harness: INSPECTOR,
    root: [
      { from: "transport/node.ts", names: ["dialWebSocket", "serveWebSocket"] },
      {
        from: "transport/stale-socket.node.ts",
        names: ["type SocketPathOccupant", "SocketPathTakenError"],
      },
      { from: "transport/socket-path.node.ts", names: ["SocketPathTooLongError"] },
      { from: "runtime/node.ts", names: ["openSqliteStore"] },
      {
        from: "harness/store/sqlite.node.ts",
        names: ["type NodeSqliteDriver", "type NodeSqliteStoreOptions"],
      },
      ...POSTGRES,
    ],
  },
  {
    name: "deno",
    label: "Deno",
    endSubpaths: true,
    machine: { pty: "nodePty", from: "executor/machine/pty.node.ts" },
    harness: INSPECTOR,
    root: [
      { from: "transport/deno.ts", names: ["dialWebSocket", "serveWebSocket"] },
      {
        from: "transport/stale-socket.node.ts",
        names: ["type SocketPathOccupant", "SocketPathTakenError"],
      },
      { from: "transport/socket-path.node.ts", names: ["SocketPathTooLongError"] },
      {
        from: "harness/store/sqlite.deno.ts",
        names: ["type DenoSqliteDriver", "type DenoSqliteStoreOptions", "openSqliteStore"],
      },
      ...POSTGRES,
    ],
  },
  {
    name: "bun",
    label: "Bun",
    endSubpaths: true,
    machine: { pty: "bunPty", from: "executor/machine/pty.bun.ts" },
    harness: INSPECTOR,
    root: [
      { from: "transport/bun.ts", names: ["dialWebSocket", "serveWebSocket"] },
      {
        from: "transport/stale-socket.node.ts",
        names: ["type SocketPathOccupant", "SocketPathTakenError"],
      },
      { from: "transport/socket-path.node.ts", names: ["SocketPathTooLongError"] },
      {
        from: "harness/store/sqlite.bun.ts",
        names: ["type BunSqliteDriver", "type BunSqliteStoreOptions", "openSqliteStore"],
      },
      ...POSTGRES,
    ],
  },
  {
    name: "workers",
    label: "Cloudflare Workers",
    // One entry point: a Worker's executor and its Durable Object harness come together.
    endSubpaths: false,
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
