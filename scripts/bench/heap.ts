/**
 * What the harness retains per executor, by object type: heap snapshots of the scale
 * benchmark's harness (and of the bare `ws` server) before and after N executors (idle
 * connections) are in. The objects the second has and the first had not, divided by N, by
 * node type and constructor or function name, and by the per-connection object (`--anchors`)
 * that holds them and the field it holds them through (hidden classes and code are nobody's).
 *
 *   npx tsx scripts/bench/heap.ts [--n 1000] [--top 40] [--keep DIR] [--anchors A,B,...]
 *
 * Not part of `npm run bench`: a tool for finding what each executor costs (issue 8).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { Child } from "./procs.ts";
import { sleep } from "./common.ts";
import { startClients } from "./scale.ts";

const { values: flags } = parseArgs({
  options: {
    n: { type: "string", default: "1000" },
    top: { type: "string", default: "40" },
    anchors: { type: "string" },
    keep: { type: "string" },
  },
});
const n = Number(flags.n);
const top = Number(flags.top);
const dir = flags.keep ?? mkdtempSync(join(tmpdir(), "bma-heap-"));
mkdirSync(dir, { recursive: true });
/** Classes whose objects each connection has one of: what they reach is theirs. */
const anchors = new Set(
  (flags.anchors ??
    "ExecutorConnection,ExecutorHandle,ExecutorControls,Lease,Peer,WsTransport,WebSocketTransport," +
      "WritesPerTurn,Deadline,WebSocket,Socket,TCP,Receiver,Sender,WritableState,ReadableState," +
      "HTTPParser,IncomingMessage,URL,Timeout").split(","),
);
const NODE_FLAGS = { runtimeFlags: ["--expose-gc"], raiseFileLimit: true };

interface Snapshot {
  snapshot: {
    meta: {
      node_fields: string[];
      node_types: (string[] | string)[];
      edge_fields: string[];
      edge_types: (string[] | string)[];
    };
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}

/** The nodes of a snapshot, by index: type, name, self size, id, and their outgoing edges. */
class Graph {
  readonly count: number;
  readonly type: string[] = [];
  readonly name: string[] = [];
  readonly size: number[] = [];
  readonly id: number[] = [];
  /** Where each node's edges start in `edges` (in edge-field units), and the end. */
  readonly firstEdge: number[] = [];
  readonly snap: Snapshot;
  readonly edgeWidth: number;
  readonly nodeWidth: number;

  constructor(path: string) {
    const snap = this.snap = JSON.parse(readFileSync(path, "utf8")) as Snapshot;
    const meta = snap.snapshot.meta;
    const types = meta.node_types[0] as string[];
    const width = this.nodeWidth = meta.node_fields.length;
    this.edgeWidth = meta.edge_fields.length;
    const [typeAt, nameAt, idAt, sizeAt, edgesAt] = [
      "type",
      "name",
      "id",
      "self_size",
      "edge_count",
    ]
      .map((f) => meta.node_fields.indexOf(f));
    this.count = snap.nodes.length / width;
    let edge = 0;
    for (let k = 0; k < this.count; k++) {
      const at = k * width;
      this.type.push(types[snap.nodes[at + typeAt]]);
      this.name.push(snap.strings[snap.nodes[at + nameAt]]);
      this.size.push(snap.nodes[at + sizeAt]);
      this.id.push(snap.nodes[at + idAt]);
      this.firstEdge.push(edge);
      edge += snap.nodes[at + edgesAt] * this.edgeWidth;
    }
    this.firstEdge.push(edge);
  }

  /** A node's group: its type, and for objects and closures its constructor or function name. */
  key(k: number): string {
    const type = this.type[k];
    if (/string|number|bigint/.test(type)) return type;
    const name = this.name[k];
    return `${type} ${name.length > 50 ? `${name.slice(0, 47)}...` : name}`;
  }
}

/** Rows of a table: bytes and objects per connection, and what. */
type Rows = { what: string; bytes: number; count: number }[];

function print(title: string, rows: Rows, count: number, limit: number): string {
  const lines = [title, "  bytes/conn  objects/conn  what"];
  for (const row of rows.sort((x, y) => y.bytes - x.bytes).slice(0, limit)) {
    lines.push(
      `  ${(row.bytes / count).toFixed(0).padStart(10)}  ${
        (row.count / count).toFixed(2).padStart(12)
      }  ${row.what}`,
    );
  }
  return lines.join("\n");
}

/**
 * The nodes of `after` that `before` did not have (snapshot ids are stable within a process),
 * grouped by type and name, and attributed to the nearest new object of an `anchors` class
 * that reaches them (a breadth-first walk from all anchors at once, through new nodes only):
 * what each connection's objects hold, by the field it is held through.
 */
function analyse(before: string, after: string, count: number, anchors: Set<string>): string {
  const old = new Set(new Graph(before).id);
  const g = new Graph(after);
  const isNew = g.id.map((id) => !old.has(id));
  const edgeTypes = g.snap.snapshot.meta.edge_types[0] as string[];
  const fields = g.snap.snapshot.meta.edge_fields;
  const [typeAt, nameAt, toAt] = ["type", "name_or_index", "to_node"].map((f) => fields.indexOf(f));
  const owner: (string | undefined)[] = new Array(g.count);
  const via: (string | undefined)[] = new Array(g.count);
  const queue: number[] = [];
  const anchorName = (k: number) =>
    g.type[k] === "object" ? g.name[k].replace(/^_(?=[A-Z])/, "") : "";
  // A prototype (it has a `constructor`) is the class's, not a connection's.
  const isPrototype = (k: number) => {
    for (let e = g.firstEdge[k]; e < g.firstEdge[k + 1]; e += g.edgeWidth) {
      const type = edgeTypes[g.snap.edges[e + typeAt]];
      if (type === "property" && g.snap.strings[g.snap.edges[e + nameAt]] === "constructor") {
        return true;
      }
    }
    return false;
  };
  for (let k = 0; k < g.count; k++) {
    if (isNew[k] && anchors.has(anchorName(k)) && !isPrototype(k)) {
      owner[k] = anchorName(k);
      via[k] = "(itself)";
      queue.push(k);
    }
  }
  for (let q = 0; q < queue.length; q++) {
    const x = queue[q];
    for (let e = g.firstEdge[x]; e < g.firstEdge[x + 1]; e += g.edgeWidth) {
      const type = edgeTypes[g.snap.edges[e + typeAt]];
      if (type === "weak") continue;
      const to = g.snap.edges[e + toAt] / g.nodeWidth;
      if (!isNew[to] || owner[to] !== undefined) continue;
      // Hidden classes, code and what hangs off them are shared, not a connection's.
      if (g.type[to] === "code" || g.type[to] === "object shape") continue;
      const name = g.snap.edges[e + nameAt];
      const field = /context|property|internal|shortcut/.test(type)
        ? g.snap.strings[name]
        : `[${name}]`;
      owner[to] = owner[x];
      via[to] = via[x] === "(itself)" ? `.${field}` : via[x];
      queue.push(to);
    }
  }
  const byType = new Map<string, { bytes: number; count: number }>();
  const byOwner = new Map<string, Map<string, { bytes: number; count: number }>>();
  let total = 0;
  for (let k = 0; k < g.count; k++) {
    if (!isNew[k]) continue;
    total += g.size[k];
    const add = (map: Map<string, { bytes: number; count: number }>, what: string) => {
      const row = map.get(what) ?? { bytes: 0, count: 0 };
      row.bytes += g.size[k];
      row.count++;
      map.set(what, row);
    };
    add(byType, g.key(k));
    const o = owner[k] ?? "(no anchor: code, shapes, caches made once)";
    if (!byOwner.has(o)) byOwner.set(o, new Map());
    add(byOwner.get(o)!, `${g.key(k)}  via ${via[k] ?? "-"}`);
  }
  const out = [
    `new objects: ${(total / count).toFixed(0)} B per connection`,
    print("by type:", [...byType].map(([what, r]) => ({ what, ...r })), count, top),
    "by the object holding them (nearest anchor), then type and field:",
  ];
  const owners = [...byOwner].map(([o, m]) => ({
    o,
    m,
    bytes: [...m.values()].reduce((sum, r) => sum + r.bytes, 0),
  })).sort((x, y) => y.bytes - x.bytes);
  for (const { o, m, bytes } of owners) {
    if (bytes / count < 8) continue;
    out.push(
      print(
        `${(bytes / count).toFixed(0).padStart(6)} B/conn held by ${o}`,
        [...m].map(([what, r]) => ({ what, ...r })),
        count,
        8,
      ),
    );
  }
  return out.join("\n");
}

async function measure(serverRole: string, clientRole: string, name: string): Promise<string> {
  const server = await Child.start("node", [serverRole, "127.0.0.1", "0"], NODE_FLAGS);
  let children: Child[] = [];
  try {
    const { url } = await server.ready;
    const before = join(dir, `${name}-before.heapsnapshot`);
    const after = join(dir, `${name}-after.heapsnapshot`);
    await server.send("snapshot", { path: before });
    const memBefore = await server.send("mem");
    children = await startClients(clientRole, String(url), n, "h");
    await server.send("wait", { count: n });
    await sleep(2000);
    const memAfter = await server.send("mem");
    await server.send("snapshot", { path: after });
    const heap = (Number(memAfter.heapUsed) - Number(memBefore.heapUsed)) / n;
    const rss = (Number(memAfter.rss) - Number(memBefore.rss)) / n;
    return `${name}: ${n} connections, heapUsed ${heap.toFixed(0)} B/conn, RSS ${
      rss.toFixed(0)
    } B/conn\n${analyse(before, after, n, anchors)}`;
  } finally {
    await server.kill();
    for (const child of children) await child.kill();
  }
}

try {
  console.log(await measure("idle-ws-server", "idle-ws-clients", "bare-ws"));
  console.log();
  console.log(await measure("scale-harness", "scale-executors", "harness"));
} finally {
  if (!flags.keep) rmSync(dir, { recursive: true, force: true });
}
