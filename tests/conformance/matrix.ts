/**
 * The conformance matrix: which executor runs against which harness, over what, and the table
 * the suite prints.
 *
 * Columns (cells):
 * - the executor on Node, Deno and Bun (a child process each, with that runtime's entry point)
 *   against the harness on Node (in the test process), over WebSocket on 127.0.0.1 and over a
 *   Unix socket;
 * - the executor on Node against the harness on Deno and on Bun (child processes, `Deno.serve`
 *   and `Bun.serve`), over WebSocket;
 * - executor-listens mode on each runtime: the executor listens on a Unix socket and the Node
 *   harness dials it (`client.listen` / `harness.dial`);
 * - external cells, such as the Workers harness (below).
 *
 * ## Hook for more harnesses (the Workers column)
 *
 * A module at `tests/workers/conformance-cell.ts`, when it exists, is loaded by the suite and
 * its `conformanceCells()` adds columns: each {@linkcode ExternalCell} provides a harness
 * driver with the methods of `HarnessAgent` (`create` returns the URL executors dial and, in
 * `connect`, the credentials they need, e.g. `baseUrl` + `environmentKey`), and runs every
 * scenario against the executor agent of its `executor` runtime over a cuttable link. Scenarios
 * it cannot support are listed in `skip` with the reason and show as `n/a`.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { HarnessAgent } from "./harness-agent.ts";
import type { Remote, Runtime } from "./rpc.ts";
import type { Direction, Eviction } from "./scenario-context.ts";

/** One column of the matrix. */
export interface Cell {
  /** Short id, unique (socket names and counters are derived from it). */
  readonly id: string;
  /** The executor's runtime. */
  readonly executor: Runtime;
  /** The harness's runtime label (`node`, `deno`, `bun`, `workers`). */
  readonly harness: string;
  /** Where the harness runs: in the test process, or an agent child on that runtime. */
  readonly harnessAgent: "local" | Runtime | "external";
  readonly direction: Direction;
  readonly transport: "ws" | "unix";
  /** Scenarios that do not apply, by name, with why. */
  readonly skip?: Readonly<Record<string, string>>;
  /**
   * External cells: opens the harness driver (closed after the cell's scenarios), and the
   * eviction of a harness that has one (the restart row's form there).
   */
  readonly open?: () => Promise<
    { H: Remote<HarnessAgent>; close(): Promise<void>; eviction?: Eviction }
  >;
}

/** A column contributed by another suite (see the module doc). */
export interface ExternalCell {
  readonly id: string;
  readonly executor: Runtime;
  readonly harness: string;
  readonly transport: "ws" | "unix";
  readonly skip?: Readonly<Record<string, string>>;
  open(): Promise<{ H: Remote<HarnessAgent>; close(): Promise<void>; eviction?: Eviction }>;
}

/** The built-in cells. */
export const CELLS: readonly Cell[] = [
  ...(["node", "deno", "bun"] as const).flatMap((executor): Cell[] =>
    (["ws", "unix"] as const).map((transport) => ({
      id: `${executor[0]}n${transport === "ws" ? "w" : "u"}`,
      executor,
      harness: "node",
      harnessAgent: "local",
      direction: "dial",
      transport,
    }))
  ),
  ...(["deno", "bun"] as const).map((harness): Cell => ({
    id: `n${harness[0]}w`,
    executor: "node",
    harness,
    harnessAgent: harness,
    direction: "dial",
    transport: "ws",
  })),
  ...(["node", "deno", "bun"] as const).map((executor): Cell => ({
    id: `${executor[0]}nl`,
    executor,
    harness: "node",
    harnessAgent: "local",
    direction: "listen",
    transport: "unix",
  })),
];

/** Loads the external cells, if their module exists. */
export async function externalCells(): Promise<Cell[]> {
  const url = new URL("../workers/conformance-cell.ts", import.meta.url);
  if (!existsSync(fileURLToPath(url))) return [];
  // A computed specifier: the module is optional, and checkers must not require it.
  const module: { conformanceCells?: () => Promise<ExternalCell[]> } = await import(url.href);
  const cells = (await module.conformanceCells?.()) ?? [];
  return cells.map((cell) => ({
    ...cell,
    harnessAgent: "external" as const,
    direction: "dial" as const,
  }));
}

/** One scenario's result in one cell. */
export interface CellResult {
  cell: string;
  scenario: string;
  status: "pass" | "fail" | "n/a";
  ms: number;
  /** Why it failed or does not apply. */
  note?: string;
}

/** Column labels: executor, harness, link. */
function labels(cell: Pick<Cell, "executor" | "harness" | "direction" | "transport">): string[] {
  return [
    cell.executor,
    cell.harness,
    cell.direction === "listen" ? "listen" : cell.transport,
  ];
}

/** The table: one row per scenario, one column per cell, and a totals line. */
export function renderTable(
  cells: readonly Pick<Cell, "id" | "executor" | "harness" | "direction" | "transport">[],
  scenarios: readonly string[],
  results: readonly CellResult[],
): string {
  const width = Math.max(...scenarios.map((s) => s.length), 16) + 2;
  const col = 8;
  const byKey = new Map(results.map((r) => [`${r.cell}\u0000${r.scenario}`, r]));
  const head = ["executor", "harness", "via"].map((title, row) =>
    title.padStart(width - 2).padEnd(width) +
    cells.map((cell) => labels(cell)[row].padEnd(col)).join("")
  );
  const rule = "-".repeat(width + col * cells.length);
  const mark = { pass: "ok", fail: "FAIL", "n/a": "n/a" } as const;
  const rows = scenarios.map((scenario) =>
    scenario.padEnd(width) +
    cells.map((cell) => {
      const result = byKey.get(`${cell.id}\u0000${scenario}`);
      return (result ? mark[result.status] : "-").padEnd(col);
    }).join("")
  );
  const passed = results.filter((r) => r.status === "pass").length;
  const failed = results.filter((r) => r.status === "fail").length;
  const na = results.filter((r) => r.status === "n/a").length;
  const notes = results.filter((r) => r.status !== "pass" && r.note).map((r) =>
    `  ${r.status === "fail" ? "FAIL" : "n/a "} ${r.cell}/${r.scenario}: ${r.note}`
  );
  return [
    "conformance matrix (ok: passed, FAIL: failed, n/a: does not apply, -: not run)",
    ...head,
    rule,
    ...rows,
    rule,
    `${passed} passed, ${failed} failed, ${na} n/a in ${cells.length} cells x ${scenarios.length} scenarios`,
    ...notes,
  ].map((line) => line.trimEnd()).join("\n");
}
