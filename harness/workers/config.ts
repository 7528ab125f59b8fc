/**
 * The edge harness's options ({@linkcode HarnessObjectOptions}), and how the Worker's
 * environment (`wrangler.toml` vars and secrets) sets them.
 */
import type { BrainApiOptions } from "../../http/brain-api/brain-api.ts";
import type { Harness } from "../harness.ts";
import type { HarnessOptions } from "../harness-options.ts";
import { type HarnessEnv, harnessOptionsFromVariables } from "../../http/env-options.ts";

export type { HarnessEnv };

/** Options of a {@linkcode HarnessObject}: those of its `Harness`, and its brains. */
export interface HarnessObjectOptions extends
  Omit<
    HarnessOptions,
    "store" | "deadlines" | "onConnectionChange" | "recoveredLeases" | "server" | "dial"
  > {
  /**
   * A brain inside the object: called with the harness each time the object is constructed
   * (after an eviction too — the harness then holds what the store kept: `harness.session(id)`
   * is live, a `callTool` repeated with its `tool_call_id` resolves with the stored result).
   */
  brain?: (harness: Harness) => void;
  /**
   * The HTTP API for outside brains (`brainApi` of `harness/brain-api.ts`), served under
   * `/v1/harness/<object name>/` (the Worker routes it to the object). Default: none (404).
   */
  brainApi?: Omit<BrainApiOptions, "basePath">;
}

/**
 * The options the environment describes ({@linkcode harnessOptionsFromVariables}): the token
 * endpoint and its JWT check (`BMA_JWT_SECRET`, `BMA_CREDENTIALS`, ...), heartbeat, frame and
 * request limits, `insecureNoAuth`, the brain API behind `BMA_BRAIN_TOKEN` and the metrics behind
 * `BMA_METRICS_TOKEN`. Throws on malformed credentials.
 */
export function harnessOptionsFromEnv(env: HarnessEnv): HarnessObjectOptions {
  return harnessOptionsFromVariables(env);
}
