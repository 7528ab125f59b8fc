/**
 * What the inspector's page is sent: the views of executors, sessions, calls, events, turns and
 * interactions, the snapshot a page loads first and the updates that follow it, and how much an
 * inspector keeps of each.
 *
 * Portable: web-standard APIs only.
 */
/** How much an inspector keeps. */
export interface InspectorLimits {
  /** Finished tool calls kept (pending ones are always kept). Default 200. */
  calls: number;
  /** Durable events kept, all sessions together. Default 500. */
  events: number;
  /** Ended sessions kept. Default 100. */
  sessions: number;
  /** Gone executors kept. Default 50. */
  executors: number;
  /** Characters of live output kept per tool call (the latest). Default 64 Ki. */
  outputChars: number;
  /** Characters of any one value shown (an input, a result, an event). Default 16 Ki. */
  valueChars: number;
}

/** The default {@linkcode InspectorLimits}. */
export const DEFAULT_INSPECTOR_LIMITS: Readonly<InspectorLimits> = Object.freeze({
  calls: 200,
  events: 500,
  sessions: 100,
  executors: 50,
  outputChars: 64 * 1024,
  valueChars: 16 * 1024,
});

/** A tool an executor advertises, with the JSON Schema of its input when one is known. */
export interface ToolView {
  readonly name: string;
  readonly builtIn: boolean;
  readonly description?: string;
  readonly inputSchema?: unknown;
}

/** An executor as the page shows it. */
export interface ExecutorView {
  readonly id: string;
  readonly name: string;
  readonly version: string;
  readonly os: string;
  readonly arch: string;
  readonly protocol: string;
  readonly environmentId: string;
  readonly machineId?: string;
  readonly maxSessions?: number;
  readonly connected: boolean;
  readonly draining: boolean;
  readonly gone?: string;
  readonly leaseExpiresAt?: number;
  readonly registeredAt: number;
  readonly capabilities: unknown;
  readonly agent: boolean;
  readonly tools: readonly ToolView[];
}

/** A session as the page shows it. */
export interface SessionView {
  readonly id: string;
  readonly executorId: string;
  readonly state: string;
  readonly reason?: string;
  readonly since: number;
  readonly createdAt: number;
}

/** An error as the page shows it. */
export interface ErrorView {
  readonly name: string;
  readonly message: string;
  readonly code?: number | string;
  readonly reason?: string;
  readonly issues?: unknown;
}

/** A tool call as the page shows it (its live output comes apart: `output`). */
export interface CallView {
  readonly id: string;
  readonly sessionId: string;
  readonly executorId: string;
  readonly tool: string;
  readonly input?: unknown;
  readonly timeoutMs?: number;
  /** The trace id of the W3C trace context the call carried, when it carried one. */
  readonly traceId?: string;
  /** `requested` (made from the page, not sent yet), `dispatched`, `acknowledged`, `settled`, `refused`. */
  readonly state: string;
  readonly requestedAt?: number;
  readonly dispatchedAt?: number;
  readonly acknowledgedAt?: number;
  readonly settledAt?: number;
  /** How many times `tool.call` went out (again after a reconnect). */
  readonly dispatches: number;
  readonly progress?: { message?: string; progress?: number; total?: number };
  readonly outcome?: string;
  readonly isError?: boolean;
  readonly result?: unknown;
  readonly error?: ErrorView;
}

/** One chunk of a call's live output. */
export interface OutputChunk {
  readonly stream: string;
  readonly text: string;
}

/** A durable event as the page shows it. */
export interface EventView {
  /** The inspector's own order of events. */
  readonly seq: number;
  readonly sessionId: string;
  readonly executorId: string;
  readonly at: number;
  readonly index: number;
  readonly type: string;
  readonly turnId?: string;
  readonly eventId?: string;
  readonly event: unknown;
}

/** An agent turn, as its durable events tell it. */
export interface TurnView {
  readonly sessionId: string;
  readonly turnId: string;
  readonly executorId: string;
  /** `running`, or how it ended (`session.status_idle`'s `turn_outcome`). */
  readonly state: string;
  readonly startedAt: number;
  readonly endedAt?: number;
}

/** A platform interaction (an approval, a question). */
export interface InteractionView {
  readonly id: string;
  readonly sessionId: string;
  readonly executorId: string;
  readonly status: string;
  readonly change: string;
  readonly at: number;
  readonly interaction: unknown;
}

/** Something an action from the page ran into later (a stop that failed, ...). */
export interface NoticeView {
  readonly at: number;
  readonly text: string;
}

/** Everything the page shows, at one moment. */
export interface InspectorSnapshot {
  readonly now: number;
  readonly executors: readonly ExecutorView[];
  readonly sessions: readonly SessionView[];
  readonly calls: readonly (CallView & { output: readonly OutputChunk[] })[];
  readonly events: readonly EventView[];
  readonly previews: readonly PreviewView[];
  readonly turns: readonly TurnView[];
  readonly interactions: readonly InteractionView[];
  readonly notices: readonly NoticeView[];
}

/** A preview of an agent event being produced (its deltas, joined). */
export interface PreviewView {
  readonly sessionId: string;
  readonly turnId: string;
  readonly eventId: string;
  readonly deltaType: string;
  readonly text: string;
}

/** One change, as the page applies it. */
export type InspectorUpdate =
  | { readonly op: "executor"; readonly executor: ExecutorView }
  | { readonly op: "session"; readonly session: SessionView }
  | { readonly op: "call"; readonly call: CallView }
  | { readonly op: "output"; readonly id: string; readonly stream: string; readonly text: string }
  | { readonly op: "event"; readonly event: EventView }
  | {
    readonly op: "preview";
    readonly sessionId: string;
    readonly turnId: string;
    readonly eventId: string;
    readonly deltaType: string;
    readonly append: string;
  }
  | { readonly op: "turn"; readonly turn: TurnView }
  | { readonly op: "interaction"; readonly interaction: InteractionView }
  | { readonly op: "notice"; readonly notice: NoticeView }
  | {
    readonly op: "forget";
    readonly kind: "executor" | "session" | "call" | "preview" | "turn" | "interaction";
    readonly id: string;
  };

/** A batch of updates, stamped with the harness clock. */
export interface InspectorBatch {
  readonly now: number;
  readonly updates: readonly InspectorUpdate[];
}
