/**
 * Publication as users receive it: `npm pack` (which builds dist/ first), a fresh project
 * outside the repository that installs the tarball with `--prefer-offline` (tarballs come from
 * the cache `npm ci` filled; a fresh cache lacks the registry's metadata, which the registry
 * answers), and in it every subpath of the exports (the same list as `deno.json`'s) imported
 * with plain `node` (compiled JavaScript, no tsx), an executor running against a harness with
 * `node` and with `bun`; `tsc` type-checks a consumer file against the shipped
 * declarations; the shipped `bma-executor` / `bma-harness` bins start. A Deno project imports
 * the same modules through the repository's `deno.json` exports (linked as the JSR package
 * `@bma/executor-sdk`) and runs the same exchange.
 *
 * Node only: the steps spawn every runtime themselves.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const bin = (name: string) => join(ROOT, "node_modules/.bin", name);
const onNode = !("Deno" in globalThis) && !("Bun" in globalThis);
const MANIFEST = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(command: string, args: string[], cwd: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, NO_COLOR: "1", npm_config_update_notifier: "false" },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stdout, stderr }));
  });
}

async function ok(command: string, args: string[], cwd: string): Promise<string> {
  const result = await run(command, args, cwd);
  assert.equal(
    result.code,
    0,
    `${command} ${args.join(" ")} exited ${result.code}\n${result.stdout}\n${result.stderr}`,
  );
  return result.stdout;
}

/** An executor against a harness: the module under test decides the import. */
const APP = (specifier: string) => `
import { ExecutorClient, Harness, ToolError } from "${specifier}";
const harness = new Harness({ insecureNoAuth: true });
const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
const client = new ExecutorClient({
  harnessUrl: server.url,
  executor: { name: "published", os: "linux", arch: "x64", version: "1.0.0" },
});
client.tools.bash.handle(({ command }) => {
  if (command === "fail") throw new ToolError("failed on purpose");
  return { stdout: "ran " + command, stderr: "", exit_code: 0 };
});
await client.start();
const executor = await harness.waitExecutor();
const session = await executor.assignSession({ session_id: "ses_1" });
await session.ready();
const result = await session.tools.bash.call({ command: "ls" });
const failed = await session.tools.bash.call({ command: "fail" });
await client.stop();
await harness.close();
console.log(JSON.stringify({
  protocol: executor.protocol,
  stdout: result.structured_content.stdout,
  is_error: failed.is_error,
}));
`;

const EXPECTED = { protocol: "bma.executor.v1.1", stdout: "ran ls", is_error: true };

/**
 * An embedded executor serving this machine through the exported `serveMachine`, and a harness
 * that uses it: bash, a file written and read, a process started and read, a terminal.
 */
const MACHINE_APP = (specifier: string) => `
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ExecutorClient, Harness, serveMachine } from "${specifier}";
const workdir = mkdtempSync(join(tmpdir(), "bma-machine-"));
const harness = new Harness({ insecureNoAuth: true });
const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
const client = new ExecutorClient({
  harnessUrl: server.url,
  executor: { name: "machine", os: "linux", arch: "x64", version: "1.0.0" },
});
serveMachine(client, { workdir, graceMs: 500 });
await client.start();
const executor = await harness.waitExecutor();
const session = await executor.assignSession({ session_id: "ses_machine" });
await session.ready();
const session_id = session.id;
const bash = await session.tools.bash.call({ command: "pwd" });
await session.tools.write.call({ path: "notes/a.txt", content: "written here" });
const read = await session.tools.read.call({ path: "notes/a.txt" });
await executor.request("process.start", {
  session_id,
  process_id: "p1",
  argv: ["sh", "-c", "cat notes/a.txt; exit 5"],
});
const waited = await executor.request("process.wait", { session_id, process_id: "p1" });
const out = await executor.request("process.read", { session_id, process_id: "p1", stream: "stdout" });
const terminal = await session.terminal({ argv: ["sh", "-c", "tty; stty size; exit 7"], cols: 120, rows: 40 });
let screen = "";
for await (const text of terminal) screen += text;
const exited = await terminal.exited;
await session.stop("done");
await client.stop();
await harness.close();
await server.close();
rmSync(workdir, { recursive: true, force: true });
console.log(JSON.stringify({
  capabilities: [executor.capabilities.process, executor.capabilities.terminal],
  bash: bash.structured_content.stdout.trim().endsWith(workdir.split("/").pop()),
  read: read.structured_content.content,
  process: [waited.exit_code, out.data],
  terminal: [screen.includes("/dev/pts/"), screen.includes("40 120"), exited],
}));
`;

const MACHINE_EXPECTED = {
  capabilities: [true, true],
  bash: true,
  read: "written here",
  process: [5, "written here"],
  terminal: [true, true, 7],
};

/** The consumer's result line. */
function outcome(stdout: string): unknown {
  return JSON.parse(stdout.trim().split("\n").pop()!);
}

describe("publication", { timeout: 240_000, skip: !onNode && "runs from Node only" }, () => {
  let dir = "";
  let app = "";
  let denoApp = "";
  let files: string[] = [];
  let tarball = "";

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "bma-publication-"));
    app = join(dir, "app");
    denoApp = join(dir, "deno-app");
    const packed = JSON.parse(
      await ok("npm", ["pack", "--json", "--pack-destination", dir], ROOT),
    )[0];
    files = packed.files.map((f: { path: string }) => f.path);
    tarball = join(dir, packed.filename);
  });

  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("packs compiled JavaScript, declarations and bins, and nothing of the repository's own", () => {
    for (const path of ["dist/mod.js", "dist/mod.d.ts", "dist/node.js", "dist/deno.js"]) {
      assert.ok(files.includes(path), path);
    }
    for (const path of ["dist/bun.js", "dist/workers.js", "dist/executor/cli.node.js"]) {
      assert.ok(files.includes(path), path);
    }
    assert.ok(files.includes("dist/harness/cli.node.js"));
    const foreign = files.filter((f) =>
      /^(tests|scripts|node_modules|examples|protocol|executor|harness|transport)\//.test(f) ||
      (f.endsWith(".ts") && !f.endsWith(".d.ts")) || f === "dist/bma-executor"
    );
    assert.deepEqual(foreign, []);
    // Every export and bin points at a shipped file.
    const manifest = MANIFEST as {
      exports: Record<string, { types: string; default: string }>;
      bin: Record<string, string>;
    };
    for (const entry of Object.values(manifest.exports)) {
      assert.ok(files.includes(entry.types.slice(2)), entry.types);
      assert.ok(files.includes(entry.default.slice(2)), entry.default);
    }
    for (const path of Object.values(manifest.bin)) assert.ok(files.includes(path.slice(2)), path);
  });

  it("installs into a fresh project outside the repository", async () => {
    mkdirSync(app);
    writeFileSync(
      join(app, "package.json"),
      JSON.stringify({
        name: "consumer",
        private: true,
        type: "module",
        dependencies: { "bma-executor-sdk": `file:${tarball}` },
      }),
    );
    await ok("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund"], app);
    const installed = JSON.parse(
      readFileSync(join(app, "node_modules/bma-executor-sdk/package.json"), "utf8"),
    );
    assert.equal(installed.version, MANIFEST.version);
    for (const dep of ["zod", "hono", "ws"]) {
      const pkg = JSON.parse(readFileSync(join(app, `node_modules/${dep}/package.json`), "utf8"));
      assert.equal(pkg.version, MANIFEST.dependencies[dep]);
    }
  });

  it("imports every subpath of package.json's exports (deno.json's list) with plain node", async () => {
    const jsr: Record<string, string> = JSON.parse(
      readFileSync(join(ROOT, "deno.json"), "utf8"),
    ).exports;
    const subpaths = Object.keys(MANIFEST.exports);
    assert.deepEqual([...subpaths].sort(), Object.keys(jsr).sort());
    // Each one from the installed package, by its public specifier: its export names.
    const specifiers = subpaths.map((s) => `bma-executor-sdk${s.slice(1)}`);
    writeFileSync(
      join(app, "subpaths.mjs"),
      `const out = {};
for (const specifier of ${JSON.stringify(specifiers)}) {
  out[specifier] = Object.keys(await import(specifier)).sort();
}
console.log(JSON.stringify(out));
`,
    );
    const names = outcome(await ok(process.execPath, ["subpaths.mjs"], app)) as Record<
      string,
      string[]
    >;
    // The same names as the source module JSR publishes under that subpath.
    for (const subpath of subpaths) {
      const source = await import(join(ROOT, jsr[subpath]));
      const specifier = `bma-executor-sdk${subpath.slice(1)}`;
      assert.ok(names[specifier].length > 0, specifier);
      assert.deepEqual(names[specifier], Object.keys(source).sort(), specifier);
    }
  });

  it("runs an executor against a harness with plain node", async () => {
    writeFileSync(join(app, "node-app.mjs"), APP("bma-executor-sdk/node"));
    const stdout = await ok(process.execPath, ["node-app.mjs"], app);
    assert.deepEqual(outcome(stdout), EXPECTED);
  });

  it("runs an executor against a harness with bun", async () => {
    writeFileSync(join(app, "bun-app.mjs"), APP("bma-executor-sdk/bun"));
    const stdout = await ok(bin("bun"), ["bun-app.mjs"], app);
    assert.deepEqual(outcome(stdout), EXPECTED);
  });

  it("serves this machine through the exported serveMachine on node, bun and deno", async () => {
    // node and bun run the installed tarball; its dependencies include the PTY library.
    for (const [runtime, specifier] of [["node", "node"], ["bun", "bun"]] as const) {
      const file = join(app, `machine-${runtime}.mjs`);
      writeFileSync(file, MACHINE_APP(`bma-executor-sdk/${specifier}`));
      const command = runtime === "node" ? process.execPath : bin("bun");
      const stdout = await ok(command, [file], app);
      assert.deepEqual(outcome(stdout), MACHINE_EXPECTED, runtime);
    }
    // Deno: the repository linked as the JSR package, with the npm dependencies it declares.
    const denoMachine = join(dir, "deno-machine");
    mkdirSync(denoMachine);
    writeFileSync(
      join(denoMachine, "deno.json"),
      JSON.stringify({
        nodeModulesDir: "manual",
        links: [ROOT],
        imports: { "@bma/executor-sdk/": "jsr:/@bma/executor-sdk@^0.1.0/" },
      }),
    );
    writeFileSync(
      join(denoMachine, "package.json"),
      JSON.stringify({
        name: "deno-machine",
        private: true,
        type: "module",
        dependencies: MANIFEST.dependencies,
      }),
    );
    await ok("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund"], denoMachine);
    writeFileSync(join(denoMachine, "app.ts"), MACHINE_APP("@bma/executor-sdk/deno"));
    const stdout = await ok(bin("deno"), ["run", "-A", "--quiet", "app.ts"], denoMachine);
    assert.deepEqual(outcome(stdout), MACHINE_EXPECTED, "deno");
  });

  it("type-checks a consumer against the shipped declarations", async () => {
    writeFileSync(
      join(app, "check.ts"),
      `import { ExecutorClient, Harness, type HarnessSessionState } from "bma-executor-sdk/node";
import { Peer, type ExecutorSessionState } from "bma-executor-sdk";
import type { ExecutorLink } from "bma-executor-sdk/harness";
import { type AgentServer, serveAgent } from "bma-executor-sdk/agent";
const state: HarnessSessionState = "ready";
const mine: ExecutorSessionState | undefined = undefined;
const link: ExecutorLink | undefined = undefined;
const agent: AgentServer | undefined = undefined;
void [state, mine, link, agent, ExecutorClient, Harness, Peer, serveAgent];
`,
    );
    writeFileSync(
      join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          module: "nodenext",
          moduleResolution: "nodenext",
          target: "es2022",
          strict: true,
          noEmit: true,
          skipLibCheck: false,
        },
        files: ["check.ts"],
      }),
    );
    await ok(bin("tsc"), ["-p", "tsconfig.json"], app);
    // The check can fail: a wrong type in the same file is reported.
    writeFileSync(
      join(app, "check.ts"),
      `import type { HarnessSessionState } from "bma-executor-sdk";
const state: HarnessSessionState = "no such state";
void state;
`,
    );
    const bad = await run(bin("tsc"), ["-p", "tsconfig.json"], app);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stdout, /no such state/);
  });

  it("ships bma-executor and bma-harness as runnable bins", async () => {
    for (const name of ["bma-executor", "bma-harness"]) {
      const stdout = await ok(join(app, "node_modules/.bin", name), ["--help"], app);
      assert.match(stdout, new RegExp(`^${name}`, "m"));
    }
  });

  it("a Deno project imports the same modules through deno.json's exports", async () => {
    mkdirSync(denoApp);
    // The repository linked as the JSR package: specifiers resolve through its deno.json exports.
    writeFileSync(
      join(denoApp, "deno.json"),
      JSON.stringify({
        nodeModulesDir: "manual",
        links: [ROOT],
        imports: { "@bma/executor-sdk/": "jsr:/@bma/executor-sdk@^0.1.0/" },
      }),
    );
    // The package's npm dependencies, from the npm cache, as a Deno project would install them.
    const dependencies = Object.fromEntries(
      ["zod", "hono", "ws"].map((dep) => [dep, MANIFEST.dependencies[dep]]),
    );
    writeFileSync(
      join(denoApp, "package.json"),
      JSON.stringify({ name: "deno-consumer", private: true, type: "module", dependencies }),
    );
    await ok("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund"], denoApp);
    writeFileSync(join(denoApp, "app.ts"), APP("@bma/executor-sdk/deno"));
    const stdout = await ok(bin("deno"), ["run", "-A", "--quiet", "app.ts"], denoApp);
    assert.deepEqual(outcome(stdout), EXPECTED);
  });
});
