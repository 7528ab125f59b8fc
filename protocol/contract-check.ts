/**
 * Checking against the contract: that a method is one of it, of the kind used, and that a value
 * (params, a result) is as the contract says, with the issues a refusal reports (`data.issues`
 * of a -32602 answer). Shared by the peer and its handler table.
 */
import { LocalError } from "./errors.ts";
import { METHOD_SPECS, type MethodSpec } from "./generated/contract.ts";

/** The contract's spec of `method`; throws a {@linkcode LocalError} for another method or kind. */
export function requireSpec(method: string, kind: "request" | "notification"): MethodSpec {
  const spec = METHOD_SPECS.get(method);
  if (!spec) throw new LocalError(`${method} is not a method of the contract`);
  if (spec.kind !== kind) throw new LocalError(`${method} is a ${spec.kind}, not a ${kind}`);
  return spec;
}

/** What {@linkcode checked} returns for a value outside the contract: why. */
export class Refused {
  readonly issues: ValidationIssue[];
  constructor(issues: ValidationIssue[]) {
    this.issues = issues;
  }
}

/**
 * Checks a value against the contract: the generated predicate admits almost every valid value
 * as it is (nothing allocated); zod decides the rest, returning its data or why it refused.
 */
export function checked(
  accepts: (value: unknown) => boolean,
  schema: MethodSpec["params"],
  value: unknown,
): unknown {
  if (accepts(value)) return value;
  const parsed = schema.safeParse(value);
  return parsed.success ? parsed.data : new Refused(toIssues(parsed.error));
}

/** Issues as sent in `data.issues` of a -32602 answer. */
export interface ValidationIssue {
  /** Where in the params: member names and array indexes. */
  path: (string | number)[];
  /** What is wrong there. */
  message: string;
  /** The kind of issue (zod's code). */
  code: string;
}

function toIssues(
  error: { issues: readonly { path: PropertyKey[]; message: string; code: string }[] },
): ValidationIssue[] {
  return error.issues.map((i) => ({
    path: i.path.map((p) => (typeof p === "symbol" ? String(p) : p)),
    message: i.message,
    code: i.code,
  }));
}
