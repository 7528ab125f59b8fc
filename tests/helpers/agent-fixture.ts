/**
 * Fixtures for the agent capability, both ends from this SDK over a real WebSocket on
 * 127.0.0.1: a `Harness` with an `AgentPlatform` (served without authentication: these tests
 * are about the agent methods), and `ExecutorClient`s serving an agent handler. Everything made
 * here is closed by `cleanup()`.
 */
import { Harness, type HarnessOptions, type HarnessServer } from "../../harness/node.ts";
import { ExecutorClient, type ExecutorClientOptions } from "../../executor/node.ts";
import type { ExecutorHandle } from "../../harness/node.ts";
import {
  type AgentHandler,
  AgentPlatform,
  type AgentPlatformOptions,
  type AgentServer,
  type AgentStreamEvent,
  serveAgent,
  type ServeAgentOptions,
} from "../../agent/mod.ts";
import type { SessionEventRecord } from "../../harness/node.ts";
import { ChaosProxy } from "./chaos-proxy.ts";
import { CapturingLogger } from "./raw.ts";

/** Executor info of every agent test client. */
export const AGENT_EXECUTOR_INFO = {
  name: "agent-test-executor",
  os: "linux",
  arch: "amd64",
  version: "0.0.1",
} as const;

/** A harness with an agent platform. */
export interface AgentHarnessFixture {
  readonly harness: Harness;
  readonly server: HarnessServer;
  readonly platform: AgentPlatform;
  readonly logger: CapturingLogger;
}

/** An executor serving an agent, registered with the harness. */
export interface AgentExecutorFixture {
  readonly client: ExecutorClient;
  readonly agent: AgentServer;
  readonly executor: ExecutorHandle;
  readonly logger: CapturingLogger;
}

/** Options of {@linkcode AgentFixtures.executor}. */
export interface AgentExecutorOptions {
  /** Options of the `ExecutorClient` (`harnessUrl` defaults to the harness's URL). */
  client?: Partial<ExecutorClientOptions>;
  /** Options of `serveAgent`. */
  serve?: ServeAgentOptions;
  /** Dial through this URL instead (a chaos proxy). */
  url?: string;
}

/** Tracks what a test made, to close it all. */
export class AgentFixtures {
  readonly #clients: ExecutorClient[] = [];
  readonly #harnesses: { harness: Harness; server: HarnessServer }[] = [];
  readonly #proxies: ChaosProxy[] = [];
  readonly #cleanups: (() => Promise<void> | void)[] = [];

  /** A harness with an `AgentPlatform`, served on 127.0.0.1:0. */
  async harness(
    options: { platform?: AgentPlatformOptions; harness?: HarnessOptions } = {},
  ): Promise<AgentHarnessFixture> {
    const logger = new CapturingLogger();
    const platform = new AgentPlatform({
      retry: { initialDelayMs: 5, maxDelayMs: 50 },
      ...options.platform,
    });
    const harness = new Harness({
      insecureNoAuth: true,
      logger,
      agent: platform,
      // Heartbeats an hour apart: tests that move an executor's ManualClock by minutes would
      // otherwise fire (and time out) heartbeats on the way.
      heartbeatIntervalMs: 3_600_000,
      ...options.harness,
    });
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    this.#harnesses.push({ harness, server });
    return { harness, server, platform, logger };
  }

  /** An executor client dialing `url` (no credential: a local harness). */
  client(
    url: string,
    options: Partial<ExecutorClientOptions> = {},
  ): { client: ExecutorClient; logger: CapturingLogger } {
    const logger = new CapturingLogger();
    const client = new ExecutorClient({
      harnessUrl: url,
      executor: AGENT_EXECUTOR_INFO,
      logger,
      reconnect: { initialDelayMs: 5, maxDelayMs: 50 },
      retry: { initialDelayMs: 5, maxDelayMs: 50 },
      ...options,
    });
    this.#clients.push(client);
    return { client, logger };
  }

  /**
   * An executor serving `handler`, started and registered; resolves with its handle on the
   * harness once the registration has been announced.
   */
  async executor(
    fixture: AgentHarnessFixture,
    handler: AgentHandler,
    options: AgentExecutorOptions = {},
  ): Promise<AgentExecutorFixture> {
    const { client, logger } = this.client(options.url ?? fixture.server.url, options.client);
    const agent = serveAgent(client, handler, options.serve);
    const registered = await client.start();
    const executor = await fixture.harness.waitExecutor({
      filter: (e) => e.id === registered.executor_id && e.connected,
    });
    return { client, agent, executor, logger };
  }

  /** A chaos proxy in front of `url`. */
  async proxy(url: string): Promise<ChaosProxy> {
    const proxy = await ChaosProxy.start(url);
    this.#proxies.push(proxy);
    return proxy;
  }

  /** Adds a cleanup step (run before clients stop). */
  defer(fn: () => Promise<void> | void): void {
    this.#cleanups.push(fn);
  }

  /** Stops every client, closes every proxy and harness. */
  async cleanup(): Promise<void> {
    for (const fn of this.#cleanups.splice(0).reverse()) await fn();
    // A test that failed half-way may leave a stop waiting on a ManualClock: do not hang.
    for (const client of this.#clients.splice(0)) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        client.stop(),
        new Promise((resolve) => (timer = setTimeout(resolve, 2_000))),
      ]);
      clearTimeout(timer);
    }
    for (const proxy of this.#proxies.splice(0)) await proxy.close();
    for (const { harness, server } of this.#harnesses.splice(0)) {
      await harness.close();
      await server.close();
    }
  }
}

/** Resolves once `predicate` holds, checking after each macrotask turn (no timing involved). */
export async function until(predicate: () => boolean, what = "condition"): Promise<void> {
  for (let i = 0; i < 200_000; i++) {
    if (predicate()) return;
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  throw new Error(`never happened: ${what}`);
}

/** A promise with its resolve function, for gates in handlers. */
export function gate<T = void>(): { promise: Promise<T>; open: (value: T) => void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => (open = resolve));
  return { promise, open };
}

/** Resolves once `signal` is aborted (at once if it already is). */
export function whenAborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) =>
    signal.addEventListener("abort", () => resolve(), { once: true })
  );
}

/** The event types of a session's accepted durable events, in order. */
export function eventTypes(records: readonly SessionEventRecord[]): string[] {
  return records.map((r) => r.event.type);
}

/** Collects a platform stream into an array until it ends (or `stop` aborts it). */
export function collect(
  stream: AsyncIterableIterator<AgentStreamEvent>,
): { items: AgentStreamEvent[]; done: Promise<void> } {
  const items: AgentStreamEvent[] = [];
  const done = (async () => {
    for await (const item of stream) items.push(item);
  })();
  return { items, done };
}

/** A text content block. */
export function text(value: string): { type: "text"; text: string } {
  return { type: "text", text: value };
}
