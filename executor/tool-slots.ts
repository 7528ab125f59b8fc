/**
 * Typed tool slots: `client.tools.bash.handle(async (input, ctx) => ...)`, one slot per tool of
 * the contract's `x-tools` (bash, read, write, edit, glob, grep); `client.tool(name, { description,
 * input, output }, handler)` for a tool of your own, defined by zod schemas (advertised as JSON
 * Schema, checked on every call, and the handler's types inferred from them); and the untyped
 * `client.tool(name)` slot. Only tools with a handler are advertised.
 */
import * as z from "zod";
import type * as zc from "zod/v4/core";
import type {
  ToolDefinition,
  ToolMap,
  ToolName,
  ToolOutputChunk,
} from "../protocol/generated/contract.ts";
import { TOOL_NAMES, TOOL_SPECS } from "../protocol/generated/contract.ts";
import type { Disposable } from "../protocol/peer.ts";
import type { TraceContext } from "../protocol/trace-context.ts";
import { InvalidParamsError } from "../protocol/generated/errors.ts";
import { boundedIssues, issueData, reportOf } from "../protocol/issues.ts";
import { ExecutorConfigError } from "./errors.ts";
import type { ExecutorSession } from "./sessions.ts";
import { InvalidToolOutputError, type ToolOutput, ToolResult } from "./tool-results.ts";

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
   * The call's W3C trace context: the one `tool.call` carried (`params._meta`), or with the
   * client's `telemetry` the context of its server span (a child of that one). The built-in
   * `bash` tool passes it to the command as `TRACEPARENT` / `TRACESTATE`; `undefined` when the
   * call carried none (or an invalid one) and there is no span.
   */
  readonly trace: TraceContext | undefined;
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
   * What is advertised of a tool of your own registered with its schemas
   * (`capabilities.tool_definitions[name]`); undefined otherwise.
   */
  readonly definition: ToolDefinition | undefined;
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

/** A zod schema of a tool's input: an object (`z.object({...})`, zod or zod/mini). */
export type ToolInputSchema = zc.$ZodType<Record<string, unknown>, Record<string, unknown>>;

/** A zod schema of a tool's typed result (`structured_content`): an object. */
export type ToolOutputSchema = zc.$ZodType<Record<string, unknown>, Record<string, unknown>>;

/** A tool of your own, defined by its schemas: `client.tool(name, definition, handler)`. */
export interface TypedToolDefinition<
  I extends ToolInputSchema,
  O extends ToolOutputSchema | undefined,
> {
  /** What the tool does, for the model choosing it (advertised). */
  description: string;
  /**
   * The input's schema. Advertised as JSON Schema (`z.toJSONSchema`, the input side); a call
   * whose input it refuses is answered -32602 before the ack and the handler never runs. The
   * handler receives the parsed input (defaults applied, unknown members stripped as the schema
   * says).
   */
  input: I;
  /**
   * The typed result's schema. Advertised as JSON Schema; what the handler returns is parsed
   * with it and sent as `structured_content` (a result it refuses ends the call `failed`, code
   * `invalid_result`).
   */
  output?: O;
}

/**
 * What the handler of a tool of your own returns: with an `output` schema, a value of it (or a
 * {@linkcode ToolResult} whose `structuredContent` is one, or which `isError`); without, anything
 * a tool handler may return.
 */
export type TypedToolOutput<O extends ToolOutputSchema | undefined> = [O] extends [ToolOutputSchema]
  ? zc.input<O> | ToolResult
  : ToolOutput<unknown>;

/** Serves a tool of your own: `input` is typed by the definition's `input` schema. */
export type TypedToolHandler<
  I extends ToolInputSchema,
  O extends ToolOutputSchema | undefined,
> = (
  input: zc.output<I>,
  context: ToolContext,
) => TypedToolOutput<O> | Promise<TypedToolOutput<O>>;

/** A handler as stored, untyped. */
export type AnyToolHandler = ToolHandler<any, unknown>;

/**
 * A served tool as the call runner sees it: its handler and, for a tool of your own defined by
 * schemas, the schemas that check its input and result.
 */
export interface ServedTool {
  readonly handler: AnyToolHandler;
  /** Checks (and parses) the input before the ack; absent: built-ins (the contract checks). */
  readonly input: zc.$ZodType | undefined;
  /** Checks (and parses) the handler's result; absent: rendered as returned. */
  readonly output: zc.$ZodType | undefined;
  /** What `capabilities.tool_definitions` advertises. */
  readonly definition: ToolDefinition | undefined;
}

class Slot implements ToolSlot<any, unknown> {
  readonly name: string;
  readonly group: string | undefined;
  served: ServedTool | undefined;
  readonly #changed: () => void;
  constructor(name: string, changed: () => void) {
    this.name = name;
    this.group = TOOL_SPECS.get(name)?.group;
    this.#changed = changed;
  }
  get handled(): boolean {
    return this.served !== undefined;
  }
  get definition(): ToolDefinition | undefined {
    return this.served?.definition;
  }
  handle(handler: AnyToolHandler): Disposable {
    if (typeof handler !== "function") {
      throw new ExecutorConfigError(`the handler of tool ${this.name} is not a function`);
    }
    return this.serve({ handler, input: undefined, output: undefined, definition: undefined });
  }
  /** Serves the tool as `served`, replacing any previous handler and definition. */
  serve(served: ServedTool): Disposable {
    this.served = served;
    this.#changed();
    return {
      dispose: () => {
        if (this.served !== served) return;
        this.served = undefined;
        this.#changed();
      },
    };
  }
}

/** Whether `value` is a zod schema (zod 4 or zod/mini: both carry `_zod`). */
function isZodSchema(value: unknown): value is zc.$ZodType {
  return typeof value === "object" && value !== null && "_zod" in value;
}

/** A schema's JSON Schema (`io` side), which must describe an object. */
function jsonSchemaOf(
  tool: string,
  member: "input" | "output",
  schema: zc.$ZodType,
): Record<string, unknown> {
  let json: Record<string, unknown>;
  try {
    json = z.toJSONSchema(schema, { io: member }) as Record<string, unknown>;
  } catch (error) {
    throw new ExecutorConfigError(
      `the ${member} schema of tool ${tool} has no JSON Schema (${
        error instanceof Error ? error.message : String(error)
      }): tool input and results travel as JSON`,
    );
  }
  if (json.type !== undefined && json.type !== "object") {
    throw new ExecutorConfigError(`the ${member} schema of tool ${tool} is not an object schema`);
  }
  return json;
}

/** Checks a definition and derives what is served and advertised from it. */
function defineTool(name: string, definition: unknown, handler: unknown): ServedTool {
  if (TOOL_SPECS.has(name)) {
    throw new ExecutorConfigError(
      `${name} is a built-in tool with the contract's schemas: serve it with client.tools.${name}`,
    );
  }
  const d = definition as Partial<TypedToolDefinition<ToolInputSchema, ToolOutputSchema>>;
  if (typeof d !== "object" || d === null) {
    throw new ExecutorConfigError(`tool ${name} needs a definition { description, input }`);
  }
  if (typeof d.description !== "string") {
    throw new ExecutorConfigError(`the description of tool ${name} is not a string`);
  }
  if (!isZodSchema(d.input)) {
    throw new ExecutorConfigError(`the input of tool ${name} is not a zod schema`);
  }
  if (d.output !== undefined && !isZodSchema(d.output)) {
    throw new ExecutorConfigError(`the output of tool ${name} is not a zod schema`);
  }
  if (typeof handler !== "function") {
    throw new ExecutorConfigError(`the handler of tool ${name} is not a function`);
  }
  const advertised: ToolDefinition = {
    description: d.description,
    input_schema: jsonSchemaOf(name, "input", d.input),
  };
  if (d.output !== undefined) advertised.output_schema = jsonSchemaOf(name, "output", d.output);
  return {
    handler: handler as AnyToolHandler,
    input: d.input,
    output: d.output,
    definition: advertised,
  };
}

/** Every tool slot of one client. */
export class ToolRegistry {
  /** The built-in slots. */
  readonly slots: ToolSlots;
  readonly #all = new Map<string, Slot>();
  readonly #changed: () => void;
  /** The capability groups configured `enabled: false`: their tools are not served. */
  readonly #disabled: ReadonlySet<string>;

  /**
   * `changed` is told when a tool is served or withdrawn; `configured`: the client's
   * `capabilities` option, whose groups configured `enabled: false` serve no tool.
   */
  constructor(changed: () => void, configured?: Readonly<Record<string, unknown>>) {
    this.#changed = changed;
    this.#disabled = new Set(
      Object.entries(configured ?? {})
        .filter(([, group]) => (group as { enabled?: unknown } | undefined)?.enabled === false)
        .map(([name]) => name),
    );
    const slots: Record<string, Slot> = {};
    for (const name of TOOL_NAMES) slots[name] = this.#slot(name);
    this.slots = Object.freeze(slots) as unknown as ToolSlots;
  }

  /** The slot of any tool, built-in or your own. */
  slot(name: string): ToolSlot<Record<string, unknown>, unknown> {
    checkName(name);
    return this.#slot(name);
  }

  /** Serves a tool of your own defined by its schemas, replacing any previous handler. */
  define(name: string, definition: unknown, handler: unknown): Disposable {
    checkName(name);
    const served = defineTool(name, definition, handler);
    return this.#slot(name).serve(served);
  }

  /** How `name` is served, unless it is not, or its group is configured `enabled: false`. */
  servedTool(name: string): ServedTool | undefined {
    const slot = this.#all.get(name);
    if (slot?.group !== undefined && this.#disabled.has(slot.group)) return undefined;
    return slot?.served;
  }

  /** Names of the tools that have a handler, built-ins first. */
  served(): string[] {
    return [...this.#all.values()].filter((s) => s.handled).map((s) => s.name);
  }

  /** The definitions of the served tools of your own that have one, by name. */
  definitions(): Map<string, ToolDefinition> {
    const out = new Map<string, ToolDefinition>();
    for (const slot of this.#all.values()) {
      const definition = slot.served?.definition;
      if (definition) out.set(slot.name, definition);
    }
    return out;
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

function checkName(name: unknown): asserts name is string {
  if (typeof name !== "string" || name.length === 0) {
    throw new ExecutorConfigError("a tool name must be a non-empty string");
  }
}

/**
 * A tool's input parsed by its schema, or the refusal a built-in tool's invalid input gets from
 * the peer: -32602 with the issues, their paths into the params (`["input", ...]`). A valid input
 * is parsed once; a refused one is reported from the bounded walk (issues.ts), never from the
 * parse's error, which would finalize every issue of a wide input.
 */
export function checkedInput(schema: zc.$ZodType, input: unknown): unknown {
  const parsed = z.safeParse(schema, input);
  if (parsed.success) return parsed.data;
  throw new InvalidParamsError(
    "invalid params",
    issueData(reportOf(boundedIssues(schema, input), ["input"])),
  );
}

/**
 * What a handler of a tool with an output schema returned, with its typed result parsed by the
 * schema: a value of it, or a `ToolResult` carrying one in `structuredContent` (none needed when
 * `isError`). Throws {@linkcode InvalidToolOutputError}.
 */
export function checkedOutput(tool: string, schema: zc.$ZodType, value: unknown): unknown {
  if (value instanceof ToolResult) {
    if (value.isError && value.structuredContent === undefined) return value;
    return new ToolResult({
      content: value.content,
      isError: value.isError,
      artifacts: value.artifacts,
      structuredContent: parsedOutput(tool, schema, value.structuredContent),
    });
  }
  return parsedOutput(tool, schema, value);
}

function parsedOutput(tool: string, schema: zc.$ZodType, value: unknown): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new InvalidToolOutputError(
      `the ${tool} handler returned no structured result for its output schema`,
    );
  }
  const parsed = z.safeParse(schema, value);
  if (parsed.success) return parsed.data as Record<string, unknown>;
  const issues = parsed.error.issues.slice(0, 5).map((issue) =>
    `${issue.path.length ? `/${issue.path.map(String).join("/")}` : "(result)"}: ${issue.message}`
  );
  throw new InvalidToolOutputError(
    `the ${tool} handler returned a result its output schema refuses (${issues.join("; ")})`,
  );
}
