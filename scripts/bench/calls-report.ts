/**
 * The report of suites 1 and 2 (tool-call round trips, durable events): their tables, the
 * latency per runtime, the --compare columns, and their targets.
 */
import type { CallResults } from "./calls.ts";
import { HEAP_EVENTS, HEAP_EVENTS_LONG, PERCENTILES, SDK_CASES } from "./calls.ts";
import { toolCallFrame } from "./common.ts";
import type { Runtime } from "./procs.ts";
import { int, median, rate, type Report, type Row, table, verdict } from "./report.ts";

/** The cases of the latency tables, in their order, with their labels. */
const LATENCY_CASES: readonly (readonly [string, string])[] = [
  ["ws-echo", "raw WebSocket echo (TCP)"],
  ["tool-ws", "tool call, WebSocket (TCP)"],
  ["mcp-ws", "MCP tools/call, WebSocket"],
  ["unix-echo", "raw WebSocket echo (Unix socket)"],
  ["tool-unix", "tool call, WebSocket (Unix socket)"],
  ["ndjson-echo", "raw NDJSON echo (Unix socket)"],
  ["tool-memory", "tool call, in memory"],
  ["mcp-memory", "MCP tools/call, in memory"],
  ["events", "durable event, no store"],
  ["events-sqlite", "durable event, SQLite"],
  ["events-sqlite-full", "durable event, SQLite FULL"],
  ["events-postgres", "durable event, PostgreSQL"],
];

/** Prints suites 1 and 2 from their results on each runtime (`cols`, in column order). */
export function printCallSuites(
  report: Report,
  all: Partial<Record<Runtime, CallResults>>,
  options: { cols: Runtime[]; compare?: string; cpu?: number },
): void {
  const { print, check } = report;
  const { cols, compare, cpu } = options;
  // The PostgreSQL case runs only where the bench found PostgreSQL's binaries (main.ts).
  const hasPostgres = cols.some((r) => all[r]?.["events-postgres"] !== undefined);
  const get = (r: Runtime, id: string, key: string) => all[r]?.[id]?.[key];
  const med = (r: Runtime, id: string, key: string) => {
    const values = get(r, id, key);
    return values?.length ? median(values) : undefined;
  };
  const ratio = (r: Runtime, a: [string, string], b: [string, string]) => {
    const x = med(r, ...a);
    const y = med(r, ...b);
    return x !== undefined && y ? x / y : undefined;
  };
  const figure = (label: string, id: string, key: string): Row => [
    label,
    ...cols.map((r) => rate(get(r, id, key))),
  ];
  const ratioRow = (
    label: string,
    a: [string, string],
    b: [string, string],
    limit?: number,
  ): Row => [
    label,
    ...cols.map((r) => {
      const v = ratio(r, a, b);
      if (limit !== undefined) return verdict(v, limit, true);
      return v === undefined ? "–" : v.toFixed(2);
    }),
  ];
  print();
  print(
    `Pinning: ${
      cpu === undefined
        ? "none (taskset missing or --no-pin): sequential figures depend on core placement"
        : `every process of suites 1 and 2 runs under \`taskset -c ${cpu}\` — both ends of each case, candidate and baseline alike`
    }.`,
  );
  print(
    "Node runs an esbuild bundle of the sources (as the npm package runs); Deno and Bun run the .ts sources.",
  );
  print(
    `Every tool call's tool.call frame is ${toolCallFrame().length} bytes; the raw echoes send frames of exactly that size.`,
  );
  print();
  print(
    "1. Tool-call round trips per second (harness callTool → executor handler → result at the harness)",
  );
  const rows: Row[] = [
    ["WebSocket over TCP 127.0.0.1"],
    figure("  raw echo, 1 in flight (round trips)", "ws-echo", "1"),
    figure("  tool call, 1 in flight", "tool-ws", "1"),
    ratioRow("    tool call / raw echo (target ≥ 0.40)", ["tool-ws", "1"], ["ws-echo", "1"], 0.4),
    figure("  raw echo, 64 in flight (replies)", "ws-echo", "64"),
    figure("  tool call, 64 in flight", "tool-ws", "64"),
    ratioRow(
      "    tool call / raw echo (target ≥ 0.40)",
      ["tool-ws", "64"],
      ["ws-echo", "64"],
      0.4,
    ),
    ["WebSocket over a Unix socket"],
    figure("  raw echo, 1 in flight", "unix-echo", "1"),
    figure("  tool call, 1 in flight", "tool-unix", "1"),
    ratioRow("    tool call / raw echo", ["tool-unix", "1"], ["unix-echo", "1"]),
    figure("  raw echo, 64 in flight", "unix-echo", "64"),
    figure("  tool call, 64 in flight", "tool-unix", "64"),
    ratioRow("    tool call / raw echo", ["tool-unix", "64"], ["unix-echo", "64"]),
    ["NDJSON on a bare Unix socket (reference)"],
    figure("  raw echo, 1 in flight", "ndjson-echo", "1"),
    figure("  raw echo, 64 in flight", "ndjson-echo", "64"),
    ratioRow("    our Unix tool call, 64 in flight / this", ["tool-unix", "64"], [
      "ndjson-echo",
      "64",
    ]),
    ["In memory (harness and executor in one process)"],
    figure("  tool call, 1 in flight", "tool-memory", "1"),
    figure("  tool call, 64 in flight", "tool-memory", "64"),
    figure("  JSON stringify+parse of a request/response pair", "tool-memory", "json"),
  ];
  if (cols.includes("node")) {
    rows.push(
      ["MCP TypeScript SDK tools/call (Node)"],
      figure("  in memory, 1 in flight", "mcp-memory", "1"),
      figure("  in memory, 64 in flight", "mcp-memory", "64"),
      ratioRow(
        "    our in-memory tool call / MCP, 1 in flight (target ≥ 1.5)",
        [
          "tool-memory",
          "1",
        ],
        ["mcp-memory", "1"],
        1.5,
      ),
      ratioRow(
        "    our in-memory tool call / MCP, 64 in flight (target ≥ 1.5)",
        [
          "tool-memory",
          "64",
        ],
        ["mcp-memory", "64"],
        1.5,
      ),
      figure("  WebSocket, 1 in flight", "mcp-ws", "1"),
      figure("  WebSocket, 64 in flight", "mcp-ws", "64"),
      ratioRow("    our WebSocket tool call / MCP, 1 in flight", ["tool-ws", "1"], ["mcp-ws", "1"]),
      ratioRow(
        "    our WebSocket tool call / MCP, 64 in flight (target ≥ 2)",
        [
          "tool-ws",
          "64",
        ],
        ["mcp-ws", "64"],
        2,
      ),
    );
  }
  print(table(["", ...cols], rows));
  print();
  print(
    "2. Durable session events per second (executor emits session.event, harness acknowledges; WebSocket)",
  );
  print(table(["", ...cols], [
    figure("  1 in flight (eventWindow 1, the default)", "events", "1"),
    ratioRow(
      "    / raw WebSocket echo, 1 in flight (target ≥ 0.75)",
      ["events", "1"],
      ["ws-echo", "1"],
      0.75,
    ),
    ...(cols.includes("node")
      ? [ratioRow("    / MCP SDK tools/call over WebSocket, 1 in flight", ["events", "1"], [
        "mcp-ws",
        "1",
      ])]
      : []),
    figure("  windowed (eventWindow 64, 64 emitted at a time)", "events", "64"),
    ratioRow("    / raw WebSocket echo, 64 in flight", ["events", "64"], ["ws-echo", "64"]),
    figure(
      "  SQLite store, 1 in flight (each event written before its ACK; synchronous NORMAL)",
      "events-sqlite",
      "1",
    ),
    ratioRow(
      "    / no store, 1 in flight (target ≥ 0.5)",
      ["events-sqlite", "1"],
      ["events", "1"],
      0.5,
    ),
    figure("  SQLite store, windowed (64 in flight)", "events-sqlite", "64"),
    ratioRow(
      "    / no store, 64 in flight (target ≥ 0.8)",
      ["events-sqlite", "64"],
      ["events", "64"],
      0.8,
    ),
    figure("  SQLite store, synchronous FULL, 1 in flight", "events-sqlite-full", "1"),
    ratioRow("    / no store, 1 in flight", ["events-sqlite-full", "1"], ["events", "1"]),
    figure("  SQLite store, synchronous FULL, windowed (64 in flight)", "events-sqlite-full", "64"),
    ratioRow("    / no store, 64 in flight", ["events-sqlite-full", "64"], ["events", "64"]),
    ...(hasPostgres
      ? [
        figure(
          "  PostgreSQL store, 1 in flight (each event committed before its ACK)",
          "events-postgres",
          "1",
        ),
        ratioRow("    / no store, 1 in flight", ["events-postgres", "1"], ["events", "1"]),
        figure(
          "  PostgreSQL store, windowed (64 in flight, group commit)",
          "events-postgres",
          "64",
        ),
        ratioRow(
          "    / no store, 64 in flight (target ≥ 0.5)",
          ["events-postgres", "64"],
          ["events", "64"],
          0.5,
        ),
      ]
      : []),
    [
      `  harness heap per event its log keeps (${int(HEAP_EVENTS)} small events)`,
      ...cols.map((r) => {
        const v = med(r, "event-heap", "perEvent");
        return v === undefined ? "–" : `${int(v)} B`;
      }),
    ],
    [
      `  harness heap growth after ${int(HEAP_EVENTS_LONG)} events (events kept)`,
      ...cols.map((r) => {
        const v = med(r, "event-heap", "longGrowth");
        const kept = med(r, "event-heap", "keptLong");
        return v === undefined ? "–" : `${(v / 1024 / 1024).toFixed(1)} MiB (${int(kept ?? 0)})`;
      }),
    ],
  ]));
  // Latency: one table per runtime, every case measured at 1 and 64 in flight.
  const micros = (value: number | undefined) =>
    value === undefined ? "–" : value < 100 ? value.toFixed(1) : int(value);
  for (const r of cols) {
    const latencyRows: Row[] = [];
    for (const [id, label] of LATENCY_CASES) {
      for (const twin of compare ? [id, `${id}@base`] : [id]) {
        for (const key of ["1", "64"]) {
          if (!get(r, twin, `${key}:p50`)?.length) continue;
          latencyRows.push([
            `  ${label}${twin === id ? "" : " (--compare)"}, ${key} in flight`,
            rate(get(r, twin, key)),
            ...PERCENTILES.map(([name]) => micros(med(r, twin, `${key}:${name}`))),
          ]);
        }
      }
    }
    if (!latencyRows.length) continue;
    print();
    print(
      `Latency of one operation on ${r}, µs (from just before it starts to its completion at the caller; median over runs of each run's percentile)`,
    );
    print(table(["", "per second", ...PERCENTILES.map(([name]) => `${name} µs`)], latencyRows));
  }
  if (compare) {
    print();
    print(`Against --compare ${compare} (its SDK cases took turns with these, same pinning)`);
    const compareRows: Row[] = [];
    for (const id of SDK_CASES) {
      for (const key of ["1", "64", "json"]) {
        if (!get(cols[0], id, key) && !cols.some((r) => get(r, id, key))) continue;
        compareRows.push(
          [
            `  ${id}, ${key === "json" ? "JSON pair" : `${key} in flight`}: this`,
            ...cols.map((r) => rate(get(r, id, key))),
          ],
          [`    --compare`, ...cols.map((r) => rate(get(r, `${id}@base`, key)))],
          ratioRow("    this / --compare", [id, key], [`${id}@base`, key]),
        );
      }
    }
    print(table(["", ...cols], compareRows));
  }
  const per = (a: [string, string], b: [string, string]) =>
    cols.map((r) => [r, ratio(r, a, b)] as [string, number | undefined]);
  check(
    "tool call over WebSocket, 1 in flight ≥ 0.40× raw echo",
    per(["tool-ws", "1"], ["ws-echo", "1"]),
    0.4,
    true,
  );
  check(
    "tool call over WebSocket, 64 in flight ≥ 0.40× raw echo",
    per(["tool-ws", "64"], ["ws-echo", "64"]),
    0.4,
    true,
  );
  check(
    "one durable event, 1 in flight ≥ 0.75× a raw WebSocket echo, 1 in flight",
    per(["events", "1"], ["ws-echo", "1"]),
    0.75,
    true,
  );
  check(
    "durable events with the SQLite store ≥ 0.5× no store, 1 in flight",
    per(["events-sqlite", "1"], ["events", "1"]),
    0.5,
    true,
  );
  check(
    "durable events with the SQLite store ≥ 0.8× no store, 64 in flight",
    per(["events-sqlite", "64"], ["events", "64"]),
    0.8,
    true,
  );
  if (hasPostgres) {
    check(
      "durable events with the PostgreSQL store ≥ 0.5× no store, 64 in flight",
      per(["events-postgres", "64"], ["events", "64"]),
      0.5,
      true,
    );
  }
  if (cols.includes("node")) {
    check(
      "in-memory tool calls on Node ≥ 1.5× MCP in memory (1 / 64 in flight)",
      [
        ["1", ratio("node", ["tool-memory", "1"], ["mcp-memory", "1"])],
        ["64", ratio("node", ["tool-memory", "64"], ["mcp-memory", "64"])],
      ],
      1.5,
      true,
    );
    check(
      "tool calls over WebSocket on Node ≥ 2× MCP over WebSocket, 64 in flight",
      [["64", ratio("node", ["tool-ws", "64"], ["mcp-ws", "64"])]],
      2,
      true,
    );
  }
}
