/** Ids of the agent capability: deterministic approval ids (random ones come from `protocol/ids.ts`). */
import { hex } from "../protocol/ids.ts";

/** `appr_` + 24 lower-case hex digits: an interaction id the platform adopts as its own. */
export const APPROVAL_ID_PATTERN: RegExp = /^appr_[0-9a-f]{24}$/;

/** Whether `id` is a deterministic approval id (`appr_` + 24 lower-case hex digits). */
export function isApprovalId(id: string): boolean {
  return APPROVAL_ID_PATTERN.test(id);
}

/**
 * A deterministic approval id from `parts` (e.g. the session id, the tool and its input): the
 * first 24 hex digits of SHA-256 over the parts joined by NUL. The same parts give the same id
 * after an executor restart, so a repeated approval names the same platform interaction
 * instead of opening a second card.
 */
export async function approvalId(...parts: string[]): Promise<string> {
  const bytes = new TextEncoder().encode(parts.join("\u0000"));
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return `appr_${hex(digest).slice(0, 24)}`;
}
