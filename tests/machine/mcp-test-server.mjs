/**
 * A raw stdio MCP-style JSON-RPC server for the machine tests, run as a real child process by
 * the executor's MCP relay. One JSON message per line on stdin; answers on stdout.
 *
 * Methods:
 * - `dump`: its environment (`process.env` and `/proc/self/environ`), pid and working directory;
 * - `flood` `{ bytes }`: writes that many bytes without a newline (a server gone wrong);
 * - `many` `{ count }`: `count` answers in one write, the last one split across two writes;
 * - `exit`: exits at once.
 *
 * Plain JavaScript, so every runtime starts it as is.
 */
import { readFileSync } from "node:fs";
import process from "node:process";

const send = (text) => new Promise((resolve) => process.stdout.write(text, () => resolve()));
const answer = (id, result) => JSON.stringify({ jsonrpc: "2.0", id, result }) + "\n";

async function handle(message) {
  const { id, method, params } = message;
  if (method === "dump") {
    let environ = null;
    try {
      environ = readFileSync("/proc/self/environ", "latin1");
    } catch { /* not Linux */ }
    await send(
      answer(id, { env: { ...process.env }, environ, pid: process.pid, cwd: process.cwd() }),
    );
  } else if (method === "flood") {
    const chunk = "x".repeat(1024 * 1024);
    for (let left = params.bytes; left > 0; left -= chunk.length) {
      await send(left >= chunk.length ? chunk : chunk.slice(0, left));
    }
  } else if (method === "many") {
    let text = "";
    for (let i = 0; i < params.count; i++) text += answer(id, { index: i });
    const cut = text.length - 10;
    await send(text.slice(0, cut));
    await send(text.slice(cut));
  } else if (method === "big") {
    await send(answer(id, { pad: "x".repeat(params.bytes) }));
  } else if (method === "exit") {
    process.exit(0);
  } else if (id !== undefined) {
    await send(
      JSON.stringify({ jsonrpc: "2.0", id, error: { code: -32601, message: method } }) + "\n",
    );
  }
}

let buffered = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buffered += chunk;
  let newline;
  while ((newline = buffered.indexOf("\n")) >= 0) {
    const line = buffered.slice(0, newline);
    buffered = buffered.slice(newline + 1);
    if (line.trim()) handle(JSON.parse(line));
  }
});
process.stdin.on("end", () => process.exit(0));
