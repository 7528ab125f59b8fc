/**
 * What a capability module built on top of an {@linkcode ExecutorClient} (the agent capability
 * in `agent/`) may reach inside the client, without widening the client's public API: its clock
 * and scrubbed logger, sessions that open without `session.assign` (an agent session opens with
 * its first `turn.start`), capability details that no served method implies (`agent.max_sessions`),
 * and secrets to keep out of logs (model tokens).
 *
 * Internal: not exported from any entry point.
 */
import type { Clock } from "../protocol/clock.ts";
import type { Capabilities } from "../protocol/generated/contract.ts";
import type { Logger } from "../protocol/logger.ts";
import type { Disposable } from "../protocol/peer.ts";
import type { ExecutorSession } from "./sessions.ts";
import type { BackoffPolicy } from "./timing.ts";
import { ExecutorConfigError } from "./errors.ts";

/** The client's insides that capability modules use. */
export interface ClientInternals {
  readonly clock: Clock;
  /** The client's logger: secret-named fields redacted, known secret values scrubbed. */
  readonly logger: Logger;
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
}

const registry = new WeakMap<object, ClientInternals>();

/** Called once by the client's constructor. */
export function registerClientInternals(client: object, internals: ClientInternals): void {
  registry.set(client, internals);
}

/** The internals of a client; throws for anything that is not an `ExecutorClient`. */
export function clientInternals(client: object): ClientInternals {
  const internals = registry.get(client);
  if (!internals) throw new ExecutorConfigError("not an ExecutorClient");
  return internals;
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
