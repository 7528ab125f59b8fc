/**
 * The edge harness as a Worker: deploy with `npx wrangler deploy` from this folder (see
 * wrangler.toml). In your own project, import from "bma-executor-sdk/workers" instead of the
 * relative path used here so that the example builds from the repository.
 */
import { createHarnessWorker, HarnessObject } from "../../harness/workers/mod.ts";

// The Durable Object class named in wrangler.toml must be exported by the Worker's module.
export { HarnessObject };

export default createHarnessWorker();
