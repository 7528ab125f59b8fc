/**
 * Runs the edge harness locally in one command: bundles examples/workers/worker.ts as a deploy
 * would, and serves it in real workerd (Miniflare) with its Durable Object and bindings, until
 * Ctrl-C.
 *
 *   npm run dev:workers [-- --port 8787] [-- --persist .bma-workers]
 *
 * The bindings come from the environment (`BMA_JWT_SECRET`, `BMA_CREDENTIALS`,
 * `BMA_BRAIN_TOKEN`, `BMA_HEARTBEAT_INTERVAL_MS`, ...); what is missing gets a development
 * value made up for this run: a JWT secret, and, printed once, one environment credential
 * (`env_dev` with a random key) and a brain token. `--persist <dir>` keeps the Durable Object's
 * storage across runs.
 */
import { Miniflare } from "miniflare";
import { buildWorkersBundle } from "./bench/workers-bundle.ts";

function flag(name: string): string | undefined {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? process.argv[at + 1] : undefined;
}

function random(bytes: number): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("base64url");
}

const made: Record<string, string> = {};
const bindings: Record<string, string> = {};
for (const [name, value] of Object.entries(process.env)) {
  if (name.startsWith("BMA_") && value !== undefined) bindings[name] = value;
}
// Signs the executors' tokens; nobody needs to know it, so it is not printed.
bindings.BMA_JWT_SECRET ??= random(32);
if (!bindings.BMA_CREDENTIALS) {
  const key = `ek_${random(18)}`;
  bindings.BMA_CREDENTIALS = JSON.stringify([{ environmentId: "env_dev", environmentKey: key }]);
  made["environment env_dev, key"] = key;
}
bindings.BMA_BRAIN_TOKEN ??= made.BMA_BRAIN_TOKEN = random(24);

const bundle = await buildWorkersBundle({ minify: false });
const persist = flag("persist");
const mf = new Miniflare({
  modules: true,
  script: bundle.code,
  compatibilityDate: "2025-09-01",
  durableObjects: { BMA_HARNESS: { className: "HarnessObject", useSQLite: true } },
  bindings,
  host: "127.0.0.1",
  port: Number(flag("port") ?? 8787),
  ...(persist ? { durableObjectsPersist: persist } : {}),
});
const url = (await mf.ready).href.replace(/\/$/, "");
console.log(`edge harness in workerd at ${url}`);
console.log(
  `  executors: baseUrl ${url} (token endpoint), connect ${
    url.replace(/^http/, "ws")
  }/v1/executors/connect`,
);
console.log(`  brain API: ${url}/v1/harness/environments/<environment_id>/...`);
for (const [name, value] of Object.entries(made)) {
  console.log(`  made up for this run: ${name} = ${value}`);
}
console.log("Ctrl-C stops it.");

const stop = async () => {
  await mf.dispose();
  process.exit(0);
};
process.once("SIGINT", stop);
process.once("SIGTERM", stop);
