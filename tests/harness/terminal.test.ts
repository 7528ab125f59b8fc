/**
 * `session.terminal(...)`, harness half, against a Peer playing the executor over a real
 * WebSocket: the executor side is scripted so that the wire shows exactly the losses the handle
 * must repair (gaps, repeats, overlaps, out-of-order chunks, a reconnect, evicted bytes, a reader
 * that falls behind), and each repair is checked byte for byte.
 */
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  Harness,
  type HarnessServer,
  SessionEndedError,
  TerminalBusyError,
} from "../../harness/node.ts";
import type { TerminalReadParams } from "../../protocol/mod.ts";
import { InvalidCallOptionError } from "../../mod.ts";
import { ExecutorPeer, registerParams } from "../helpers/executor-peer.ts";

const CAPABILITIES = { tools: [], process: true, terminal: true };
/** Per test (Bun does not pass a suite's timeout on to its tests). */
const SLOW = { timeout: 20_000 };

/** One terminal as the scripted executor holds it: its whole output, and what it still keeps. */
class ScriptedTerminal {
  output = "";
  /** Offset of the oldest byte still held (older ones were "evicted"). */
  start = 0;
  exitCode: number | null | undefined;
  readonly reads: TerminalReadParams[] = [];
}

describe("Harness: terminals", { timeout: 30_000 }, () => {
  let harness: Harness;
  let server: HarnessServer;
  const peers: ExecutorPeer[] = [];
  let next = 0;

  before(async () => {
    harness = new Harness({ insecureNoAuth: true });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  });
  afterEach(async () => {
    for (const peer of peers.splice(0)) await peer.close().catch(() => {});
  });
  after(async () => {
    await harness.close();
    await server.close();
  });

  /** An executor serving terminal.* from scripted terminals. */
  async function executorPeer(terminals: Map<string, ScriptedTerminal>) {
    const peer = await ExecutorPeer.dial(server.url);
    peers.push(peer);
    const closes: string[] = [];
    peer.peer.onRequest("session.ready", () => ({ ok: true })); // unused, keeps the table total
    peer.peer.onRequest("terminal.open", ({ terminal_id }) => {
      const id = terminal_id!;
      const duplicate = terminals.has(id);
      if (!duplicate) terminals.set(id, new ScriptedTerminal());
      return { terminal_id: id, pid: 4242, ...(duplicate ? { duplicate } : {}) };
    });
    peer.peer.onRequest("terminal.read", (params) => {
      const terminal = terminals.get(params.terminal_id)!;
      terminal.reads.push(params);
      const from = Math.max(params.offset ?? 0, terminal.start);
      const data = terminal.output.slice(from, from + (params.max_bytes ?? 65536));
      const next = from + data.length;
      const eof = terminal.exitCode !== undefined && next === terminal.output.length;
      return {
        terminal_id: params.terminal_id,
        offset: from,
        data,
        encoding: "utf8" as const,
        next_offset: next,
        eof,
        ...(eof ? { exit_code: terminal.exitCode } : {}),
      };
    });
    peer.peer.onRequest("terminal.close", ({ terminal_id }) => {
      closes.push(terminal_id);
      return { closed: true, exit_code: null };
    });
    return { peer, closes };
  }

  async function setup() {
    const machineId = `m_term${++next}`;
    const terminals = new Map<string, ScriptedTerminal>();
    const { peer, closes } = await executorPeer(terminals);
    const params = registerParams({
      environment_id: "",
      machine_id: machineId,
      capabilities: CAPABILITIES,
    });
    await peer.start(params);
    const executor = await harness.waitExecutor({ filter: (e) => e.id === `exec_${machineId}` });
    const session = await executor.assignSession({ session_id: `ses_${machineId}` });
    await peer.peer.call("session.ready", { session_id: session.id });
    await session.ready();
    /** Sends `output[from, to)` of a terminal as one terminal.output (eof when it says so). */
    const send = (id: string, from: number, to: number, end?: number | null) => {
      const terminal = terminals.get(id)!;
      peer.peer.notify("terminal.output", {
        session_id: session.id,
        terminal_id: id,
        offset: from,
        data: terminal.output.slice(from, to),
        encoding: "utf8",
        ...(end !== undefined ? { eof: true, exit_code: end } : {}),
      });
    };
    return { peer, closes, terminals, session, executor, send, params };
  }

  async function collect(terminal: AsyncIterable<string>): Promise<string> {
    let text = "";
    for await (const chunk of terminal) text += chunk;
    return text;
  }

  it(
    "puts repeated, overlapping and out-of-order chunks together, each byte once",
    SLOW,
    async () => {
      const { session, terminals, send } = await setup();
      const terminal = await session.terminal({ terminalId: "t1" });
      assert.equal(terminal.pid, 4242);
      const scripted = terminals.get("t1")!;
      scripted.output = "0123456789abcdefghij";
      const text = collect(terminal);
      send("t1", 0, 4);
      send("t1", 0, 4); // a repeat
      send("t1", 2, 6); // an overlap
      send("t1", 10, 14); // after a gap: 6..10 is read back
      send("t1", 6, 10); // the missing part arrives late after all
      send("t1", 12, 16);
      scripted.exitCode = 2;
      send("t1", 16, 20, 2);
      assert.equal(await text, "0123456789abcdefghij");
      assert.equal(await terminal.exited, 2);
      assert.equal(terminal.lostBytes, 0);
      assert.ok(scripted.reads.every((read) => read.offset === 6), JSON.stringify(scripted.reads));
    },
  );

  it(
    "keeps its own ids: wire names in an untyped caller's options replace nothing, and terminal_id is refused",
    SLOW,
    async () => {
      const { session, terminals } = await setup();
      const untyped = { terminalId: "t7", session_id: "ses_other" };
      const terminal = await session.terminal(untyped as Parameters<typeof session.terminal>[0]);
      assert.equal(terminal.id, "t7");
      assert.deepEqual([...terminals.keys()], ["t7"]);
      // The wire's spelling of the id (0.1.0's option) is refused, not taken or ignored.
      const misspelled = { terminalId: "t8", terminal_id: "other" };
      await assert.rejects(
        session.terminal(misspelled as Parameters<typeof session.terminal>[0]),
        (error: unknown) =>
          error instanceof InvalidCallOptionError && error.option === "terminal_id",
      );
      assert.deepEqual([...terminals.keys()], ["t7"]);
    },
  );

  it("counts bytes the executor no longer holds as lost and goes on after them", SLOW, async () => {
    const { session, terminals, send } = await setup();
    const terminal = await session.terminal({ terminalId: "t2" });
    const scripted = terminals.get("t2")!;
    scripted.output = "abcdefghij";
    scripted.start = 6; // 3..6 were evicted
    const text = collect(terminal);
    send("t2", 0, 3);
    send("t2", 8, 10); // shows the gap: the read answers from 6
    scripted.exitCode = 0;
    send("t2", 10, 10, 0);
    assert.equal(await text, "abcghij");
    assert.equal(terminal.lostBytes, 3);
    assert.equal(terminal.offset, 10);
  });

  it("after a reconnect it reads back what was sent while disconnected", SLOW, async () => {
    const { session, terminals, send, peer, params } = await setup();
    const terminal = await session.terminal({ terminalId: "t3" });
    const scripted = terminals.get("t3")!;
    scripted.output = "hello ";
    const text = collect(terminal);
    send("t3", 0, 6);
    await until(() => terminal.offset === 6);
    await peer.close(1011, "gone for a moment");
    await until(() => !session.executor.connected);
    scripted.output += "world"; // printed while nobody listened: no notification shows it
    const back = await executorPeer(terminals);
    await back.peer.start({
      ...params,
      resume: { executor_id: session.executor.id, active_sessions: [session.id] },
    });
    await until(() => scripted.reads.length > 0);
    assert.equal(scripted.reads[0].offset, 6);
    await until(() => terminal.offset === 11);
    scripted.exitCode = 0;
    back.peer.peer.notify("terminal.output", {
      session_id: session.id,
      terminal_id: "t3",
      offset: 11,
      data: "",
      eof: true,
      exit_code: 0,
    });
    assert.equal(await text, "hello world");
    assert.equal(session.state, "ready");
  });

  it("reads back what arrived while its reader lagged beyond the queue limit", SLOW, async () => {
    const { session, terminals, send } = await setup();
    const terminal = await session.terminal({ terminalId: "t4" });
    const scripted = terminals.get("t4")!;
    const chunk = 64 * 1024;
    const chunks = 80; // 5 MiB: more than the 4 MiB the handle queues for a slow reader
    scripted.output = Array.from({ length: chunks }, (_, i) => String(i % 10).repeat(chunk))
      .join("");
    scripted.exitCode = 0;
    for (let i = 0; i < chunks; i++) {
      send("t4", i * chunk, (i + 1) * chunk, i === chunks - 1 ? 0 : undefined);
    }
    await terminal.exited; // the last notification was read: only then does the reader start
    let bytes = 0;
    let same = true;
    for await (const piece of terminal.output()) {
      for (let i = 0; i < piece.length; i++) {
        same &&= piece[i] === 48 + (Math.floor((bytes + i) / chunk) % 10);
      }
      bytes += piece.byteLength;
    }
    assert.equal(bytes, chunk * chunks);
    assert.ok(same, "every byte in its place");
    assert.ok(scripted.reads.length > 0, "the part beyond the queue was read back");
  });

  it("has one reader at a time; the next one goes on where the last stopped", SLOW, async () => {
    const { session, terminals, send } = await setup();
    const terminal = await session.terminal({ terminalId: "t5" });
    const scripted = terminals.get("t5")!;
    scripted.output = "first second";
    send("t5", 0, 6);
    const reader = terminal.output();
    const first = await reader.next();
    assert.equal(new TextDecoder().decode(first.value as Uint8Array), "first ");
    await assert.rejects(terminal.output().next(), TerminalBusyError);
    await reader.return();
    scripted.exitCode = 1;
    send("t5", 6, 12, 1);
    assert.equal(await collect(terminal), "second");
    assert.equal(await terminal.exited, 1);
  });

  it("aborting its signal closes it; the session's end ends its output", SLOW, async () => {
    const { session, closes, terminals, send } = await setup();
    const controller = new AbortController();
    const terminal = await session.terminal({ terminalId: "t6", signal: controller.signal });
    terminals.get("t6")!.output = "partial";
    send("t6", 0, 7);
    controller.abort();
    await until(() => closes.includes("t6"));
    const text = collect(terminal);
    await session.stop("done");
    assert.equal(await text, "partial");
    assert.equal(await terminal.exited, null);
    await assert.rejects(session.terminal(), SessionEndedError);
  });
});

async function until(predicate: () => boolean): Promise<void> {
  while (!predicate()) await new Promise((r) => setTimeout(r, 2));
}
