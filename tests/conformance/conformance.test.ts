/**
 * The conformance suite: every scenario of `scenarios.ts` in every cell of `matrix.ts`, printed
 * as a table. It starts its own processes on every runtime (executor agents on Node, Deno and
 * Bun; harness agents on Deno and Bun), so it runs once, from Node: `scripts/test.ts` runs it
 * as its own stage, and Deno and Bun skip it.
 *
 * Processes are shared: one executor agent per runtime serves every cell with that executor,
 * one harness per scenario runs inside the shared harness agent, and each scenario brings up its
 * own clients and links and cleans them up.
 *
 * With `BMA_CONFORMANCE_RESULTS=<file>` the results are written there as JSON (the test runner
 * prints the table from it); otherwise the table is printed when the suite ends.
 */
import { after, before, describe, it } from "node:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as node from "../../node.ts";
import * as agentEnd from "../../agent/mod.ts";
import type { ExecutorAgent } from "./executor-agent.ts";
import { HarnessAgent } from "./harness-agent.ts";
import { type Cell, type CellResult, CELLS, externalCells, renderTable } from "./matrix.ts";
import { AgentProcess, local, type Remote, type Runtime } from "./rpc.ts";
import { type Eviction, scenarioContext } from "./scenario-context.ts";
import { SCENARIOS } from "./scenarios.ts";

const onNode = !("Deno" in globalThis) && !("Bun" in globalThis);

/** The runtime a cell's harness runs on (the local harness is Node's). */
function harnessRuntime(cell: Cell): Runtime {
  return cell.harness === "deno" || cell.harness === "bun" ? cell.harness : "node";
}
// BMA_CONFORMANCE_CELLS=nww,nnw runs only those cells (while working on one harness).
const only = process.env.BMA_CONFORMANCE_CELLS?.split(",");
const cells: Cell[] = (onNode ? [...CELLS, ...(await externalCells())] : [])
  .filter((cell) => !only || only.includes(cell.id));
const results: CellResult[] = [];

describe("conformance", { timeout: 600_000, skip: !onNode && "runs from Node only" }, () => {
  let dir = "";
  const executors = new Map<Runtime, AgentProcess<ExecutorAgent>>();
  const harnesses = new Map<Runtime, AgentProcess<HarnessAgent>>();
  const localHarness = new HarnessAgent(node, agentEnd);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "bma-conf-"));
    const wanted = new Set(cells.map((c) => c.executor));
    for (const runtime of wanted) {
      executors.set(
        runtime,
        new AgentProcess<ExecutorAgent>(runtime, "tests/conformance/executor-child.ts"),
      );
    }
    for (const cell of cells) {
      if (cell.harnessAgent === "deno" || cell.harnessAgent === "bun") {
        if (!harnesses.has(cell.harnessAgent)) {
          harnesses.set(
            cell.harnessAgent,
            new AgentProcess<HarnessAgent>(cell.harnessAgent, "tests/conformance/harness-child.ts"),
          );
        }
      }
    }
    await Promise.all([...executors.values(), ...harnesses.values()].map((a) => a.ready()));
  });

  after(async () => {
    await localHarness.closeAll();
    await Promise.all([...executors.values(), ...harnesses.values()].map((a) => a.stop()));
    if (dir) rmSync(dir, { recursive: true, force: true });
    const target = process.env.BMA_CONFORMANCE_RESULTS;
    if (target) {
      writeFileSync(
        target,
        JSON.stringify({ cells, scenarios: SCENARIOS.map((s) => s.name), results }),
      );
    } else {
      process.stdout.write(`\n${renderTable(cells, SCENARIOS.map((s) => s.name), results)}\n`);
    }
  });

  for (const cell of cells) {
    const title = `executor ${cell.executor} -> harness ${cell.harness} (${
      cell.direction === "listen" ? "executor listens" : cell.transport
    })`;
    describe(title, { timeout: 300_000 }, () => {
      let H: Remote<HarnessAgent>;
      let closeExternal: (() => Promise<void>) | undefined;
      let eviction: Eviction | undefined;
      before(async () => {
        if (cell.harnessAgent === "local") H = local(localHarness);
        else if (cell.harnessAgent === "external") {
          const opened = await cell.open!();
          H = opened.H;
          closeExternal = opened.close;
          eviction = opened.eviction;
        } else H = harnesses.get(cell.harnessAgent)!.remote;
      });
      after(async () => {
        await closeExternal?.();
      });
      SCENARIOS.forEach((scenario, index) => {
        const skip = cell.skip?.[scenario.name] ??
          (cell.harnessAgent === "external" ? scenario.external : undefined);
        it(scenario.name, { timeout: scenario.timeoutMs ?? 30_000, skip }, async () => {
          const started = performance.now();
          // Recorded first: a scenario that never finishes (its timeout) shows as failed.
          const record: CellResult = {
            cell: cell.id,
            scenario: scenario.name,
            status: "fail",
            ms: 0,
            note: "did not finish",
          };
          results.push(record);
          const ctx = scenarioContext({
            H,
            E: executors.get(cell.executor)!.remote,
            direction: cell.direction,
            transport: cell.transport,
            dir,
            prefix: `${cell.id}${index}`,
            eviction,
            spawnHarness: async () => {
              const agent = new AgentProcess<HarnessAgent>(
                harnessRuntime(cell),
                "tests/conformance/harness-child.ts",
              );
              await agent.ready();
              return agent;
            },
          });
          try {
            await scenario.run(ctx);
            record.status = "pass";
            delete record.note;
          } catch (error) {
            record.note = String((error as Error)?.message ?? error).split("\n")[0];
            throw error;
          } finally {
            record.ms = Math.round(performance.now() - started);
            await ctx.dispose();
          }
        });
        if (skip) {
          results.push({
            cell: cell.id,
            scenario: scenario.name,
            status: "n/a",
            ms: 0,
            note: skip,
          });
        }
      });
    });
  }
});
