/**
 * Command-line arguments as the two CLIs (`bma-executor`, `bma-harness`) read them with
 * `parseArgs` from `node:util`. Pure string work without a runtime's name: only the CLIs read
 * command-line flags, so it lives beside them and not in the library's `protocol/`.
 *
 * @module
 */

/** The options of a `parseArgs` call, as far as this module reads them. */
export type ArgOptions = Readonly<Record<string, { readonly type: "string" | "boolean" }>>;

/**
 * The options of a `parseArgs` call, from their names: the flags that take a value (`values`),
 * those that take one and may repeat (`lists`), and the switches.
 */
export function argOptions<
  V extends string = never,
  L extends string = never,
  S extends string = never,
>(names: { values?: readonly V[]; lists?: readonly L[]; switches?: readonly S[] }):
  & { readonly [K in V]: { readonly type: "string" } }
  & { readonly [K in L]: { readonly type: "string"; readonly multiple: true } }
  & { readonly [K in S]: { readonly type: "boolean" } } {
  const options: Record<string, { type: "string" | "boolean"; multiple?: true }> = {};
  for (const name of names.values ?? []) options[name] = { type: "string" };
  for (const name of names.lists ?? []) options[name] = { type: "string", multiple: true };
  for (const name of names.switches ?? []) options[name] = { type: "boolean" };
  // deno-lint-ignore no-explicit-any
  return options as any;
}

/**
 * `--flag -5` as `--flag=-5`: parseArgs refuses a value that starts with a dash as ambiguous,
 * where the flag's own check says what it takes.
 */
export function negativeValues(argv: readonly string[], options: ArgOptions): string[] {
  const valued = new Set(
    Object.entries(options).filter(([, o]) => o.type === "string").map(([name]) => `--${name}`),
  );
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--") return [...out, ...argv.slice(i)];
    if (valued.has(argv[i]) && /^-\d/.test(argv[i + 1] ?? "")) out.push(`${argv[i]}=${argv[++i]}`);
    else out.push(argv[i]);
  }
  return out;
}
