/**
 * Checking against the contract: that a method is one of it, of the kind used, and that a value
 * (params, a result) is as the contract says, with the issues a refusal reports (`data.issues`
 * of a -32602 answer). Shared by the peer and its handler table.
 */
import { LocalError } from "./errors.ts";
import { METHOD_SPECS, type MethodSpec } from "./generated/contract.ts";
import { issueData, type IssueReport, parseBounded, type ValidationIssue } from "./issues.ts";

export type { ValidationIssue } from "./issues.ts";

/** The contract's spec of `method`; throws a {@linkcode LocalError} for another method or kind. */
export function requireSpec(method: string, kind: "request" | "notification"): MethodSpec {
  const spec = METHOD_SPECS.get(method);
  if (!spec) throw new LocalError(`${method} is not a method of the contract`);
  if (spec.kind !== kind) throw new LocalError(`${method} is a ${spec.kind}, not a ${kind}`);
  return spec;
}

/** What {@linkcode checked} returns for a value outside the contract: why, in bounded size. */
export class Refused {
  /** The first issues found (at most `MAX_REPORTED_ISSUES`, issues.ts). */
  readonly issues: ValidationIssue[];
  /** How many were found, and whether the search stopped before the end. */
  readonly report: IssueReport;
  constructor(issues: ValidationIssue[], report?: IssueReport) {
    this.issues = issues;
    this.report = report ?? { issues, count: issues.length, truncated: false };
  }

  /** The `data` of the -32602 answer: the first issues, their count, and `truncated`. */
  get data(): ReturnType<typeof issueData> {
    return issueData(this.report);
  }
}

/**
 * Checks a value against the contract: the generated predicate admits almost every valid value
 * as it is (nothing allocated); zod decides the rest, returning its data or why it refused
 * (found with bounded work: see issues.ts).
 */
export function checked(
  accepts: (value: unknown) => boolean,
  schema: MethodSpec["params"],
  value: unknown,
): unknown {
  if (accepts(value)) return value;
  const parsed = parseBounded(schema, value);
  return parsed.success ? parsed.data : new Refused(parsed.report.issues, parsed.report);
}
