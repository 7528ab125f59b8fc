/**
 * What a conformance scenario works with: a {@linkcode ScenarioContext} for one cell of the
 * matrix (an executor on some runtime, a harness on some runtime, a transport, a direction),
 * built by {@linkcode scenarioContext}, which cleans up everything a scenario starts.
 *
 * `connect()` brings up an executor behind a {@linkcode Link} (a proxy the scenario can cut or
 * hold) in the cell's direction — the executor dials the harness, or listens while the harness
 * dials it — and waits until the harness holds it.
 */
import { join } from "node:path";
import type { ClientSpec, ExecutorAgent } from "./executor-agent.ts";
import type { HarnessAgent, HarnessSpec } from "./harness-agent.ts";
import { type Endpoint, endpointOf, Link } from "./link.ts";
import type { AgentProcess, Remote } from "./rpc.ts";

/** How a cell connects its two ends. */
export type Direction = "dial" | "listen";

/** What a scenario works with. */
export interface ScenarioContext {
  /** The harness side. */
  readonly H: Remote<HarnessAgent>;
  /** The executor side. */
  readonly E: Remote<ExecutorAgent>;
  /** `dial`: the executor dials the harness; `listen`: the harness dials the executor. */
  readonly direction: Direction;
  /** How the executor reaches the harness (dial direction). */
  readonly transport: "ws" | "unix";
  /** The scenario's temp directory. */
  readonly dir: string;
  /**
   * A harness agent in a process of its own, on the cell's harness runtime, for scenarios that
   * kill it; killed or stopped with the scenario.
   */
  spawnHarness(): Promise<AgentProcess<HarnessAgent>>;
  /** A link (a cuttable proxy) to `target`, closed with the scenario. */
  link(target: Endpoint): Promise<Link>;
  /** Starts an executor client dialing `url` (stopped with the scenario); returns its id. */
  startExecutor(name: string, url: string): Promise<string>;
  /** The harness of this scenario (created on first use, with `harnessSpec`). */
  harness(spec?: Partial<HarnessSpec>): Promise<string>;
  /** The URL executors dial (dial direction), straight to the harness, no link. */
  harnessUrl(): Promise<string>;
  /** Brings up an executor behind a link and waits until the harness holds it. */
  connect(name: string, spec?: Partial<ClientSpec>): Promise<Connected>;
  /** Starts a listening executor without dialing it (for a raw harness); returns its URL. */
  listen(name: string, spec?: Partial<ClientSpec>): Promise<{ client: string; url: string }>;
  /** A fresh socket path in the scenario's temp directory. */
  socketPath(label: string): string;
  /** A name unique to this scenario run (counters are shared by an agent's cells). */
  key(label: string): string;
  /**
   * How the harness is evicted, for a harness whose restart is an eviction (the Workers cell's
   * Durable Object); the restart row then takes that form.
   */
  readonly eviction?: Eviction;
}

/** An executor brought up by {@linkcode ScenarioContext.connect}. */
export interface Connected {
  /** The executor agent's id of the client. */
  readonly client: string;
  /** The link between the two ends. */
  readonly link: Link;
  /** The executor id the harness gave it. */
  readonly executorId: string;
}

/** One scenario. */
export interface Scenario {
  readonly name: string;
  /** Why it does not apply to an external cell (the Workers harness), when it does not. */
  readonly external?: string;
  /** Its timeout, when longer than the suite's default. */
  readonly timeoutMs?: number;
  run(ctx: ScenarioContext): Promise<void>;
}

/** Polls `probe` until it returns true (the test's own timeout bounds the wait). */
export async function until(probe: () => Promise<boolean>): Promise<void> {
  while (!(await probe())) await new Promise((resolve) => setTimeout(resolve, 5));
}

/** A harness that can be evicted (the Workers cell: a Durable Object). */
export interface Eviction {
  /** Starts a call that only the harness's own brain awaits (no request of the suite stays open). */
  startCall(h: string, session: string, call: unknown): Promise<void>;
  /** Resolves once the harness was evicted and a new incarnation answers. */
  evict(h: string): Promise<void>;
}

/** Builds the context of one scenario run; `dispose` cleans up everything it started. */
export function scenarioContext(options: {
  H: Remote<HarnessAgent>;
  E: Remote<ExecutorAgent>;
  direction: Direction;
  transport: "ws" | "unix";
  dir: string;
  prefix: string;
  eviction?: Eviction;
  spawnHarness: () => Promise<AgentProcess<HarnessAgent>>;
}): ScenarioContext & { dispose(): Promise<void> } {
  const { H, E, direction, transport, dir, prefix, eviction } = options;
  const spawned: AgentProcess<HarnessAgent>[] = [];
  let harness: Promise<{ id: string; url?: string; connect?: Partial<ClientSpec> }> | undefined;
  const links: Link[] = [];
  const clients: string[] = [];
  let n = 0;
  const socketPath = (label: string) => join(dir, `${prefix}-${label}-${++n}.sock`);
  const ensure = (spec: Partial<HarnessSpec> = {}) => {
    harness ??= H.create({
      serve: direction === "listen" ? "none" : transport,
      ...(direction === "dial" && transport === "unix" ? { path: socketPath("harness") } : {}),
      ...spec,
    });
    return harness;
  };
  return {
    H,
    E,
    direction,
    transport,
    dir,
    ...(eviction ? { eviction } : {}),
    async spawnHarness() {
      const agent = await options.spawnHarness();
      spawned.push(agent);
      return agent;
    },
    async startExecutor(name, url) {
      const client = `${prefix}-${name}`;
      clients.push(client);
      await E.start(client, { name, url });
      return client;
    },
    async link(target) {
      const link = await Link.open(
        target,
        transport === "unix" ? { path: socketPath("link") } : undefined,
      );
      links.push(link);
      return link;
    },
    socketPath,
    key: (label) => `${prefix}-${label}`,
    async listen(name, spec = {}) {
      const created = await ensure();
      const client = `${prefix}-${name}`;
      clients.push(client);
      const { url } = await E.listen(client, {
        name,
        path: socketPath("exec"),
        ...created.connect,
        ...spec,
      });
      return { client, url };
    },
    harness: async (spec) => (await ensure(spec)).id,
    harnessUrl: async () => (await ensure()).url!,
    async connect(name, spec = {}) {
      const created = await ensure();
      const client = `${prefix}-${name}`;
      let link: Link;
      if (direction === "dial") {
        link = await Link.open(
          endpointOf(created.url!),
          transport === "unix" ? { path: socketPath("link") } : undefined,
        );
        links.push(link);
        clients.push(client);
        await E.start(client, { name, url: link.url, ...created.connect, ...spec });
      } else {
        const path = socketPath("exec");
        clients.push(client);
        await E.listen(client, { name, path, ...created.connect, ...spec });
        link = await Link.open({ path }, { path: socketPath("link") });
        links.push(link);
        await H.dial(created.id, link.url);
        await E.registered(client);
      }
      const view = await H.waitEvent(created.id, "registered|reconnected", name);
      return { client, link, executorId: view.id };
    },
    async dispose() {
      await Promise.all(clients.map((c) => E.stop(c).catch(() => {})));
      await Promise.all(spawned.map((a) => a.stop().catch(() => {})));
      if (harness) await H.close((await harness).id).catch(() => {});
      await Promise.all(links.map((l) => l.close()));
    },
  };
}
