import { nodePty } from "./node.ts";
import { tsCommand, ROOT } from "./tests/helpers/runtime-command.ts";
const [command, args] = tsCommand(ROOT + "harness/cli.node.ts", ["--port", "0"]);
let text = "";
const t0 = Date.now();
const pty = nodePty.spawn({ argv: [command, ...args], cwd: ROOT, env: { ...process.env, TERM: "xterm" } as any, cols: 80, rows: 24 }, {
  data: (b) => { text += new TextDecoder().decode(b); if (/listening/.test(text) && !text.includes("quit")) pty.write(new TextEncoder().encode("quit\r")); },
  exit: (e) => { console.log("EXIT", e, Date.now() - t0); },
});
setTimeout(() => { console.log("after 8s:", JSON.stringify(text), "pid alive?", (() => { try { process.kill(pty.pid, 0); return true; } catch { return false; } })()); pty.signal("SIGKILL"); }, 8000);
