/**
 * A brain waiting over HTTP for a tool call's result when the harness closes (a drain, a
 * failover) gets 503 `harness_closed` — and repeats its request at the next harness — not a
 * connection cut without an answer. The brain API served by the harness's own server on
 * 127.0.0.1, as `bma-harness serve` serves it (closing the harness closes that server), an
 * executor on a real WebSocket that acknowledges the call and never answers it. Likewise a brain
 * waiting on a session (`until=ended`, an events long poll, an event stream): the session ends
 * only here, so it gets 503 (the stream an `end` without `ended`), never the session's end.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  bearerAuthorize,
  brainApi,
  createLinkedTransportPair,
  Harness,
  type HarnessStore,
  ManualClock,
  MemoryHarnessStore,
} from "../../node.ts";
import { ExecutorPeer, registerParams } from "../helpers/executor-peer.ts";

const TOKEN = "brain-token-0123456789abcdef";
const BASE = "/v1/harness";

describe("brainApi on the harness's server, when the harness closes", { timeout: 30_000 }, () => {
  const closers: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const close of closers.reverse()) await close().catch(() => {});
  });

  /** A harness serving the brain API on its own server, as `serve` does, and an executor. */
  async function served() {
    const harness = new Harness({ insecureNoAuth: true, heartbeatIntervalMs: 120_000 });
    closers.push(() => harness.close());
    const api = brainApi(harness, { authorize: bearerAuthorize(TOKEN), basePath: BASE });
    const server = await harness.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: (request) =>
        new URL(request.url).pathname.startsWith(`${BASE}/`)
          ? api.fetch(request)
          : harness.fetch(request),
    });
    closers.push(() => server.close());
    const peer = await ExecutorPeer.dial(server.url);
    closers.push(() => peer.close());
    await peer.start(registerParams());
    const executor = await harness.waitExecutor();
    return { harness, api, server, peer, executor };
  }

  it("answers a request waiting for a tool call's result with 503 harness_closed", async () => {
    const { harness, server, peer, executor } = await served();
    await executor.assignSession({ session_id: "ses_close" });

    const waiting = fetch(`${server.httpUrl}${BASE}/sessions/ses_close/tool-calls?wait_ms=30000`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({
        tool: "bash",
        input: { command: "sleep 4" },
        tool_call_id: "call_long",
      }),
    });
    // Dispatched: the request waits for its result.
    const call = await peer.nextToolCall();
    assert.equal(call.tool_call_id, "call_long");

    await harness.close();
    const response = await waiting;
    assert.equal(response.status, 503);
    assert.equal(response.headers.get("retry-after"), "1", "repeat it at the next harness");
    const body = await response.json();
    assert.equal(body.error?.code, "harness_closed", JSON.stringify(body));
  });

  it("tells brains waiting on a session no end that only this harness saw", async () => {
    const { harness, api, peer, executor } = await served();
    const session = await executor.assignSession({ session_id: "ses_drain" });
    await peer.peer.call("session.event", {
      session_id: "ses_drain",
      event: { type: "tick", n: 1 },
    }, {
      id: "evt_drain_1",
    });
    // In process: each request is waiting before the close, whatever the network does.
    const get = async (path: string, headers: Record<string, string> = {}) =>
      await api.fetch(
        new Request(`http://brain.invalid${BASE}/sessions/ses_drain${path}`, {
          headers: { authorization: `Bearer ${TOKEN}`, ...headers },
        }),
      );
    const untilEnded = get("?until=ended&wait_ms=30000");
    const page = get("/events?from=1&wait_ms=30000");
    const stream = await get("/events?from=1", { accept: "text/event-stream" });
    assert.equal(stream.status, 200);
    const streamText = stream.text();
    // Each handler has run up to its wait (a few turns: no I/O is between).
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setTimeout(resolve, 0));

    await harness.close();
    assert.equal(session.state, "ended", "ended here: this harness closed");
    for (const [name, answer] of [["until=ended", untilEnded], ["events", page]] as const) {
      const response = await answer;
      const body = await response.json();
      assert.equal(response.status, 503, `${name}: ${JSON.stringify(body)}`);
      assert.equal(body.error?.code, "harness_closed", name);
    }
    // The stream ends without the session's end: its client reconnects to the next harness.
    const text = await streamText;
    assert.match(text, /event: end\ndata: \{"next":1,"ended":false\}/, text);
  });

  it("answers 503 harness_closed, not a final 409, when another harness took the store over", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    const clock = new ManualClock();
    const renew = 1_000;
    const holder = (host: string, takeover: boolean, holderClock: ManualClock, standby = false) => {
      const made = new Harness({
        store,
        clock: holderClock,
        holderIdentity: { host, pid: 1, processStarted: 1, alive: () => true },
        takeover,
        standby,
        storeRenewMs: renew,
        heartbeatIntervalMs: 120_000,
        insecureNoAuth: true,
      });
      closers.push(() => made.close());
      return made;
    };
    const first = holder("a", false, clock);
    await first.ready;
    const [executorEnd, harnessEnd] = createLinkedTransportPair({ protocol: "bma.executor.v1.1" });
    await first.accept(harnessEnd);
    const peer = new ExecutorPeer(executorEnd);
    closers.push(() => peer.close());
    await peer.start(registerParams());
    const executor = await first.waitExecutor();
    await executor.assignSession({ session_id: "ses_fence" });
    const api = brainApi(first, { authorize: bearerAuthorize(TOKEN), basePath: BASE });
    const post = async (path: string, body: unknown) => {
      const response = await api.fetch(
        new Request(`http://brain.invalid${BASE}/sessions/ses_fence${path}`, {
          method: "POST",
          headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify(body),
        }),
      );
      return { status: response.status, body: await response.json() };
    };
    const call = (id: string) => ({ tool: "bash", input: { command: "true" }, tool_call_id: id });

    // Taken over: the first harness learns it at its next write, the call it stores.
    const second = holder("b", true, new ManualClock());
    await second.ready;
    const storing = await post("/tool-calls?wait_ms=0", call("call_fenced"));
    assert.equal(storing.status, 503, JSON.stringify(storing.body));
    assert.equal(storing.body.error.code, "harness_closed");

    // Once it knows, its sessions ended here only: requests about them are for the next harness.
    await clock.advance(renew);
    assert.equal(first.readiness, "fenced");
    for (const [path, body] of [["/tool-calls", call("call_after")], ["/stop", {}]] as const) {
      const answer = await post(path, body);
      assert.equal(answer.status, 503, `${path}: ${JSON.stringify(answer.body)}`);
      assert.equal(answer.body.error.code, "harness_closed", path);
    }

    // A standby knows no session (it would answer from what it reads back): it sends brains on.
    const standby = holder("c", false, new ManualClock(), true);
    assert.equal(standby.readiness, "standby");
    const standbyApi = brainApi(standby, { authorize: bearerAuthorize(TOKEN), basePath: BASE });
    const asked = await standbyApi.fetch(
      new Request(`http://brain.invalid${BASE}/sessions/ses_fence`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      }),
    );
    assert.equal(asked.status, 503);
    assert.equal(asked.headers.get("retry-after"), "1");
    assert.equal((await asked.json()).error.code, "unavailable");
  });

  it("a standby whose first claim is a round trip to its store away sends a brain on once it knows: 503, not a wait for ready", async () => {
    const inner = new MemoryHarnessStore({ values: "json" });
    // A database: every answer a turn of the event loop away.
    const later = <T>(value: () => T) =>
      new Promise<T>((resolve) => setTimeout(() => resolve(value()), 5));
    const store: HarnessStore = {
      get: (key) => later(() => inner.get(key)),
      list: (prefix, options) => later(() => inner.list(prefix, options)),
      write: (batch) => later(() => inner.write(batch)),
    };
    const made = (host: string, standby: boolean) => {
      const harness = new Harness({
        store,
        clock: new ManualClock(),
        holderIdentity: { host, pid: 1, processStarted: 1, alive: () => true },
        standby,
        storeRenewMs: 1_000,
        insecureNoAuth: true,
      });
      closers.push(() => harness.close());
      return harness;
    };
    await made("a", false).ready;
    const standby = made("b", true);
    assert.equal(standby.readiness, "starting");
    const api = brainApi(standby, { authorize: bearerAuthorize(TOKEN), basePath: BASE });
    const answer = await api.fetch(
      new Request(`http://brain.invalid${BASE}/sessions`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      }),
    );
    assert.equal(standby.readiness, "standby");
    assert.equal(answer.status, 503);
    assert.equal((await answer.json()).error.code, "unavailable");
  });
});
