/**
 * Handlers shared by many peers (`PeerOptions.handlers`, a `PeerHandlers` table): each peer's
 * messages reach the table's handler with that peer's owner, a peer's own handlers take
 * precedence, the table's gate runs after the peer's own, and a method neither serves is
 * answered -32601 as before.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ErrorCode, ForbiddenError, Peer, PeerHandlers } from "../../protocol/mod.ts";
import { peerWithRawEnd } from "../helpers/raw.ts";

interface Owner {
  name: string;
  statuses: string[];
}

const open: Peer[] = [];
afterEach(async () => {
  for (const peer of open.splice(0)) await peer.close();
});

function table(): PeerHandlers<Owner> {
  return new PeerHandlers<Owner>()
    .onRequest("executor.heartbeat", (_params, context, owner) => {
      assert.equal(context.method, "executor.heartbeat");
      return { drain: owner.name === "draining", lease_expires_at: "2026-01-01T00:00:00.000Z" };
    })
    .onNotification("session.status", (params, owner) => {
      owner.statuses.push(params.status);
    });
}

function setup(handlers: PeerHandlers<Owner>, name: string) {
  const owner: Owner = { name, statuses: [] };
  const made = peerWithRawEnd({ handlers, owner });
  open.push(made.peer);
  return { ...made, owner };
}

const HEARTBEAT = { jsonrpc: "2.0", id: 1, method: "executor.heartbeat", params: {} };

describe("Peer: handlers shared by many peers", { timeout: 10_000 }, () => {
  it("serves every peer from one table, each handler given its peer's owner", async () => {
    const shared = table();
    const one = setup(shared, "one");
    const two = setup(shared, "draining");
    one.raw.sendJson(HEARTBEAT);
    two.raw.sendJson(HEARTBEAT);
    assert.equal((await one.raw.next()).result.drain, false);
    assert.equal((await two.raw.next()).result.drain, true);
    two.raw.sendJson({
      jsonrpc: "2.0",
      method: "session.status",
      params: { session_id: "ses_1", status: "idle" },
    });
    two.raw.sendJson(HEARTBEAT); // answered after the notification was handled
    await two.raw.next();
    assert.deepEqual(one.owner.statuses, []);
    assert.deepEqual(two.owner.statuses, ["idle"]);
  });

  it("prefers a peer's own handler, and answers -32601 for what neither serves", async () => {
    const { peer, raw } = setup(table(), "one");
    peer.onRequest("executor.heartbeat", () => ({
      drain: true,
      lease_expires_at: "2026-01-01T00:00:00.000Z",
    }));
    raw.sendJson(HEARTBEAT);
    assert.equal((await raw.next()).result.drain, true);
    raw.sendJson({ jsonrpc: "2.0", id: 2, method: "session.ready", params: { session_id: "s" } });
    const refused = await raw.next();
    assert.equal(refused.error.code, ErrorCode.METHOD_NOT_FOUND);
    assert.deepEqual(refused.error.data, { method: "session.ready" });
  });

  it("runs the table's gate with the owner, after the peer's own gate admitted", async () => {
    const shared = table();
    const seen: string[] = [];
    shared.admit = (owner, method) => {
      seen.push(`${owner.name} ${method}`);
      return owner.name === "locked" ? new ForbiddenError("locked", { reason: "x" }) : undefined;
    };
    const locked = setup(shared, "locked");
    locked.raw.sendJson(HEARTBEAT);
    assert.equal((await locked.raw.next()).error.code, ErrorCode.FORBIDDEN);
    const gated = setup(shared, "gated");
    gated.peer.admit = () => new ForbiddenError("own gate", { reason: "own" });
    gated.raw.sendJson(HEARTBEAT);
    const refused = await gated.raw.next();
    assert.equal(refused.error.message, "own gate");
    assert.deepEqual(seen, ["locked executor.heartbeat"]);
  });
});

describe("PeerHandlers: frames buffered before the peer exists", () => {
  it("serves a request the transport delivers during construction", async () => {
    const sent: string[] = [];
    let resolveClosed!: (info: { code: number; reason: string }) => void;
    // A transport that already holds a request and hands it over inside listen(), as a
    // WebSocket adapter does with frames that arrived before anyone listened.
    const transport = {
      protocol: "bma.executor.v1.1",
      closed: new Promise<{ code: number; reason: string }>((r) => (resolveClosed = r)),
      send: (frame: string) => void sent.push(frame),
      listen: (receiver: (frame: string) => void) =>
        receiver(
          JSON.stringify({ jsonrpc: "2.0", id: 1, method: "executor.heartbeat", params: {} }),
        ),
      close: (code = 1000, reason = "") => resolveClosed({ code, reason }),
    };
    const owner: Owner = { name: "early", statuses: [] };
    const peer = new Peer(transport, { handlers: table(), owner });
    open.push(peer);
    await new Promise((r) => setTimeout(r, 0));
    assert.equal(sent.length, 1, "one answer");
    const answer = JSON.parse(sent[0]);
    assert.equal(answer.id, 1);
    assert.equal(answer.error, undefined, `answered without error: ${sent[0]}`);
    assert.equal(answer.result.drain, false);
  });
});
