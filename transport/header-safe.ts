/**
 * What an `Authorization: Bearer` header can carry, as one rule for both ends: a credential
 * outside it (a space, a control character, a character beyond ASCII) could never be presented,
 * so the executor refuses it as an option and the harness as a configured credential.
 *
 * @module
 */

/** Whether `token` is one or more visible ASCII characters (what a header value carries whole). */
export function isHeaderSafe(token: string): boolean {
  return /^[\x21-\x7e]+$/.test(token);
}
