/**
 * Command-line arguments as the two CLIs (`bma-executor`, `bma-harness`) read them with
 * `parseArgs` from `node:util`. Pure string work without a runtime's name: only the CLIs read
 * command-line flags, so it lives beside them and not in the library's `protocol/`.
 *
 * @module
 */

import { REDACTED } from "../protocol/logger.ts";

/** The options of a `parseArgs` call, as far as this module reads them. */
export type ArgOptions = Readonly<
  Record<string, { readonly type: "string" | "boolean"; readonly multiple?: boolean }>
>;

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

/** The longest part of a rejected value a usage error quotes. */
const SHOWN_CHARS = 80;

/**
 * A rejected flag value as a usage error quotes it (in JSON quotes, control characters escaped):
 * without what in it may be a secret, whether or not it has a scheme — a query and a fragment
 * (`?token=…`, `#access_token=…`), and the user information before an `@` (`user:password@`).
 * What is left (scheme, host, path) is what the user needs to find the typo.
 */
export function shownValue(value: string): string {
  const shown = value
    .replace(/[?#][\s\S]*/, (rest) => `${rest[0]}${REDACTED}`)
    .replace(/^((?:[a-z][a-z0-9+.-]*:\/+)?)[^/]*@/i, `$1${REDACTED}@`);
  return JSON.stringify(
    shown.length > SHOWN_CHARS ? `${shown.slice(0, SHOWN_CHARS)}…` : shown,
  );
}

/**
 * The one line a usage error says of `parseArgs`'s `error` on `argv`. An argument that belongs
 * to no flag is not quoted but counted: it is most often a value whose flag was left out, a
 * credential as likely as anything (`parseArgs` quotes it whole).
 */
export function argvErrorLine(error: unknown, argv: readonly string[]): string {
  const message = (error as Error).message.split("\n")[0];
  // "Option '--drain-ms' argument is ambiguous." when a flag follows one that takes a value:
  // the value is most likely missing. The next word is not quoted (it may be a secret).
  const valueless = /^Option '(-[^' ]+)(?: <value>)?' argument (is ambiguous|missing)/.exec(
    message,
  );
  if (valueless) {
    const flag = valueless[1];
    return `${flag} is missing its value` +
      (valueless[2] === "is ambiguous"
        ? ` (a value that starts with "-" is written ${flag}=-…)`
        : "");
  }
  if ((error as { code?: unknown }).code !== "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL") {
    return message;
  }
  const quoted = /^Unexpected argument '([\s\S]*)'\./.exec(message)?.[1];
  const at = quoted === undefined ? -1 : argv.indexOf(quoted);
  const which = at < 0 ? "an argument" : `argument ${at + 1}`;
  return `${which} belongs to no flag (is its flag missing?): this command takes flags only`;
}

/**
 * The usage error of a flag that takes one value and was given twice, from `parseArgs`'s
 * `tokens`; undefined when there is none. `parseArgs` keeps the last value silently, where the
 * user meant one of them.
 */
export function repeatedFlagLine(
  tokens: readonly { readonly kind: string; readonly name?: string }[] | undefined,
  options: ArgOptions,
): string | undefined {
  const seen = new Set<string>();
  for (const token of tokens ?? []) {
    if (token.kind !== "option" || token.name === undefined) continue;
    const option = options[token.name];
    if (option?.type !== "string" || option.multiple) continue;
    if (seen.has(token.name)) return `--${token.name} is given more than once: give it once`;
    seen.add(token.name);
  }
  return undefined;
}
