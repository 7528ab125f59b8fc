import { nodePty } from "./node.ts";
const seq = JSON.parse(process.env.SEQ!);
let text = "";
const t0 = Date.now();
const pty = nodePty.spawn({ argv: [process.cwd() + "/node_modules/.bin/deno", "run", "-A", "/tmp/ptyx/raw2.mjs"], cwd: "/tmp", env: { ...process.env, TERM: "xterm" } as any, cols: 80, rows: 24 }, {
  data: (b) => { text += new TextDecoder().decode(b); },
  exit: (e) => { console.log("EXIT", e, Date.now() - t0); },
});
const until = async (s: string) => { while (!text.includes(s)) await new Promise(r => setTimeout(r, 10)); };
await until("READY");
for (const [key, want] of seq) { pty.write(new TextEncoder().encode(key)); await until(want); }
setTimeout(() => { console.log("after 3s:", JSON.stringify(text)); pty.signal("SIGKILL"); process.exit(0); }, 3000);
