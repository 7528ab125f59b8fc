/**
 * A session's durable events: the {@linkcode EventLog} each session keeps (new, or read back from
 * the store for a session a previous run of the harness left there), its accepted events told to
 * the observers (`session.event`).
 *
 * Part of the harness's sessions (sessions.ts): events are appended (`session.event`, stored
 * before the ack) and read (`Session.events`) through the log.
 */
import type { Clock } from "../protocol/clock.ts";
import { EventLog, type SessionEventSink } from "./event-log.ts";
import type { HarnessMetrics } from "./metrics.ts";
import type { Observers } from "./observe.ts";
import type { SessionEventRecord } from "./records.ts";
import type { ExecutorEntry } from "./state.ts";
import type { HarnessStore } from "./store/store.ts";

/** What a session's event log needs from the harness. */
export interface SessionLogDeps {
  readonly clock: Clock;
  readonly store: HarnessStore | undefined;
  readonly observers: Observers;
  /** Where accepted events go besides the store (the user's sink, the agent capability). */
  readonly eventSink: SessionEventSink | undefined;
  readonly maxSessionEvents: number | undefined;
  readonly maxSessionEventBytes: number | undefined;
  /** Counts the accepted events. */
  readonly metrics?: HarnessMetrics;
}

/** The event log of session `id` of `executor`: read back from the store when `reopened`. */
export function sessionLog(
  id: string,
  executor: ExecutorEntry,
  reopened: boolean,
  deps: SessionLogDeps,
): EventLog {
  const observers = deps.observers;
  const metrics = deps.metrics;
  const options = {
    sink: deps.eventSink,
    now: () => deps.clock.now(),
    ...(deps.maxSessionEvents !== undefined ? { maxRecords: deps.maxSessionEvents } : {}),
    ...(deps.maxSessionEventBytes !== undefined ? { maxBytes: deps.maxSessionEventBytes } : {}),
    ...(deps.store ? { store: deps.store } : {}),
    onAccepted: (record: SessionEventRecord) => {
      metrics?.eventStored();
      if (!observers.active) return;
      observers.emit({
        type: "session.event",
        at: record.received_at,
        sessionId: id,
        executorId: executor.id,
        record,
      });
    },
  };
  return reopened && deps.store
    ? EventLog.reopened(id, { ...options, store: deps.store })
    : new EventLog(id, options);
}
