/**
 * The executor's extension seam: what a capability built on top of an `ExecutorClient` (the
 * agent capability's `serveAgent` in `bma-executor-sdk/agent`, or one of your own) gets of the
 * client through `client.extend(install)`, besides its public API: its clock and scrubbed
 * logger, sessions that open without `session.assign` (an agent session opens with its first
 * `turn.start`), capability details that no served method implies (`agent.max_sessions`), and
 * secrets to keep out of logs (model tokens). The client does not depend on any extension.
 */
import type { Clock } from "../protocol/clock.ts";
import type { Capabilities } from "../protocol/generated/contract.ts";
import type { Logger } from "../protocol/logger.ts";
import type { Disposable } from "../protocol/peer.ts";
import type { Telemetry } from "../protocol/telemetry.ts";
import type { ExecutorSession } from "./sessions.ts";
import type { BackoffPolicy } from "./timing.ts";

/** What `client.extend` hands a capability built on top of the client. */
export interface ExecutorExtensionHost {
  /** The client's clock. */
  readonly clock: Clock;
  /** The client's logger: secret-named fields redacted, known secret values scrubbed. */
  readonly logger: Logger;
  /** The client's randomness (backoff jitter). */
  readonly random: () => number;
  /** Backoff of retried deliveries. */
  readonly retry: BackoffPolicy;
  /** Timeout of each request the client sends. */
  readonly requestTimeoutMs: number;
  /** The frame size limit of the connection. */
  readonly maxFrameBytes: number;
  /**
   * Holds a session opened without `session.assign` (it counts for `resume.active_sessions`,
   * heartbeats and drain like any other). Already ready: no `session.ready` is sent.
   */
  openSession(sessionId: string): ExecutorSession;
  /**
   * Ends a held session: its cleanup hooks run, its events are delivered, and with `notify`
   * `session.ended` is sent until accepted.
   */
  endSession(session: ExecutorSession, reason: string, notify: boolean): Promise<void>;
  /** Adds to the advertised capabilities (configured ones win); published on every change. */
  contributeCapabilities(source: () => Capabilities): Disposable;
  /** Keeps a secret value (a model token) out of logs and error text from now on. */
  addSecret(secret: string): void;
  /** `text` with every known secret replaced. */
  scrub(text: string): string;
  /** The client's OpenTelemetry (its `telemetry` option); absent without one. */
  readonly telemetry: Telemetry | undefined;
}

/**
 * The configured capabilities with contributed ones underneath: for a key both name as objects
 * the members merge (configured members win); otherwise the configured value wins.
 */
export function withContributions(
  contributed: readonly Capabilities[],
  configured: Capabilities | undefined,
): Capabilities {
  const out: Record<string, unknown> = {};
  for (const source of [...contributed, configured ?? {}]) {
    for (const [key, value] of Object.entries(source as Record<string, unknown>)) {
      const before = out[key];
      out[key] = isPlainObject(before) && isPlainObject(value) ? { ...before, ...value } : value;
    }
  }
  return out as Capabilities;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The extension host of a client: `client.extend((host) => host)`, for modules that read it once
 * (the machine's `serveMachine`).
 */
export function clientInternals(
  client: { extend<T>(install: (host: ExecutorExtensionHost) => T): T },
): ExecutorExtensionHost {
  return client.extend((host) => host);
}
