/**
 * Typed tool slots: `client.tools.bash.handle(async (input, ctx) => ...)`, one slot per tool of
 * the contract's `x-tools` (bash, read, write, edit, glob, grep), and `client.tool(name)` for a
 * tool of your own. Only tools with a handler are advertised.
 */
import type { ToolMap, ToolName, ToolOutputChunk } from "../protocol/generated/contract.ts";
import { TOOL_NAMES, TOOL_SPECS } from "../protocol/generated/contract.ts";
import type { Disposable } from "../protocol/peer.ts";
import { ExecutorConfigError } from "./errors.ts";
import type { ExecutorSession } from "./sessions.ts";
import type { ToolOutput } from "./tool-results.ts";

/** A progress report of a running call (sent as `tool.progress`, lossy). */
export interface ToolProgressUpdate {
  /** Human-readable progress message. */
  message?: string;
  /** Progress so far (increasing). */
  progress?: number;
  /** Total, when known. */
  total?: number;
  /** A chunk of live output. */
  output?: ToolOutputChunk;
}

/** What a tool handler is told besides its input. */
export interface ToolContext {
  /** The call's session. */
  readonly sessionId: string;
  /** The call's id (the idempotency key). */
  readonly toolCallId: string;
  /** The tool's name. */
  readonly tool: string;
  /** The session the call runs in. */
  readonly session: ExecutorSession;
  /** `timeout_ms` of the call, when the harness set one (the client enforces it). */
  readonly timeoutMs: number | undefined;
  /**
   * Aborted when the call is canceled (`tool.cancel`), times out, its session stops, or the
   * client stops. Kill what the handler started when it fires.
   */
  readonly signal: AbortSignal;
  /** Reports progress (`tool.progress`); dropped while disconnected or after the call ended. */
  progress(update: string | ToolProgressUpdate): void;
}

/** Serves one tool. Return the result, or throw `ToolError` for a tool-level error. */
export type ToolHandler<I, R> = (
  input: I,
  context: ToolContext,
) => ToolOutput<R> | Promise<ToolOutput<R>>;

/** The slot of one tool. */
export interface ToolSlot<I, R> {
  /** The tool's name. */
  readonly name: string;
  /** The capability group of a built-in tool (`shell`, `files`); undefined for your own tools. */
  readonly group: string | undefined;
  /** Whether a handler is registered. */
  readonly handled: boolean;
  /**
   * Serves the tool with `handler`, replacing any previous one. Disposing the registration
   * withdraws the tool. After `start()`, the change is published with
   * `executor.capabilities.update`.
   */
  handle(handler: ToolHandler<I, R>): Disposable;
}

/** The typed slots of the built-in tools. */
export type ToolSlots = {
  readonly [K in ToolName]: ToolSlot<ToolMap[K]["input"], ToolMap[K]["result"]>;
};

/** A handler as stored, untyped. */
export type AnyToolHandler = ToolHandler<any, unknown>;

class Slot implements ToolSlot<any, unknown> {
  readonly name: string;
  readonly group: string | undefined;
  handler: AnyToolHandler | undefined;
  readonly #changed: () => void;
  constructor(name: string, changed: () => void) {
    this.name = name;
    this.group = TOOL_SPECS.get(name)?.group;
    this.#changed = changed;
  }
  get handled(): boolean {
    return this.handler !== undefined;
  }
  handle(handler: AnyToolHandler): Disposable {
    if (typeof handler !== "function") {
      throw new ExecutorConfigError(`the handler of tool ${this.name} is not a function`);
    }
    this.handler = handler;
    this.#changed();
    return {
      dispose: () => {
        if (this.handler !== handler) return;
        this.handler = undefined;
        this.#changed();
      },
    };
  }
}

/** Every tool slot of one client. */
export class ToolRegistry {
  /** The built-in slots. */
  readonly slots: ToolSlots;
  readonly #all = new Map<string, Slot>();
  readonly #changed: () => void;

  constructor(changed: () => void) {
    this.#changed = changed;
    const slots: Record<string, Slot> = {};
    for (const name of TOOL_NAMES) slots[name] = this.#slot(name);
    this.slots = Object.freeze(slots) as unknown as ToolSlots;
  }

  /** The slot of any tool, built-in or your own. */
  slot(name: string): ToolSlot<Record<string, unknown>, unknown> {
    if (typeof name !== "string" || name.length === 0) {
      throw new ExecutorConfigError("a tool name must be a non-empty string");
    }
    return this.#slot(name);
  }

  /** The handler of `name`, if any. */
  handler(name: string): AnyToolHandler | undefined {
    return this.#all.get(name)?.handler;
  }

  /** Names of the tools that have a handler, built-ins first. */
  served(): string[] {
    return [...this.#all.values()].filter((s) => s.handled).map((s) => s.name);
  }

  #slot(name: string): Slot {
    let slot = this.#all.get(name);
    if (!slot) {
      slot = new Slot(name, this.#changed);
      this.#all.set(name, slot);
    }
    return slot;
  }
}
