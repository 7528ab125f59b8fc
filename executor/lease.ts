/**
 * The executor lease: `executor.heartbeat` every `heartbeat_interval_ms` that
 * `executor.register` returned. Two missed heartbeats expire the lease on the harness: two
 * intervals from the last heartbeat it received. A connection cut without a close (a dropped
 * link, a frozen peer) is noticed only by a heartbeat going unanswered, and the executor must be
 * registered again before that lease runs out to resume its sessions; so a heartbeat unanswered
 * for half an interval (sent one interval after the last answered one, given up on at one and a
 * half) means the connection is dead: the client drops it and reconnects, with half an interval
 * left for the reconnect. `drain: true` in a heartbeat result starts draining.
 */
import type { Clock, TimerHandle } from "../protocol/clock.ts";
import { ConnectionClosedError, RequestTimeoutError } from "../protocol/errors.ts";
import type { Logger } from "../protocol/logger.ts";
import type { Peer } from "../protocol/peer.ts";
import { describeError } from "./timing.ts";

/** What the lease needs from the client. */
export interface LeaseOptions {
  peer: Peer;
  clock: Clock;
  logger: Logger;
  intervalMs: number;
  /** The sessions held, reported with each heartbeat. */
  sessions: { ids(): string[] };
  /** The harness asked to drain. */
  onDrain(): void;
  /** Heartbeats go unanswered: the connection is dead. */
  onDead(): void;
}

/** Sends heartbeats on one connection until stopped. */
export class Lease {
  readonly #options: LeaseOptions;
  #timer: TimerHandle | undefined;
  #stopped = false;

  constructor(options: LeaseOptions) {
    this.#options = options;
  }

  /** Schedules the first heartbeat one interval from now. */
  start(): void {
    this.#schedule();
  }

  /** Stops heartbeating (the connection ended). */
  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) this.#options.clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = this.#options.clock.setTimeout(() => this.#beat(), this.#options.intervalMs);
  }

  #beat(): void {
    this.#timer = undefined;
    if (this.#stopped) return;
    const { peer, intervalMs, logger } = this.#options;
    // The next beat does not wait for this one's answer: the lease runs on the interval.
    this.#schedule();
    peer.call("executor.heartbeat", { active_sessions: this.#options.sessions.ids() }, {
      timeoutMs: Math.max(1, Math.floor(intervalMs / 2)),
    }).then((result) => {
      if (!this.#stopped && result.drain) this.#options.onDrain();
    }, (error) => {
      if (this.#stopped || error instanceof ConnectionClosedError) return;
      if (error instanceof RequestTimeoutError) {
        logger.warn("heartbeat unanswered for half an interval: reconnecting", {
          interval_ms: intervalMs,
        });
        this.stop();
        this.#options.onDead();
        return;
      }
      logger.warn("heartbeat refused", { error: describeError(error) });
    });
  }
}
