/**
 * Reads a V8 CPU profile (`node --cpu-prof`, `deno run --cpu-prof`) and prints where the time
 * went: self time per function, and inclusive time per function, largest first.
 *
 *   npx tsx scripts/bench/profile.ts PROFILE.cpuprofile [--top 40] [--filter text]
 *
 * To profile one case: `npx tsx scripts/bench/profile.ts --run memory|tool-ws|events|events-sqlite
 * [--ms 3000]` runs the in-memory tool-call case (or the WebSocket case: harness and executor in
 * two processes; or durable events, without a store or with a SQLite file) under `--cpu-prof`
 * (on Node, or the runtime `RUNTIME=deno|bun` names), pinned to CPU 0, and prints every
 * profile's summary.
 * `INFLIGHT=64` keeps 64 calls in flight; `PROFILE_DIR=dir` keeps the .cpuprofile files (open
 * them in Chrome DevTools, or read their line ticks).
 */
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { Child } from "./procs.ts";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Self and inclusive milliseconds per function of a profile. */
export function summarize(profile: Profile): {
  total: number;
  self: [string, number][];
  inclusive: [string, number][];
} {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  const selfUs = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i];
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const name = (node: ProfileNode) => {
    const f = node.callFrame;
    const file = f.url ? f.url.replace(/^.*\/work\/main\//, "").replace(/^file:\/\//, "") : "";
    return `${f.functionName || "(anonymous)"} ${file}${file ? `:${f.lineNumber + 1}` : ""}`;
  };
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let total = 0;
  for (const [id, us] of selfUs) {
    total += us;
    const node = byId.get(id)!;
    self.set(name(node), (self.get(name(node)) ?? 0) + us);
    // Inclusive: every distinct function on the stack gets the sample once.
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const n = name(byId.get(at)!);
      if (seen.has(n)) continue;
      seen.add(n);
      inclusive.set(n, (inclusive.get(n) ?? 0) + us);
    }
  }
  const sorted = (m: Map<string, number>) =>
    [...m].map(([k, v]) => [k, v / 1000] as [string, number]).sort((a, b) => b[1] - a[1]);
  return { total: total / 1000, self: sorted(self), inclusive: sorted(inclusive) };
}

/** Prints a summary of the profile at `path`. */
export function printProfile(path: string, top = 40, filter?: string): void {
  const profile = JSON.parse(readFileSync(path, "utf8")) as Profile;
  const { total, self, inclusive } = summarize(profile);
  const keep = ([n]: [string, number]) => !filter || n.includes(filter);
  console.log(`${path}: ${total.toFixed(0)} ms sampled`);
  console.log("  self time:");
  for (const [n, ms] of self.filter(keep).slice(0, top)) {
    console.log(
      `    ${((ms / total) * 100).toFixed(1).padStart(5)}%  ${ms.toFixed(0).padStart(6)} ms  ${n}`,
    );
  }
  console.log("  inclusive time:");
  for (const [n, ms] of inclusive.filter(keep).slice(0, top)) {
    console.log(
      `    ${((ms / total) * 100).toFixed(1).padStart(5)}%  ${ms.toFixed(0).padStart(6)} ms  ${n}`,
    );
  }
}

/** The runtime the case's processes run on: `RUNTIME=node|deno|bun`, Node by default. */
function profiledRuntime(): "node" | "deno" | "bun" {
  const runtime = process.env.RUNTIME ?? "node";
  if (runtime === "node" || runtime === "deno" || runtime === "bun") return runtime;
  throw new Error(`RUNTIME must be node, deno or bun, not ${runtime}`);
}

async function profileCase(which: string, ms: number, top: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "bma-prof-"));
  const flags = ["--cpu-prof", `--cpu-prof-dir=${dir}`];
  const children: Child[] = [];
  const inflight = Number(process.env.INFLIGHT ?? 1);
  const runtime = profiledRuntime();
  let unit = "calls";
  let runParams = (): Promise<Record<string, unknown>> => Promise.resolve({});
  try {
    let driver: Child;
    if (which === "memory") {
      driver = await Child.start(runtime, ["memory"], { runtimeFlags: flags, cpu: 0 });
      children.push(driver);
      await driver.ready;
    } else if (which === "events" || which === "events-sqlite") {
      const harnessArgs = which === "events" ? [] : [join(dir, "events.db"), "normal"];
      const harness = await Child.start(runtime, ["events-harness", ...harnessArgs], {
        runtimeFlags: flags,
        cpu: 0,
      });
      children.push(harness);
      const { url } = await harness.ready;
      driver = await Child.start(runtime, ["events-executor", String(url)], {
        runtimeFlags: flags,
        cpu: 0,
      });
      children.push(driver);
      await driver.ready;
      // The executor drives, each run in a fresh session (as in the bench).
      const client = `events-w${inflight === 1 ? 1 : 64}`;
      unit = "events";
      runParams = async () => {
        const { sessions } = await harness.send("fresh", { executors: 2 });
        return { client, session: (sessions as Record<string, string>)[client] };
      };
    } else {
      driver = await Child.start(runtime, ["tool-harness", "tcp"], { runtimeFlags: flags, cpu: 0 });
      children.push(driver);
      const { url } = await driver.ready;
      const executor = await Child.start(runtime, ["tool-executor", String(url)], {
        runtimeFlags: flags,
        cpu: 0,
      });
      children.push(executor);
      await executor.ready;
    }
    await driver.send("run", { inflight, ms: 2000, ...(await runParams()) });
    const reply = await driver.send("run", { inflight, ms, ...(await runParams()) });
    console.log(
      `${which}: ${((Number(reply.count) / Number(reply.ms)) * 1000).toFixed(0)} ${unit}/s`,
    );
  } finally {
    for (const child of children) await child.stop(10_000);
  }
  const keep = process.env.PROFILE_DIR;
  for (const file of readdirSync(dir)) printProfile(join(dir, file), top);
  if (keep) {
    for (const file of readdirSync(dir)) {
      writeFileSync(join(keep, file), readFileSync(join(dir, file)));
    }
  }
  rmSync(dir, { recursive: true, force: true });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const option = (name: string) => {
    const at = args.indexOf(name);
    return at >= 0 ? args[at + 1] : undefined;
  };
  const top = Number(option("--top") ?? 40);
  const run = option("--run");
  if (run) await profileCase(run, Number(option("--ms") ?? 3000), top);
  else printProfile(args[0], top, option("--filter"));
}
