/**
 * Test fixtures for the executor end: the project's own `Harness` served over a real WebSocket
 * on 127.0.0.1 with its self-hosted token endpoint, and `ExecutorClient`s connected to it.
 * Everything made here is closed by `cleanup()`.
 */
import { Harness, type HarnessOptions, type HarnessServer } from "../../harness/node.ts";
import { ExecutorClient, type ExecutorClientOptions } from "../../executor/node.ts";
import type { Clock } from "../../protocol/clock.ts";
import { CapturingLogger } from "./raw.ts";

/** The credentials the fixture's token endpoint accepts. */
export const SECRETS = {
  jwtSecret: "test-signing-secret-0123456789abcdef-xyz",
  environmentId: "env_test",
  environmentKey: "ek_live_SECRET_environment_key_4f2a9c",
  machineId: "m_test",
  machineToken: "mt_live_SECRET_machine_token_77b1e0",
} as const;

/** Executor info used by every test client. */
export const EXECUTOR_INFO = {
  name: "test-executor",
  os: "linux",
  arch: "amd64",
  version: "0.0.1",
} as const;

/** A running harness with its token endpoint. */
export interface HarnessFixture {
  readonly harness: Harness;
  readonly server: HarnessServer;
  readonly logger: CapturingLogger;
}

/** Options of {@linkcode startHarness}. */
export interface StartHarnessOptions extends HarnessOptions {
  clock?: Clock;
  ttlSeconds?: number;
}

/** Tracks what a test made, to close it all. */
export class Fixtures {
  readonly #clients: ExecutorClient[] = [];
  readonly #harnesses: { harness: Harness; server: HarnessServer }[] = [];
  readonly #cleanups: (() => Promise<void> | void)[] = [];

  /** Starts a harness with the token endpoint on 127.0.0.1:0. */
  async harness(options: StartHarnessOptions = {}): Promise<HarnessFixture> {
    const logger = new CapturingLogger();
    const { ttlSeconds, ...rest } = options;
    const harness = new Harness({
      logger,
      tokens: {
        secret: SECRETS.jwtSecret,
        credentials: [
          { environmentId: SECRETS.environmentId, environmentKey: SECRETS.environmentKey },
          { machineId: SECRETS.machineId, machineToken: SECRETS.machineToken },
        ],
        ...(ttlSeconds !== undefined ? { ttlSeconds } : {}),
      },
      ...rest,
    });
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    this.#harnesses.push({ harness, server });
    return { harness, server, logger };
  }

  /** An executor client with the environment credential of {@linkcode SECRETS}. */
  client(
    server: { httpUrl: string },
    options: Partial<ExecutorClientOptions> = {},
  ): { client: ExecutorClient; logger: CapturingLogger } {
    const logger = new CapturingLogger();
    const client = new ExecutorClient({
      baseUrl: server.httpUrl,
      environmentKey: SECRETS.environmentKey,
      environmentId: SECRETS.environmentId,
      executor: EXECUTOR_INFO,
      logger,
      reconnect: { initialDelayMs: 5, maxDelayMs: 50 },
      retry: { initialDelayMs: 5, maxDelayMs: 50 },
      ...options,
    });
    this.#clients.push(client);
    return { client, logger };
  }

  /** Adds a cleanup step (run before the harnesses close). */
  defer(fn: () => Promise<void> | void): void {
    this.#cleanups.push(fn);
  }

  /** Stops every client and closes every harness. */
  async cleanup(): Promise<void> {
    // A test that failed half-way may leave a cleanup waiting on a ManualClock: do not let
    // that hang the suite and hide the failure.
    for (const client of this.#clients.splice(0)) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        client.stop(),
        new Promise((resolve) => (timer = setTimeout(resolve, 2_000))),
      ]);
      clearTimeout(timer);
    }
    for (const fn of this.#cleanups.splice(0).reverse()) await fn();
    for (const { harness, server } of this.#harnesses.splice(0)) {
      await harness.close();
      await server.close();
    }
  }
}

/** Resolves once `predicate` holds, checking after each macrotask turn (no timing involved). */
export async function until(predicate: () => boolean, what = "condition"): Promise<void> {
  for (let i = 0; i < 100_000; i++) {
    if (predicate()) return;
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  throw new Error(`never happened: ${what}`);
}
