/**
 * Publication as users receive it: `npm pack` (which builds dist/ first; once per test run, the
 * tarball the newcomers' tests install too: `packTarball`), a fresh project
 * outside the repository that installs the tarball with `--prefer-offline` (tarballs come from
 * the cache `npm ci` filled; a fresh cache lacks the registry's metadata, which the registry
 * answers), and in it every subpath of the exports (the same list as `deno.json`'s) imported
 * with plain `node` (compiled JavaScript, no tsx), an executor running against a harness with
 * `node` and with `bun`; `tsc` type-checks a consumer file against the shipped
 * declarations; the shipped `bma-executor` / `bma-harness` bins start. A Deno project imports
 * the same modules through the repository's `deno.json` exports (linked as the JSR package
 * `@bma/executor-sdk`) and runs the same exchange. Both packages ship the wire contract, its
 * HTTP notes and examples, the Workers harness README and the CHANGELOG; the npm package also
 * ships docs/ (every relative link of its Markdown files resolves in the tarball); the
 * dependencies are caret ranges and zod a peer dependency the fresh install resolves to one copy.
 *
 * Node only: the steps spawn every runtime themselves.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { packTarball } from "../newcomer/fresh-project.ts";
import { brokenLinks } from "./links.ts";

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

/** The dependencies the package needs at run time: its own, and zod, a peer dependency. */
const RUNTIME_DEPENDENCIES: Record<string, string> = {
  hono: MANIFEST.dependencies.hono,
  "modern-tar": MANIFEST.dependencies["modern-tar"],
  picomatch: MANIFEST.dependencies.picomatch,
  re2js: MANIFEST.dependencies.re2js,
  ws: MANIFEST.dependencies.ws,
  zod: MANIFEST.peerDependencies.zod,
};

/** The PTY library of terminals on Node and Deno, at the exact version verified. */
const PTY_VERSION: string = MANIFEST.dependencies["@lydell/node-pty"];

/** The files beside the code that both packages ship. */
const SHIPPED_DOCS = [
  "protocol/contract/openrpc.json",
  "protocol/contract/http.md",
  "protocol/contract/README.md",
  "protocol/contract/examples/tool.call.json",
  "harness/workers/README.md",
  "CHANGELOG.md",
  "README.md",
  "LICENSE",
];

/** The documents the README links to, which the npm package ships beside it. */
const NPM_DOCS = [
  "docs/benchmarks.md",
  "docs/brain-api.md",
  "docs/cli.md",
  "docs/machine.md",
  "docs/security.md",
  "docs/store.md",
  "docs/inspector.png",
  "docs/inspector-narrow.png",
];

/** Whether `version` satisfies the caret range `range` (`^1.2.3`, `^0.2.3`). */
function satisfiesCaret(version: string, range: string): boolean {
  const parse = (text: string) => text.split(".").map(Number);
  assert.match(range, /^\^\d+\.\d+\.\d+$/, `${range} is a caret range`);
  assert.match(version, /^\d+\.\d+\.\d+$/, `${version} is a release`);
  const [low, have] = [parse(range.slice(1)), parse(version)];
  // ^X.Y.Z allows changes that do not modify the left-most non-zero part.
  const fixed = low[0] > 0 ? 1 : low[1] > 0 ? 2 : 3;
  for (let i = 0; i < fixed; i++) if (have[i] !== low[i]) return false;
  for (let i = 0; i < 3; i++) if (have[i] !== low[i]) return have[i] > low[i];
  return true;
}

/** The consumer's result line. */
function outcome(stdout: string): unknown {
  return JSON.parse(stdout.trim().split("\n").pop()!);
}

describe("publication", { timeout: 240_000, skip: !onNode && "runs from Node only" }, () => {
  let dir = "";
  let app = "";
  let denoApp = "";
  let files: readonly string[] = [];
  let tarball = "";

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "bma-publication-"));
    app = join(dir, "app");
    denoApp = join(dir, "deno-app");
    // `npm pack` with its `prepack` build, shared with the newcomers' tests (one build a run).
    ({ tarball, files } = await packTarball(dir));
  });

  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("packs compiled JavaScript, declarations and bins, and nothing of the repository's own", () => {
    for (const path of ["dist/mod.js", "dist/mod.d.ts", "dist/node.js", "dist/deno.js"]) {
      assert.ok(files.includes(path), path);
    }
    for (const path of ["dist/bun.js", "dist/workers.js", "dist/cli/executor.node.js"]) {
      assert.ok(files.includes(path), path);
    }
    assert.ok(files.includes("dist/cli/harness.node.js"));
    const foreign = files.filter((f) =>
      (/^(tests|scripts|node_modules|examples|protocol|executor|harness|transport|cli)\//.test(f) &&
        !/^protocol\/contract\/[^/]+\.(json|md)$|^protocol\/contract\/examples\/[^/]+\.json$/.test(
          f,
        ) &&
        f !== "harness/workers/README.md") ||
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
    // Caret ranges, each satisfied by what the fresh install chose; zod, a peer dependency, is
    // installed beside the package (one copy: the user's zod is the SDK's zod).
    assert.deepEqual(installed.dependencies, {
      "@lydell/node-pty": PTY_VERSION,
      hono: RUNTIME_DEPENDENCIES.hono,
      "modern-tar": RUNTIME_DEPENDENCIES["modern-tar"],
      picomatch: RUNTIME_DEPENDENCIES.picomatch,
      re2js: RUNTIME_DEPENDENCIES.re2js,
      ws: RUNTIME_DEPENDENCIES.ws,
    });
    // The PTY library is pinned: its prebuilt binaries are what was verified here.
    const pty = JSON.parse(
      readFileSync(join(app, "node_modules/@lydell/node-pty/package.json"), "utf8"),
    );
    assert.equal(pty.version, PTY_VERSION);
    assert.equal(installed.peerDependencies.zod, RUNTIME_DEPENDENCIES.zod);
    assert.equal(installed.dependencies.zod, undefined);
    for (const [dep, range] of Object.entries(RUNTIME_DEPENDENCIES)) {
      const pkg = JSON.parse(readFileSync(join(app, `node_modules/${dep}/package.json`), "utf8"));
      assert.ok(satisfiesCaret(pkg.version, range), `${dep} ${pkg.version} satisfies ${range}`);
    }
    assert.equal(existsSync(join(app, "node_modules/bma-executor-sdk/node_modules/zod")), false);
    // The range check can fail.
    assert.equal(satisfiesCaret("5.0.0", "^4.6.7"), false);
    assert.equal(satisfiesCaret("4.6.6", "^4.6.7"), false);
    assert.equal(satisfiesCaret("0.6.0", "^0.5.29"), false);
    assert.equal(satisfiesCaret("4.13.20", "^4.13.19"), true);
  });

  it("ships the contract, the Workers harness README and the CHANGELOG in the npm package", () => {
    for (const path of SHIPPED_DOCS) assert.ok(files.includes(path), `${path} is packed`);
    const pkg = join(app, "node_modules/bma-executor-sdk");
    for (const path of SHIPPED_DOCS) assert.ok(existsSync(join(pkg, path)), `${path} is installed`);
    // The installed contract is the repository's, byte for byte, and a usable OpenRPC document.
    const contract = readFileSync(join(pkg, "protocol/contract/openrpc.json"), "utf8");
    assert.equal(contract, readFileSync(join(ROOT, "protocol/contract/openrpc.json"), "utf8"));
    const openrpc = JSON.parse(contract);
    assert.ok(
      openrpc.openrpc && openrpc.methods.some((m: { name: string }) => m.name === "tool.call"),
    );
    const changelog = readFileSync(join(pkg, "CHANGELOG.md"), "utf8");
    assert.match(changelog, /^## \[Unreleased\]$/m);
    assert.match(
      changelog,
      new RegExp(
        `^## \\[${MANIFEST.version.replaceAll(".", "\\.")}\\] - \\d{4}-\\d{2}-\\d{2}$`,
        "m",
      ),
    );
    // The README links the Workers harness README, which ships beside it.
    assert.match(readFileSync(join(pkg, "README.md"), "utf8"), /\(harness\/workers\/README\.md\)/);
  });

  it("ships what its README and docs link to: every relative link resolves in the package", () => {
    // The documents a user reads beside the README, and the image it shows.
    for (const path of NPM_DOCS) assert.ok(files.includes(path), `${path} is packed`);
    const pkg = join(app, "node_modules/bma-executor-sdk");
    const markdown = files.filter((path) => path.endsWith(".md"));
    assert.ok(markdown.includes("README.md") && markdown.length >= NPM_DOCS.length);
    // Every Markdown file of the tarball's list, read from the installed package.
    const broken = brokenLinks(files, (path) => readFileSync(join(pkg, path), "utf8"));
    assert.deepEqual(broken, [], broken.map((b) => `${b.file}: ${b.target}: ${b.why}`).join("\n"));
    // The check finds a link to a file the package lacks, and an anchor no heading has.
    const docs: Record<string, string> = {
      "README.md":
        "[a](docs/gone.md) [b](docs/store.md#no-such-heading) [c](#install)\n# Install\n",
      "docs/store.md": "# The store\n",
    };
    assert.deepEqual(
      brokenLinks(Object.keys(docs), (path) => docs[path]).map((b) => b.target),
      ["docs/gone.md", "docs/store.md#no-such-heading"],
    );
  });

  it("ships the same documents on JSR (deno publish --dry-run's file list)", async () => {
    const result = await run(
      bin("deno"),
      ["publish", "--dry-run", "--allow-dirty", "--no-check"],
      ROOT,
    );
    assert.equal(result.code, 0, result.stderr);
    // Deno prints the file list on stderr.
    const output = result.stderr;
    const listed = new Set(
      [...output.matchAll(/^\s+file:\/\/(\S+) \(/gm)].map(([, path]) => path.slice(ROOT.length)),
    );
    for (const path of SHIPPED_DOCS) assert.ok(listed.has(path), `${path} is published on JSR`);
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
        dependencies: { ...RUNTIME_DEPENDENCIES, "@lydell/node-pty": PTY_VERSION },
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
import type { DialedExecutorLink } from "bma-executor-sdk/harness";
import { type AgentServer, serveAgent } from "bma-executor-sdk/agent";
const state: HarnessSessionState = "ready";
const mine: ExecutorSessionState | undefined = undefined;
const link: DialedExecutorLink | undefined = undefined;
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
    const dependencies = RUNTIME_DEPENDENCIES;
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
