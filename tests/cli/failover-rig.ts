/**
 * The failover rig: two `bma-harness serve --standby` processes on one store (a SQLite file, or a
 * PostgreSQL table with nothing else shared), a readiness-checking proxy in front, three
 * executors behind it (the `bma-executor` CLI and two `ExecutorClient`s, all with an environment
 * key exchanged at the token endpoint), a brain on the brain API, and a load of tool calls and
 * durable events that runs through the loss of the active harness.
 */
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ExecutorClient } from "../../executor/node.ts";
import { ROOT } from "../helpers/runtime-command.ts";
import { type ReadyProxy, startReadyProxy } from "../helpers/ready-proxy.ts";
import { jsonLogs, launchCli, type RunningCli } from "./cli-helpers.ts";

const HARNESS = join(ROOT, "cli/harness.node.ts");
const EXECUTOR = join(ROOT, "cli/executor.node.ts");
const INFO = { os: "linux", arch: "x64", version: "1.0.0" };
export const JWT_SECRET = "failover-secret-".repeat(3);
export const ENVIRONMENT_KEY = "ek_failover_0123456789abcdef";
export const BRAIN_TOKEN = "failover-brain-token-0123";
/**
 * How long the brain's long polls wait (`wait_ms`): what is not settled by then answers 202 and
 * is asked again, so this bounds only how long a request to a frozen harness goes unanswered.
 */
export const LONG_POLL_MS = 5_000;
/** The claim is renewed this often: a silent holder is gone after three of them. */
const RENEW_MS = 1_000;

/** A harness process of the rig. */
export interface HarnessProcess {
  readonly cli: RunningCli;
  readonly url: string;
}

/** Polls `check` until it holds, failing with `what` after `limitMs`. */
export async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  limitMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export async function readyStatus(base: string): Promise<string> {
  try {
    const response = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(2_000) });
    return String(((await response.json()) as { status?: unknown }).status);
  } catch {
    return "unreachable";
  }
}

/** Starts `bma-harness serve --standby` on `store`; resolves once it listens. */
export async function startHarness(dir: string, store: string): Promise<HarnessProcess> {
  const cli = launchCli(HARNESS, [
    "serve",
    "--port",
    "0",
    "--store",
    store,
    "--standby",
    "--store-renew-ms",
    String(RENEW_MS),
    "--heartbeat-ms",
    "2000",
    "--log-format",
    "json",
  ], {
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      PATH: process.env.PATH ?? "",
      HOME: dir,
      BMA_JWT_SECRET: JWT_SECRET,
      BMA_CREDENTIALS: JSON.stringify([{
        environmentId: "env_1",
        environmentKey: ENVIRONMENT_KEY,
      }]),
      BMA_BRAIN_TOKEN: BRAIN_TOKEN,
    },
  });
  const { match } = await cli.stdout.match(/"message":"listening (http:\/\/[^"]+)"/);
  return { cli, url: match[1].replace(/\/$/, "") };
}

/** A brain on the brain API through `base`, retrying what a failover interrupts. */
export class Brain {
  constructor(readonly base: string) {}

  async request(path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const response = await fetch(`${this.base}/v1/harness${path}`, {
      method: body === undefined ? "GET" : "POST",
      // A brain in its own process would not share the executors' connection pool; here it
      // does, so it keeps no connection tied to the harness that is about to be lost.
      headers: {
        authorization: `Bearer ${BRAIN_TOKEN}`,
        "content-type": "application/json",
        connection: "close",
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      // A request to a frozen harness is never answered: given up after a while, and repeated
      // (through the standby by then). Long polls wait less than this (`LONG_POLL_MS`).
      signal: AbortSignal.timeout(LONG_POLL_MS + 3_000),
    });
    return { status: response.status, body: await response.json() };
  }

  /** Repeats `path` until it answers `want`: through restarts, standbys and refused connects. */
  async retry(path: string, body: unknown, want: number, limitMs = 90_000) {
    const deadline = Date.now() + limitMs;
    let last: unknown;
    for (;;) {
      try {
        const answer = await this.request(path, body);
        if (answer.status === want) return answer;
        last = answer;
      } catch (error) {
        last = error;
      }
      if (Date.now() > deadline) {
        throw new Error(`${path}: no ${want} within ${limitMs} ms; last: ${JSON.stringify(last)}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** An in-process executor that counts each tool call it runs and emits durable ticks. */
export class CountingExecutor {
  readonly client: ExecutorClient;
  /** Runs per tool_call_id. */
  readonly runs = new Map<string, number>();
  /** The ticks acknowledged, per session. */
  readonly acked = new Map<string, number[]>();

  constructor(base: string, readonly name: string) {
    this.client = new ExecutorClient({
      baseUrl: base,
      environmentId: "env_1",
      environmentKey: ENVIRONMENT_KEY,
      executor: { name, ...INFO },
      reconnect: { initialDelayMs: 50, maxDelayMs: 500 },
      retry: { initialDelayMs: 50, maxDelayMs: 500 },
    });
    this.client.tools.bash.handle(async ({ command }, context) => {
      this.runs.set(context.toolCallId, (this.runs.get(context.toolCallId) ?? 0) + 1);
      await new Promise((resolve) => setTimeout(resolve, 150));
      return { stdout: `${name}: ${command}`, stderr: "", exit_code: 0 };
    });
  }

  /** Emits ticks `from`..`to - 1` on `sessionId`, `inFlight` at a time, in order. */
  async tick(sessionId: string, from: number, to: number, inFlight = 4): Promise<void> {
    const acked = this.acked.get(sessionId) ?? [];
    this.acked.set(sessionId, acked);
    const pending = new Set<Promise<void>>();
    for (let n = from; n < to; n++) {
      const sent = this.client.call("session.event", {
        session_id: sessionId,
        event: { type: "tick", n },
      }).then(() => void acked.push(n));
      pending.add(sent);
      sent.finally(() => pending.delete(sent));
      if (pending.size >= inFlight) await Promise.race(pending);
    }
    await Promise.all(pending);
  }
}

/** The whole rig, started. */
export interface Rig {
  readonly harnesses: HarnessProcess[];
  readonly proxy: ReadyProxy;
  readonly brain: Brain;
  readonly cliExecutor: RunningCli;
  readonly workdir: string;
  readonly executors: CountingExecutor[];
  /** Stops everything it started. */
  stop(): Promise<void>;
}

/** Starts two harnesses on `store`, the proxy, three executors and a session on each. */
export async function startRig(dir: string, store: string): Promise<Rig> {
  const first = await startHarness(dir, store);
  await until("the first harness serves", async () => (await readyStatus(first.url)) === "serving");
  const second = await startHarness(dir, store);
  await until(
    "the second harness stands by",
    async () => (await readyStatus(second.url)) === "standby",
  );
  const proxy = await startReadyProxy([first.url, second.url]);
  const brain = new Brain(proxy.url);
  const workdir = join(dir, "work");
  mkdirSync(workdir, { recursive: true });
  const keyFile = join(dir, "key");
  writeFileSync(keyFile, ENVIRONMENT_KEY);
  const cliExecutor = launchCli(EXECUTOR, [
    "--workdir",
    workdir,
    "--name",
    "cli-executor",
    "--log-level",
    "debug",
  ], {
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      PATH: process.env.PATH ?? "",
      HOME: dir,
      BMA_BASE_URL: proxy.url,
      BMA_ENVIRONMENT_ID: "env_1",
      BMA_ENVIRONMENT_KEY_FILE: keyFile,
    },
  });
  const executors = [
    new CountingExecutor(proxy.url, "client-b"),
    new CountingExecutor(proxy.url, "client-c"),
  ];
  for (const executor of executors) await executor.client.start();
  const ids = async () =>
    (await brain.request("/executors")).body.executors as {
      executor_id: string;
      executor: { name: string };
    }[];
  await until("three executors registered", async () => (await ids()).length === 3);
  for (const executor of await ids()) {
    const session = `ses_${executor.executor.name}`;
    await brain.retry("/sessions", {
      session_id: session,
      executor_id: executor.executor_id,
      metadata: { source: "harness" },
    }, 201);
    await brain.retry(`/sessions/${session}?until=ready&wait_ms=${LONG_POLL_MS}`, undefined, 200);
  }
  return {
    harnesses: [first, second],
    proxy,
    brain,
    cliExecutor,
    workdir,
    executors,
    stop: async () => {
      for (const executor of executors) await executor.client.stop().catch(() => {});
      for (const child of [cliExecutor.child, first.cli.child, second.cli.child]) {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      }
      await Promise.all([cliExecutor.result, first.cli.result, second.cli.result]);
      await proxy.close();
    },
  };
}

/** Tool calls through the brain, each repeated with its id until it settles. */
export async function callTools(rig: Rig, prefix: string, count: number): Promise<void> {
  const sessions = ["ses_cli-executor", "ses_client-b", "ses_client-c"];
  await Promise.all(Array.from({ length: count }, async (_, i) => {
    const session = sessions[i % sessions.length];
    const id = `${prefix}_${i}`;
    const command = session === "ses_cli-executor"
      ? `echo ${id} >> ran.log; sleep 0.2; echo done ${id}`
      : `say ${id}`;
    const answer = await rig.brain.retry(
      `/sessions/${session}/tool-calls?wait_ms=${LONG_POLL_MS}`,
      { tool: "bash", input: { command }, tool_call_id: id },
      200,
    );
    assert.equal(answer.body.state, "settled", JSON.stringify(answer.body));
    const stdout = String(answer.body.result?.structured_content?.stdout ?? "");
    assert.ok(stdout.includes(id), `${id}: ${JSON.stringify(answer.body)}`);
  }));
}

/** Checks the invariants: each tool ran once, each session's ticks stored once and in order. */
export async function checkNothingLost(rig: Rig, ticks: number): Promise<void> {
  for (const executor of rig.executors) {
    for (const [id, runs] of executor.runs) assert.equal(runs, 1, `${id} ran ${runs} times`);
    const session = `ses_${executor.name}`;
    assert.deepEqual(executor.acked.get(session)?.slice().sort((a, b) => a - b), range(ticks));
    const answer = await rig.brain.retry(
      `/sessions/${session}/events?from=0&limit=1000`,
      undefined,
      200,
    );
    const stored = (answer.body.events as { event: { type: string; n: number } }[])
      .filter((record) => record.event.type === "tick")
      .map((record) => record.event.n);
    assert.deepEqual(stored, range(ticks), `${session}: the stored ticks`);
    const view = await rig.brain.retry(`/sessions/${session}`, undefined, 200);
    assert.notEqual(view.body.state, "ended", `${session} was ended`);
  }
  const ran = readFileSync(join(rig.workdir, "ran.log"), "utf8").trim().split("\n");
  assert.equal(new Set(ran).size, ran.length, `a bash call ran twice: ${ran.join(", ")}`);
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

export { jsonLogs };
