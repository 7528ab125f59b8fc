/**
 * bma-executor-sdk: the TypeScript SDK of the BMA Executor Protocol (`bma.executor.v1.1`).
 *
 * This is the portable API (web-standard APIs only): the protocol core, the transports, the
 * executor end ({@linkcode ExecutorClient}) and the harness end ({@linkcode Harness}). Here they
 * need their runtime pieces injected (`dial`, `server`); the runtime entry points inject them
 * and re-export everything else unchanged, so one import line serves:
 *
 * ```ts
 * import { ExecutorClient, Harness } from "bma-executor-sdk/node"; // or /deno, /bun, /workers
 * ```
 *
 * Names that both ends define are exported once under their executor meaning and once more
 * with an explicit prefix, so neither is lost:
 *
 * | name | executor end | harness end |
 * |---|---|---|
 * | `SessionState` | `ExecutorSessionState` (also `SessionState`) | `HarnessSessionState` |
 * | `ToolSlot` | `ExecutorToolSlot` (also `ToolSlot`) | `HarnessToolSlot` |
 * | `ArtifactUpload` | `ExecutorArtifactUpload` (also `ArtifactUpload`) | `HarnessArtifactUpload` |
 *
 * `bma-executor-sdk/executor` and `bma-executor-sdk/harness` keep each end's own unprefixed names.
 *
 * @module
 */
export * from "./protocol/core.ts";
export * from "./transport/mod.ts";
export * from "./executor/mod.ts";
export * from "./harness/mod.ts";
export * from "./agent/mod.ts";

// The clashes between the executor and harness modules, resolved explicitly (an explicit
// export wins over the ambiguous `export *` pair).
export type {
  ArtifactUpload,
  ArtifactUpload as ExecutorArtifactUpload,
  SessionState,
  SessionState as ExecutorSessionState,
  ToolSlot,
  ToolSlot as ExecutorToolSlot,
} from "./executor/mod.ts";
export type {
  ArtifactUpload as HarnessArtifactUpload,
  SessionState as HarnessSessionState,
  ToolSlot as HarnessToolSlot,
} from "./harness/mod.ts";
