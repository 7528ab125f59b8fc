/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * What the main page knows (the harness's live state, from its snapshot and the updates that
 * follow it) and what it is doing (the choices of its form, what is expanded, what is due to be
 * drawn again).
 */
import type {
  CallView,
  EventView,
  ExecutorView,
  InspectorBatch,
  InspectorSnapshot,
  InteractionView,
  NoticeView,
  PreviewView,
  SessionView,
  TurnView,
} from "../views.ts";

/** A run of a call's output on one stream (the next chunk of the same stream joins it). */
export interface OutputRun {
  stream: string;
  text: string;
}

/** A preview of an agent event, its deltas joined as they come. */
export interface Preview extends Omit<PreviewView, "text"> {
  text: string;
}

/** The parts of the page that can be drawn again, one at a time (`all`: every one). */
export type Part =
  | "all"
  | "executors"
  | "sessions"
  | "form"
  | "calls"
  | "interactions"
  | "turns"
  | "events"
  | "notices";

/** The harness's live state, as the page has it. */
export const state = {
  /** The harness's clock minus the browser's. */
  offset: 0,
  executors: new Map<string, ExecutorView>(),
  sessions: new Map<string, SessionView>(),
  calls: new Map<string, CallView>(),
  output: new Map<string, OutputRun[]>(),
  events: [] as EventView[],
  previews: new Map<string, Preview>(),
  turns: new Map<string, TurnView>(),
  interactions: new Map<string, InteractionView>(),
  notices: [] as NoticeView[],
};

/** What the page is doing. */
export const ui = {
  expanded: new Set<string>(),
  openEvents: new Set<number>(),
  session: "",
  tool: "",
  dirty: new Set<Part>(),
  /** The render due (0: none). */
  timer: 0 as ReturnType<typeof setTimeout> | 0,
  // Whether the live stream is down (the harness or its inspector stopped): the page shows it
  // everywhere and its actions are off. What an action failed with, by action, shown beside it.
  offline: false,
  lostAt: 0,
  errors: new Map<string, string>(),
};

/** Now, on the harness's clock. */
export const now = (): number => Date.now() + state.offset;

let renderer: () => void = () => {};

/** What draws the dirty parts again (the page's `render`: it clears `ui.dirty` and `ui.timer`). */
export function renderWith(render: () => void): void {
  renderer = render;
}

/** Marks parts to be drawn again, soon and together. */
export function mark(...parts: Part[]): void {
  for (const part of parts) ui.dirty.add(part);
  if (!ui.timer) ui.timer = setTimeout(() => renderer(), 30);
}

/** Takes a snapshot as everything the page knows. */
export function load(snapshot: InspectorSnapshot): void {
  state.offset = snapshot.now - Date.now();
  state.executors = new Map(snapshot.executors.map((e) => [e.id, e]));
  state.sessions = new Map(snapshot.sessions.map((s) => [s.id, s]));
  state.calls = new Map();
  state.output = new Map();
  for (const call of snapshot.calls) {
    const { output, ...view } = call;
    state.calls.set(view.id, view);
    state.output.set(view.id, output.map((c) => ({ stream: c.stream, text: c.text })));
  }
  state.events = [...snapshot.events];
  state.previews = new Map(snapshot.previews.map((p) => [p.eventId, { ...p }]));
  state.turns = new Map(snapshot.turns.map((t) => [t.sessionId + "/" + t.turnId, t]));
  state.interactions = new Map(snapshot.interactions.map((i) => [i.id, i]));
  state.notices = [...snapshot.notices];
  mark("all");
}

/** Applies a batch of updates. */
export function apply(batch: InspectorBatch): void {
  state.offset = batch.now - Date.now();
  for (const u of batch.updates) {
    switch (u.op) {
      case "executor":
        state.executors.set(u.executor.id, u.executor);
        mark("executors", "form");
        break;
      case "session":
        state.sessions.delete(u.session.id);
        state.sessions.set(u.session.id, u.session);
        mark("sessions", "form");
        break;
      case "call":
        state.calls.set(u.call.id, u.call);
        mark("calls");
        break;
      case "output": {
        const chunks = state.output.get(u.id) || [];
        const last = chunks[chunks.length - 1];
        if (last && last.stream === u.stream) last.text += u.text;
        else chunks.push({ stream: u.stream, text: u.text });
        state.output.set(u.id, chunks);
        mark("calls");
        break;
      }
      case "event":
        state.events.push(u.event);
        if (state.events.length > 500) state.events.shift();
        mark("events");
        break;
      case "preview": {
        const p = state.previews.get(u.eventId) ||
          {
            sessionId: u.sessionId,
            turnId: u.turnId,
            eventId: u.eventId,
            deltaType: u.deltaType,
            text: "",
          };
        p.text += u.append;
        state.previews.set(u.eventId, p);
        mark("events");
        break;
      }
      case "turn":
        state.turns.set(u.turn.sessionId + "/" + u.turn.turnId, u.turn);
        mark("turns");
        break;
      case "interaction":
        state.interactions.set(u.interaction.id, u.interaction);
        mark("interactions");
        break;
      case "notice":
        state.notices.push(u.notice);
        mark("notices");
        break;
      case "forget": {
        const maps: Record<typeof u.kind, Map<string, unknown>> = {
          executor: state.executors,
          session: state.sessions,
          call: state.calls,
          preview: state.previews,
          turn: state.turns,
          interaction: state.interactions,
        };
        maps[u.kind].delete(u.id);
        if (u.kind === "call") state.output.delete(u.id);
        mark("all");
        break;
      }
    }
  }
}
