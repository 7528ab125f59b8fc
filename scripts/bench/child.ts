/**
 * One process of the benchmark, on whichever runtime runs it (`node --import tsx`, `deno run
 * -A`, `bun`): `child.ts <role> [args...]`. It reports `{ ready, url? }` once set up, then
 * serves the orchestrator's commands on stdin (`run`, ...), one JSON line each way, until
 * `exit` or the end of stdin. Roles:
 *
 * - `ws-echo-server tcp|<path>`, `ws-echo-client <url>`: the raw WebSocket echo.
 * - `ndjson-echo-server <path>`, `ndjson-echo-client <path>`: the raw Unix-socket echo.
 * - `tool-harness tcp|<path>`, `tool-executor <url>`: tool calls between two processes; the
 *   harness drives.
 * - `memory`: harness and executor in this process over the in-memory pair (and the JSON
 *   reference figure).
 * - `events-harness [<file> [normal|full] | <postgres://…> <table>]`, `events-executor <url>`:
 *   durable session events; the executor drives. Given a file, the harness keeps its state in a
 *   SQLite store there (synchronous NORMAL, the default, or FULL); given a PostgreSQL URL, in
 *   that table of that database. The harness also answers `heap` (heap used
 *   after a full collection: run it with the GC exposed) and `kept {session}`; the executor
 *   `fill {client, session, count}`.
 * - `mcp-memory`, `mcp-ws-server`, `mcp-ws-client <url>`: the MCP SDK baseline.
 * - `scale-harness`, `scale-executors`, `idle-ws-server`, `idle-ws-clients`: see scale-roles.ts.
 */
import {
  type Command,
  type Measured,
  report,
  RUNTIME,
  serveCommands,
  toolCallFrame,
} from "./common.ts";
import {
  type EchoClient,
  ndjsonEchoClient,
  serveNdjsonEcho,
  serveWsEcho,
  wsEchoClient,
} from "./raw.ts";
import {
  callOnce,
  executorInfo,
  jsonPairs,
  measureCalls,
  memoryPair,
  presets,
  readySession,
  serveTool,
} from "./sdk.ts";
import type { HarnessStore, Session } from "../../harness/mod.ts";
import type { ExecutorClient } from "../../executor/mod.ts";
import { measureLoop, sleep } from "./common.ts";
import { openSqliteStore as openOnBun } from "../../harness/store/sqlite.bun.ts";
import { openSqliteStore as openOnDeno } from "../../harness/store/sqlite.deno.ts";
import { openSqliteStore as openOnNode } from "../../harness/store/sqlite.node.ts";
import { openPostgresStore } from "../../harness/store/postgres.node.ts";

const [role, ...args] = process.argv.slice(2);

function numberArg(command: Command, name: string): number {
  const value = command[name];
  if (typeof value !== "number") throw new Error(`command ${command.cmd} needs a number ${name}`);
  return value;
}

/** Serves `run` with `measure`, other commands with `extra`; closes with `close`. */
async function drive(
  measure: (command: Command) => Promise<Measured> | Measured,
  close: () => Promise<void> | void,
  extra: Record<string, (command: Command) => Promise<Record<string, unknown>>> = {},
): Promise<void> {
  await serveCommands(async (command) => {
    if (command.cmd === "run") return { ...(await measure(command)) };
    const handler = extra[command.cmd];
    if (!handler) throw new Error(`unknown command ${command.cmd}`);
    return await handler(command);
  });
  await close();
}

/** Stays up, answering only `exit`, then closes. */
async function idle(close: () => Promise<void> | void): Promise<void> {
  await drive(() => {
    throw new Error("this process does not drive");
  }, close);
}

/** Heap used after full collections, when the runtime lets this process collect. */
async function settledHeap(): Promise<number> {
  const bun = (globalThis as { Bun?: { gc(force: boolean): void } }).Bun;
  const gc = (globalThis as { gc?: () => void }).gc ?? (bun ? () => bun.gc(true) : undefined);
  if (!gc) throw new Error("no way to collect garbage: run with --expose-gc");
  for (let i = 0; i < 3; i++) {
    gc();
    await sleep(50);
  }
  return process.memoryUsage().heapUsed;
}

/** This runtime's SQLite store on `path` (its default driver; synchronous NORMAL unless told). */
function openSqlite(
  path: string,
  synchronous: "normal" | "full" = "normal",
): Promise<HarnessStore> {
  return RUNTIME === "bun"
    ? openOnBun(path, { synchronous })
    : RUNTIME === "deno"
    ? openOnDeno(path, { synchronous })
    : openOnNode(path, { synchronous });
}

function synchronousArg(arg: string | undefined): "normal" | "full" {
  if (arg === undefined || arg === "normal" || arg === "full") return arg ?? "normal";
  throw new Error(`events-harness: synchronous must be normal or full, not ${arg}`);
}

function where(arg: string | undefined): { tcp: true } | { path: string } {
  return !arg || arg === "tcp" ? { tcp: true } : { path: arg };
}

async function main(): Promise<void> {
  switch (role) {
    case "ws-echo-server": {
      const server = await serveWsEcho(where(args[0]));
      report({ ready: true, url: server.url, runtime: RUNTIME });
      await idle(() => server.close());
      return;
    }
    case "ndjson-echo-server": {
      const server = await serveNdjsonEcho(args[0]);
      report({ ready: true, url: server.url, runtime: RUNTIME });
      await idle(() => server.close());
      return;
    }
    case "ws-echo-client":
    case "ndjson-echo-client": {
      const frame = toolCallFrame();
      const client: EchoClient = role === "ws-echo-client"
        ? await wsEchoClient(args[0], frame)
        : await ndjsonEchoClient(args[0], frame);
      report({ ready: true, frameBytes: frame.length });
      await drive(
        (c) => client.run(numberArg(c, "inflight"), numberArg(c, "ms")),
        () => client.close(),
      );
      return;
    }
    case "tool-harness": {
      const { Harness } = await presets();
      const harness = new Harness({ insecureNoAuth: true });
      const target = where(args[0]);
      const server = "path" in target
        ? await harness.serveUnix(target.path)
        : await harness.serve({ hostname: "127.0.0.1", port: 0 });
      const session = harness.waitExecutor().then((executor) => readySession(executor));
      session.catch(() => {});
      report({ ready: true, url: server.url });
      await drive(
        async (c) => measureCalls(await session, numberArg(c, "inflight"), numberArg(c, "ms")),
        async () => {
          await harness.close();
          await server.close();
        },
        {
          // One call, to check the pair works before anything is measured.
          probe: async () => {
            await callOnce(await session);
            return {};
          },
        },
      );
      return;
    }
    case "tool-executor": {
      const { ExecutorClient } = await presets();
      const client = new ExecutorClient({
        harnessUrl: args[0],
        executor: executorInfo(`bench-${RUNTIME}`),
      });
      serveTool(client);
      await client.start();
      report({ ready: true });
      await idle(async () => void (await client.stop()));
      return;
    }
    case "memory": {
      const pair = await memoryPair();
      report({ ready: true });
      await drive(
        (c) =>
          c.mode === "json"
            ? jsonPairs(numberArg(c, "ms"))
            : measureCalls(pair.session, numberArg(c, "inflight"), numberArg(c, "ms")),
        () => pair.close(),
      );
      return;
    }
    case "events-harness": {
      const { Harness } = await presets();
      // `events-harness <file> [normal|full]`: the harness keeps its state in a SQLite file
      // there, with that `synchronous` level; `events-harness <postgres://…> <table>`: in that
      // PostgreSQL table.
      const store = !args[0]
        ? undefined
        : /^postgres(ql)?:/.test(args[0])
        ? await openPostgresStore(args[0], { table: args[1] })
        : await openSqlite(args[0], synchronousArg(args[1]));
      const harness = new Harness({ insecureNoAuth: true, ...(store ? { store } : {}) });
      // A store that answers with promises is read back (and claimed) before the harness serves.
      await harness.ready;
      const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
      report({ ready: true, url: server.url });
      const sessions = new Map<string, Session>();
      let round = 0;
      await drive(() => {
        throw new Error("the executor drives");
      }, async () => {
        await harness.close();
        await server.close();
      }, {
        // A fresh session per executor for each run, so no run reads a log grown by the last.
        fresh: async (c) => {
          const want = numberArg(c, "executors");
          while (harness.executors.filter((e) => e.connected).length < want) await sleep(10);
          round++;
          const out: Record<string, string> = {};
          for (const executor of harness.executors) {
            const name = executor.info.name;
            const old = sessions.get(name);
            if (old) await old.stop("next round");
            const session = await readySession(executor, `ses_${name}_${round}`);
            sessions.set(name, session);
            out[name] = session.id;
          }
          return { sessions: out };
        },
        heap: async () => ({ heapUsed: await settledHeap() }),
        kept: (c) => {
          const session = harness.sessions.get(String(c.session));
          if (!session) throw new Error(`no session ${c.session}`);
          return Promise.resolve({
            kept: session.eventRecords.length,
            dropped: session.droppedEvents,
          });
        },
      });
      return;
    }
    case "events-executor": {
      const { ExecutorClient } = await presets();
      const clients = new Map<string, ExecutorClient>();
      for (const window of [1, 64]) {
        const name = `events-w${window}`;
        const client = new ExecutorClient({
          harnessUrl: args[0],
          executor: executorInfo(name),
          eventWindow: window,
        });
        serveTool(client);
        await client.start();
        clients.set(name, client);
      }
      report({ ready: true, executors: clients.size });
      let n = 0;
      const emit = (client: ExecutorClient, session_id: string) =>
        client.call("session.event", {
          session_id,
          event: { type: "output", n: n++, text: "a line of tool output, about this long" },
        });
      await drive(
        (c) => {
          const client = clients.get(String(c.client))!;
          const session_id = String(c.session);
          return measureLoop(
            () => emit(client, session_id),
            numberArg(c, "inflight"),
            numberArg(c, "ms"),
          );
        },
        async () => {
          for (const client of clients.values()) await client.stop();
        },
        {
          // `count` events, 64 in flight, all acknowledged.
          fill: async (c) => {
            const client = clients.get(String(c.client))!;
            const session_id = String(c.session);
            let left = numberArg(c, "count");
            const lane = async () => {
              while (left > 0) {
                left--;
                await emit(client, session_id);
              }
            };
            await Promise.all(Array.from({ length: 64 }, lane));
            return {};
          },
        },
      );
      return;
    }
    case "mcp-memory": {
      const { mcpMemory } = await import("./mcp.ts");
      const driver = await mcpMemory();
      report({ ready: true });
      await drive(
        (c) => driver.run(numberArg(c, "inflight"), numberArg(c, "ms")),
        () => driver.close(),
      );
      return;
    }
    case "mcp-ws-server": {
      const { serveMcpWebSocket } = await import("./mcp.ts");
      const server = await serveMcpWebSocket();
      report({ ready: true, url: server.url });
      await idle(() => server.close());
      return;
    }
    case "mcp-ws-client": {
      const { mcpWebSocketClient } = await import("./mcp.ts");
      const driver = await mcpWebSocketClient(args[0]);
      report({ ready: true });
      await drive(
        (c) => driver.run(numberArg(c, "inflight"), numberArg(c, "ms")),
        () => driver.close(),
      );
      return;
    }
    default: {
      const { runScaleRole } = await import("./scale-roles.ts");
      await runScaleRole(role, args);
    }
  }
}

try {
  await main();
  process.exit(0);
} catch (error) {
  report({ fatal: String((error as Error)?.stack ?? error) });
  process.exit(1);
}
