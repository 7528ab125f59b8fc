/**
 * What an inspector shows, kept from a harness's observations (`harness.observe`): executors,
 * sessions, tool calls with their timings and output, durable events and previews, agent
 * turns and interactions. Everything is a bounded copy — strings and nested values are clipped,
 * finished things are forgotten oldest first — because executors are untrusted and a page must
 * stay small however much they send.
 *
 * Changes go to subscribers as {@linkcode InspectorUpdate}s, batched so that a burst of tool
 * output is one message; a page loads {@linkcode InspectorSnapshot} first, then applies them.
 *
 * Portable: web-standard APIs only.
 */
import { servesTool } from "../../protocol/capabilities.ts";
import type { Clock } from "../../protocol/clock.ts";
import type { Disposable } from "../../protocol/peer.ts";
import type { Capabilities } from "../../protocol/generated/contract.ts";
import { TOOL_JSON_SCHEMAS } from "../../protocol/generated/tool-schemas.ts";
import type { ExecutorHandle } from "../../harness/handles.ts";
import type { Harness } from "../../harness/harness.ts";
import type { HarnessObservation } from "../../harness/observe.ts";
import type { ToolCallResult } from "../../harness/records.ts";
import { clip, errorView } from "./clip.ts";
import type {
  CallView,
  EventView,
  ExecutorView,
  InspectorBatch,
  InspectorLimits,
  InspectorSnapshot,
  InspectorUpdate,
  InteractionView,
  NoticeView,
  OutputChunk,
  PreviewView,
  SessionView,
  ToolView,
  TurnView,
} from "./views.ts";

/** The limits are the inspector's options (`inspector(harness, { limits })`). */
export { DEFAULT_INSPECTOR_LIMITS, type InspectorLimits } from "./views.ts";

interface CallState {
  view: CallView;
  output: OutputChunk[];
  outputChars: number;
}

/** The inspector's state of one harness. */
export class InspectorModel {
  readonly #harness: Harness;
  readonly #limits: InspectorLimits;
  readonly #clock: Clock;
  readonly #executors = new Map<string, ExecutorView>();
  readonly #sessions = new Map<string, SessionView>();
  readonly #calls = new Map<string, CallState>();
  readonly #events: EventView[] = [];
  readonly #previews = new Map<string, PreviewView>();
  readonly #turns = new Map<string, TurnView>();
  readonly #interactions = new Map<string, InteractionView>();
  readonly #notices: NoticeView[] = [];
  readonly #subscribers = new Set<(batch: InspectorBatch) => void>();
  readonly #observation: Disposable;
  #pending: InspectorUpdate[] = [];
  #flush: ReturnType<typeof setTimeout> | undefined;
  #seq = 0;

  /**
   * Watches `harness` from now on (its executors and live sessions are taken as they are);
   * `clock` is the harness's, so that times and lease expiries compare.
   */
  constructor(harness: Harness, limits: InspectorLimits, clock: Clock) {
    this.#harness = harness;
    this.#limits = limits;
    this.#clock = clock;
    this.#observation = harness.observe((observation) => this.#observe(observation));
    const now = clock.now();
    for (const executor of harness.executors) {
      this.#executors.set(executor.id, this.#executorView(executor, now, undefined));
    }
    for (const session of harness.sessions.values()) {
      this.#sessions.set(session.id, {
        id: session.id,
        executorId: session.executor.id,
        state: session.state,
        since: now,
        createdAt: now,
      });
    }
  }

  /** Everything, now. */
  snapshot(): InspectorSnapshot {
    return {
      now: this.#now(),
      executors: [...this.#executors.values()],
      sessions: [...this.#sessions.values()],
      calls: [...this.#calls.values()].map((c) => ({ ...c.view, output: [...c.output] })),
      events: [...this.#events],
      previews: [...this.#previews.values()],
      turns: [...this.#turns.values()],
      interactions: [...this.#interactions.values()],
      notices: [...this.#notices],
    };
  }

  /** A session by id (ended ones too, while kept). */
  session(id: string): SessionView | undefined {
    return this.#sessions.get(id);
  }

  /** A tool call by id. */
  call(id: string): CallView | undefined {
    return this.#calls.get(id)?.view;
  }

  /** An interaction by its platform id. */
  interaction(id: string): InteractionView | undefined {
    return this.#interactions.get(id);
  }

  /** Receives every batch of updates until disposed. */
  subscribe(listener: (batch: InspectorBatch) => void): Disposable {
    this.#subscribers.add(listener);
    return { dispose: () => void this.#subscribers.delete(listener) };
  }

  /** A call made from the page, before the harness sends it. */
  requested(
    id: string,
    sessionId: string,
    executorId: string,
    tool: string,
    input: unknown,
  ): void {
    const view: CallView = {
      id,
      sessionId,
      executorId,
      tool: String(clip(tool, 200)),
      input: clip(input, this.#limits.valueChars),
      state: "requested",
      requestedAt: this.#now(),
      dispatches: 0,
    };
    this.#calls.set(id, { view, output: [], outputChars: 0 });
    this.#emit({ op: "call", call: view });
  }

  /** A call made from the page was refused before it went out (its input, its session, ...). */
  refused(id: string, error: unknown): void {
    const call = this.#calls.get(id);
    if (!call || call.view.state !== "requested") return;
    this.#updateCall(call, {
      state: "refused",
      settledAt: this.#now(),
      error: errorView(error, this.#limits.valueChars),
    });
    this.#pruneCalls();
  }

  /** Notes something an action ran into after its request was answered. */
  notice(text: string): void {
    const notice = { at: this.#now(), text: String(clip(text, 2000)) };
    this.#notices.push(notice);
    if (this.#notices.length > 50) this.#notices.shift();
    this.#emit({ op: "notice", notice });
  }

  /** Stops watching the harness. */
  close(): void {
    this.#observation.dispose();
    if (this.#flush !== undefined) clearTimeout(this.#flush);
    this.#flush = undefined;
    this.#pending = [];
    this.#subscribers.clear();
  }

  // ---- observations ------------------------------------------------------------------------------

  #observe(o: HarnessObservation): void {
    switch (o.type) {
      case "executor.registered":
      case "executor.reconnected":
      case "executor.disconnected":
      case "executor.capabilities":
      case "executor.draining":
      case "executor.gone":
        return this.#executorChanged(
          o.executorId,
          o.at,
          o.type === "executor.gone" ? o.reason : undefined,
        );
      case "executor.lease": {
        const view = this.#executors.get(o.executorId);
        if (!view) return;
        this.#setExecutor({ ...view, leaseExpiresAt: o.expiresAt });
        return;
      }
      case "session.state":
        return this.#sessionState(o.sessionId, o.executorId, o.state, o.reason, o.at);
      case "tool.dispatched": {
        let call = this.#calls.get(o.toolCallId);
        if (!call) {
          const view: CallView = {
            id: o.toolCallId,
            sessionId: o.sessionId,
            executorId: o.executorId,
            tool: String(clip(o.tool, 200)),
            input: clip(o.input, this.#limits.valueChars),
            ...(o.timeoutMs !== undefined ? { timeoutMs: o.timeoutMs } : {}),
            ...(o.traceId !== undefined ? { traceId: o.traceId } : {}),
            state: "dispatched",
            dispatchedAt: o.at,
            dispatches: 0,
          };
          call = { view, output: [], outputChars: 0 };
          this.#calls.set(o.toolCallId, call);
        }
        if (call.view.state === "settled") return;
        this.#updateCall(call, {
          state: "dispatched",
          dispatchedAt: call.view.dispatchedAt ?? o.at,
          dispatches: call.view.dispatches + 1,
          ...(o.timeoutMs !== undefined ? { timeoutMs: o.timeoutMs } : {}),
          ...(o.traceId !== undefined ? { traceId: o.traceId } : {}),
        });
        return;
      }
      case "tool.acknowledged": {
        const call = this.#calls.get(o.toolCallId);
        if (!call) return;
        const settled = call.view.state === "settled";
        this.#updateCall(call, {
          acknowledgedAt: call.view.acknowledgedAt ?? o.at,
          ...(settled ? {} : { state: "acknowledged" }),
        });
        return;
      }
      case "tool.progress":
        return this.#progress(o.toolCallId, o.progress);
      case "tool.settled": {
        const call = this.#calls.get(o.toolCallId);
        if (!call) return;
        this.#updateCall(call, {
          state: "settled",
          settledAt: o.at,
          ...(o.result ? this.#resultFields(o.result) : {}),
          ...(o.error !== undefined ? { error: errorView(o.error, this.#limits.valueChars) } : {}),
        });
        this.#pruneCalls();
        return;
      }
      case "session.event":
        return this.#event(o.sessionId, o.executorId, o.record, o.at);
      case "session.delta":
        return this.#delta(o.delta);
      case "interaction": {
        const view: InteractionView = {
          id: o.interactionId,
          sessionId: o.sessionId,
          executorId: o.executorId,
          status: o.status,
          change: o.change,
          at: o.at,
          interaction: clip(o.interaction, this.#limits.valueChars),
        };
        this.#interactions.set(view.id, view);
        this.#emit({ op: "interaction", interaction: view });
        this.#pruneInteractions();
        return;
      }
    }
  }

  #executorChanged(id: string, at: number, goneReason: string | undefined): void {
    const handle = this.#harness.executor(id);
    const previous = this.#executors.get(id);
    if (!handle) {
      if (!previous) return;
      this.#setExecutor({
        ...previous,
        connected: false,
        ...(goneReason ? { gone: goneReason } : {}),
      });
    } else {
      this.#setExecutor(this.#executorView(handle, previous?.registeredAt ?? at, goneReason));
    }
    this.#pruneExecutors();
  }

  #executorView(
    handle: ExecutorHandle,
    registeredAt: number,
    goneReason: string | undefined,
  ): ExecutorView {
    const info = handle.info;
    const capabilities = handle.capabilities;
    const machineId = handle.machineId;
    const maxSessions = handle.maxSessions;
    const gone = goneReason ?? (handle.gone ? "gone" : undefined);
    const leaseExpiresAt = handle.leaseExpiresAt;
    return {
      id: handle.id,
      name: String(clip(info.name, 200)),
      version: String(clip(info.version, 100)),
      os: String(clip(info.os, 100)),
      arch: String(clip(info.arch, 100)),
      protocol: handle.protocol,
      environmentId: String(clip(handle.environmentId, 200)),
      ...(machineId !== undefined ? { machineId: String(clip(machineId, 200)) } : {}),
      ...(maxSessions !== undefined ? { maxSessions } : {}),
      connected: handle.connected,
      draining: handle.draining,
      ...(gone ? { gone } : {}),
      ...(leaseExpiresAt !== undefined ? { leaseExpiresAt } : {}),
      registeredAt,
      capabilities: clip(capabilities, this.#limits.valueChars),
      agent: capabilities.agent !== undefined && capabilities.agent !== null &&
        (capabilities.agent as { enabled?: unknown }).enabled !== false,
      tools: this.#tools(capabilities),
    };
  }

  /** The advertised tools: the contract's schema for a built-in one, the executor's for others. */
  #tools(capabilities: Capabilities): ToolView[] {
    const names = Array.isArray(capabilities.tools) ? capabilities.tools : [];
    const definitions = capabilities.tool_definitions ?? {};
    const out: ToolView[] = [];
    for (const name of names.slice(0, 200)) {
      if (typeof name !== "string" || !servesTool(capabilities, name)) continue;
      const builtIn = Object.hasOwn(TOOL_JSON_SCHEMAS, name)
        ? TOOL_JSON_SCHEMAS[name as keyof typeof TOOL_JSON_SCHEMAS]
        : undefined;
      if (builtIn) {
        out.push({
          name,
          builtIn: true,
          description: builtIn.description,
          inputSchema: builtIn.input,
        });
        continue;
      }
      const definition = Object.hasOwn(definitions, name) ? definitions[name] : undefined;
      out.push({
        name: String(clip(name, 200)),
        builtIn: false,
        ...(typeof definition?.description === "string"
          ? { description: String(clip(definition.description, 2000)) }
          : {}),
        ...(definition?.input_schema
          ? { inputSchema: clip(definition.input_schema, this.#limits.valueChars) }
          : {}),
      });
    }
    return out;
  }

  #setExecutor(view: ExecutorView): void {
    this.#executors.set(view.id, view);
    this.#emit({ op: "executor", executor: view });
  }

  #sessionState(
    id: string,
    executorId: string,
    state: string,
    reason: string | undefined,
    at: number,
  ): void {
    const previous = this.#sessions.get(id);
    const view: SessionView = {
      id,
      executorId,
      state,
      ...(reason !== undefined ? { reason: String(clip(reason, 500)) } : {}),
      since: at,
      createdAt: previous?.createdAt ?? at,
    };
    // A session ended and assigned again under its id starts over.
    this.#sessions.delete(id);
    this.#sessions.set(id, view);
    this.#emit({ op: "session", session: view });
    if (state === "ended") this.#pruneSessions();
  }

  #progress(
    id: string,
    progress: {
      message?: string;
      progress?: number;
      total?: number;
      output?: { stream: string; text: string };
    },
  ): void {
    const call = this.#calls.get(id);
    if (!call || call.view.state === "settled") return;
    const output = progress.output;
    if (output && typeof output.text === "string") {
      const stream = String(clip(output.stream, 20));
      const limit = this.#limits.outputChars;
      const text = output.text.length > limit ? output.text.slice(-limit) : output.text;
      const last = call.output.at(-1);
      if (last && last.stream === stream) {
        call.output[call.output.length - 1] = { stream, text: last.text + text };
      } else call.output.push({ stream, text });
      call.outputChars += text.length;
      while (call.outputChars > limit && call.output.length > 0) {
        const first = call.output[0];
        const excess = call.outputChars - limit;
        if (first.text.length <= excess) {
          call.output.shift();
          call.outputChars -= first.text.length;
        } else {
          call.output[0] = { stream: first.stream, text: first.text.slice(excess) };
          call.outputChars -= excess;
        }
      }
      this.#emit({ op: "output", id, stream, text });
    }
    if (
      progress.message !== undefined || progress.progress !== undefined ||
      progress.total !== undefined
    ) {
      this.#updateCall(call, {
        progress: {
          ...(typeof progress.message === "string"
            ? { message: String(clip(progress.message, 500)) }
            : {}),
          ...(typeof progress.progress === "number" ? { progress: progress.progress } : {}),
          ...(typeof progress.total === "number" ? { total: progress.total } : {}),
        },
      });
    }
  }

  #resultFields(result: ToolCallResult): Partial<CallView> {
    return {
      outcome: result.outcome,
      isError: result.is_error,
      result: clip({
        content: result.content,
        ...(result.structured_content !== undefined
          ? { structured_content: result.structured_content }
          : {}),
        ...(result.error ? { error: result.error } : {}),
        ...(result.artifacts.length ? { artifacts: result.artifacts } : {}),
      }, this.#limits.valueChars),
    };
  }

  #updateCall(call: CallState, change: Partial<CallView>): void {
    call.view = { ...call.view, ...change } as CallView;
    this.#emit({ op: "call", call: call.view });
  }

  #event(
    sessionId: string,
    executorId: string,
    record: {
      index: number;
      event: { type: string };
      turn_id?: string;
      event_id?: string;
    },
    at: number,
  ): void {
    const view: EventView = {
      seq: ++this.#seq,
      sessionId,
      executorId,
      at,
      index: record.index,
      type: String(clip(record.event.type, 200)),
      ...(record.turn_id !== undefined ? { turnId: String(clip(record.turn_id, 200)) } : {}),
      ...(record.event_id !== undefined ? { eventId: String(clip(record.event_id, 200)) } : {}),
      event: clip(record.event, this.#limits.valueChars),
    };
    this.#events.push(view);
    this.#emit({ op: "event", event: view });
    while (this.#events.length > this.#limits.events) this.#events.shift();
    if (view.eventId !== undefined && this.#previews.delete(view.eventId)) {
      this.#emit({ op: "forget", kind: "preview", id: view.eventId });
    }
    if (view.turnId !== undefined) this.#turn(sessionId, executorId, view.turnId, view, at);
  }

  #turn(sessionId: string, executorId: string, turnId: string, event: EventView, at: number) {
    const key = `${sessionId}\u0000${turnId}`;
    const previous = this.#turns.get(key);
    let state = previous?.state ?? "running";
    let endedAt = previous?.endedAt;
    if (event.type === "session.status_running") state = "running";
    if (event.type === "session.status_idle") {
      const outcome = (event.event as { turn_outcome?: unknown }).turn_outcome;
      state = typeof outcome === "string" ? outcome : "ended";
      endedAt = at;
    }
    const view: TurnView = {
      sessionId,
      turnId,
      executorId,
      state,
      startedAt: previous?.startedAt ?? at,
      ...(endedAt !== undefined ? { endedAt } : {}),
    };
    this.#turns.delete(key);
    this.#turns.set(key, view);
    this.#emit({ op: "turn", turn: view });
    while (this.#turns.size > this.#limits.sessions) {
      const [oldest, turn] = this.#turns.entries().next().value!;
      this.#turns.delete(oldest);
      this.#emit({ op: "forget", kind: "turn", id: `${turn.sessionId}/${turn.turnId}` });
    }
  }

  #delta(
    params: {
      session_id: string;
      turn_id: string;
      event_id: string;
      delta: { type: string; [key: string]: unknown };
    },
  ): void {
    const delta = params.delta;
    const piece = typeof delta.text === "string"
      ? delta.text
      : typeof delta.thinking === "string"
      ? delta.thinking
      : typeof delta.partial_json === "string"
      ? delta.partial_json
      : "";
    const eventId = String(clip(params.event_id, 200));
    const previous = this.#previews.get(eventId);
    const room = this.#limits.valueChars - (previous?.text.length ?? 0);
    const append = room > 0 ? piece.slice(0, room) : "";
    const view: PreviewView = {
      sessionId: params.session_id,
      turnId: String(clip(params.turn_id, 200)),
      eventId,
      deltaType: String(clip(delta.type, 100)),
      text: (previous?.text ?? "") + append,
    };
    this.#previews.set(eventId, view);
    this.#emit({
      op: "preview",
      sessionId: view.sessionId,
      turnId: view.turnId,
      eventId,
      deltaType: view.deltaType,
      append,
    });
    while (this.#previews.size > 100) {
      const oldest = this.#previews.keys().next().value!;
      this.#previews.delete(oldest);
      this.#emit({ op: "forget", kind: "preview", id: oldest });
    }
  }

  // ---- bounds ------------------------------------------------------------------------------------

  #pruneCalls(): void {
    let finished = 0;
    for (const call of this.#calls.values()) {
      if (call.view.state === "settled" || call.view.state === "refused") finished++;
    }
    for (const [id, call] of this.#calls) {
      if (finished <= this.#limits.calls) break;
      if (call.view.state !== "settled" && call.view.state !== "refused") continue;
      this.#calls.delete(id);
      finished--;
      this.#emit({ op: "forget", kind: "call", id });
    }
  }

  #pruneSessions(): void {
    let ended = 0;
    for (const session of this.#sessions.values()) if (session.state === "ended") ended++;
    for (const [id, session] of this.#sessions) {
      if (ended <= this.#limits.sessions) break;
      if (session.state !== "ended") continue;
      this.#sessions.delete(id);
      ended--;
      this.#emit({ op: "forget", kind: "session", id });
    }
  }

  #pruneExecutors(): void {
    let gone = 0;
    for (const executor of this.#executors.values()) if (executor.gone) gone++;
    for (const [id, executor] of this.#executors) {
      if (gone <= this.#limits.executors) break;
      if (!executor.gone) continue;
      this.#executors.delete(id);
      gone--;
      this.#emit({ op: "forget", kind: "executor", id });
    }
  }

  #pruneInteractions(): void {
    let settled = 0;
    for (const i of this.#interactions.values()) if (i.status !== "open") settled++;
    for (const [id, i] of this.#interactions) {
      if (settled <= this.#limits.calls) break;
      if (i.status === "open") continue;
      this.#interactions.delete(id);
      settled--;
      this.#emit({ op: "forget", kind: "interaction", id });
    }
  }

  // ---- delivery ----------------------------------------------------------------------------------

  #now(): number {
    return this.#clock.now();
  }

  #emit(update: InspectorUpdate): void {
    if (this.#subscribers.size === 0) return;
    this.#pending.push(update);
    // One message per burst: output chunks and progress of a busy call arrive together.
    this.#flush ??= setTimeout(() => this.#deliver(), 25);
  }

  #deliver(): void {
    this.#flush = undefined;
    const updates = this.#pending;
    this.#pending = [];
    if (updates.length === 0) return;
    const batch: InspectorBatch = { now: this.#now(), updates };
    for (const listener of [...this.#subscribers]) listener(batch);
  }
}
