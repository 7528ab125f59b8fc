/**
 * What every part of the served agent reads: the client, its extension host, the options of
 * `serveAgent`, and the agent sessions held now, with the host's clock and logger at hand. The
 * executor end's counterpart of the platform's `PlatformContext`.
 */
import type { ExecutorClient } from "../../executor/client.ts";
import type { ExecutorExtensionHost } from "../../executor/extension.ts";
import type { Clock } from "../../protocol/clock.ts";
import type { Logger } from "../../protocol/logger.ts";
import type { ServeAgentOptions } from "./options.ts";
import type { SessionState } from "./state.ts";

/** The client, its host, the options and the sessions, shared by the service's parts. */
export class ServiceContext {
  /** The client the agent is served on. */
  readonly client: ExecutorClient;
  /** The client's extension host: its clock, logger, secrets, sessions and limits. */
  readonly host: ExecutorExtensionHost;
  /** The options of `serveAgent`. */
  readonly options: ServeAgentOptions;
  /** The agent sessions held now, by id (the service opens and forgets them). */
  readonly sessions: Map<string, SessionState> = new Map();

  constructor(client: ExecutorClient, host: ExecutorExtensionHost, options: ServeAgentOptions) {
    this.client = client;
    this.host = host;
    this.options = options;
  }

  /** The client's clock. */
  get clock(): Clock {
    return this.host.clock;
  }

  /** The client's logger. */
  get logger(): Logger {
    return this.host.logger;
  }
}
