/**
 * What every part of the agent platform reads: its options, and the harness it is attached to
 * (none until `new Harness({ agent: platform })` attaches it), with the clock and logger taken
 * from that harness.
 */
import type { AgentExtensionHost } from "../../harness/extension.ts";
import { type Clock, systemClock } from "../../protocol/clock.ts";
import { type Logger, silentLogger } from "../../protocol/logger.ts";
import { AgentPlatformDetachedError } from "./errors.ts";
import type { AgentPlatformOptions } from "./types.ts";

/** The platform's options and its harness, shared by its parts. */
export class PlatformContext {
  /** The options the platform was made with. */
  readonly options: AgentPlatformOptions;
  /** The harness the platform is attached to, once it is. */
  host: AgentExtensionHost | undefined;

  constructor(options: AgentPlatformOptions) {
    this.options = options;
  }

  /** The harness's clock; the system clock before the platform is attached. */
  get clock(): Clock {
    return this.host?.clock ?? systemClock;
  }

  /** The harness's logger; nowhere before the platform is attached. */
  get logger(): Logger {
    return this.host?.logger ?? silentLogger;
  }

  /** The harness; throws {@linkcode AgentPlatformDetachedError} before the platform is attached. */
  get attached(): AgentExtensionHost {
    const host = this.host;
    if (!host) throw new AgentPlatformDetachedError();
    return host;
  }
}
