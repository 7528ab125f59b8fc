/**
 * What the platform's parts that act on its sessions (turns, events, interactions, tokens) work
 * with: its context, its store, its streams and its session table, made once by the platform.
 */
import type { PlatformContext } from "./context.ts";
import type { PlatformSessions } from "./sessions.ts";
import type { PlatformStore } from "./store.ts";
import type { AgentStreams } from "./streams.ts";

/** The platform's context and the parts every other part uses. */
export interface PlatformParts {
  /** The options and the harness attached. */
  readonly ctx: PlatformContext;
  /** The platform's part of the harness's store. */
  readonly store: PlatformStore;
  /** The sessions' subscribers. */
  readonly streams: AgentStreams;
  /** Every session the platform knows, and its routing. */
  readonly sessions: PlatformSessions;
}
