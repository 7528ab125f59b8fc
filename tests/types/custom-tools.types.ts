/**
 * Type test of `client.tool(name, { description, input, output }, handler)`: the handler's
 * input type is inferred from the input schema, its return type from the output schema, and
 * misuse does not compile. Checked by the compiler, never run: `npm run check` (tsc, deno
 * check) and `tests/types/types.test.ts` on every runtime. Each `@ts-expect-error` marks an
 * error the compiler must report (an unused one fails the check), and `Expect<Equal<...>>`
 * fails unless the inferred type is exactly the one stated (`any` included).
 */
import * as z from "zod";
import * as zm from "zod/mini";
import {
  type Disposable,
  type ExecutorClient,
  type ToolContext,
  ToolError,
  ToolResult,
} from "../../executor/mod.ts";

/** True when A and B are the same type (not merely assignable either way). */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true
  : false;
/** Compiles only for `true`. */
type Expect<T extends true> = T;

export function customTools(client: ExecutorClient): Disposable[] {
  const input = z.object({
    city: z.string().min(1),
    days: z.int().min(1).default(1),
    unit: z.enum(["c", "f"]).optional(),
  });
  const output = z.object({ celsius: z.number(), summary: z.string() });

  const weather = client.tool("weather", {
    description: "Current weather of a city",
    input,
    output,
  }, (args, context) => {
    // The handler gets the parsed input: `days` has its default, so it is never undefined.
    type _input = Expect<
      Equal<typeof args, { city: string; days: number; unit?: "c" | "f" | undefined }>
    >;
    type _context = Expect<Equal<typeof context, ToolContext>>;
    // @ts-expect-error: no member `country` in the input schema
    void args.country;
    // @ts-expect-error: `city` is a string
    const n: number = args.city;
    void n;
    if (args.days > 14) throw new ToolError("at most 14 days");
    return { celsius: 21.5, summary: `${args.city}: sunny` };
  });

  // The return type is the output schema's: a wrong member type does not compile.
  const wrongResult = client.tool(
    "weather_wrong",
    { description: "", input, output },
    // @ts-expect-error: `celsius` must be a number
    () => ({ celsius: "warm", summary: "" }),
  );

  // ... nor does a missing member.
  const missing = client.tool(
    "weather_missing",
    { description: "", input, output },
    // @ts-expect-error: `summary` is required by the output schema
    () => ({ celsius: 1 }),
  );

  // A ToolResult (content blocks, artifacts, is_error) is accepted beside the typed value.
  const full = client.tool(
    "weather_full",
    { description: "", input, output },
    () =>
      Promise.resolve(
        new ToolResult({ content: "ok", structuredContent: { celsius: 1, summary: "ok" } }),
      ),
  );

  // Without an output schema, anything a tool handler returns goes.
  const free = client.tool("echo", {
    description: "Echoes its text",
    input: z.object({ text: z.string() }),
  }, ({ text }) => {
    type _text = Expect<Equal<typeof text, string>>;
    return text;
  });

  // zod/mini schemas type the handler alike.
  const mini = client.tool("mini", {
    description: "",
    input: zm.object({ n: zm.number() }),
  }, (args) => {
    type _mini = Expect<Equal<typeof args, { n: number }>>;
    return String(args.n);
  });

  // Tool input is an object: another schema does not compile.
  // @ts-expect-error: a string schema is no tool input
  const notObject = client.tool("bad", { description: "", input: z.string() }, () => "");

  // The untyped slot of the old form is still there.
  const slot = client.tool("legacy");
  type _slot = Expect<
    Equal<Parameters<Parameters<typeof slot.handle>[0]>[0], Record<string, unknown>>
  >;
  const legacy = slot.handle((args) => String(args.anything));

  // Built-in slots keep their contract types.
  const bash = client.tools.bash.handle((args) => {
    type _bash = Expect<Equal<typeof args.command, string>>;
    return { stdout: "", stderr: "", exit_code: 0 };
  });

  return [weather, wrongResult, missing, full, free, mini, notObject, legacy, bash];
}
