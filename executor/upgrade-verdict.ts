/**
 * What the HTTP answer to the executor's WebSocket upgrade says about trying again: the one rule
 * the connection loop goes by (and with it every program on the client, the `bma-executor`
 * command included, which reads the error the client stops with).
 *
 * Retried, as the protocol's reconnect asks (exponential backoff and a fresh token): no answer at
 * all (a refused or reset connection, a timeout), 5xx (a harness restarting, standing by or
 * full answers 503), 408 and 429, and a 1xx that is not the upgrade. Refused for good: 401 and
 * 403 (the credential). Anything else is an answer no harness gives for its connect path — 404,
 * 405 or 410 (nothing is served there), a 2xx (a web page: no upgrade), a redirect (a WebSocket
 * client does not follow one), another 4xx — and asking again cannot change it.
 */

/** `retry`, `refused` (the credential), or `not_a_harness`. */
export type UpgradeVerdict = "retry" | "refused" | "not_a_harness";

/** The verdict on an upgrade answered with `status` (undefined: no HTTP answer). */
export function upgradeVerdict(status: number | undefined): UpgradeVerdict {
  if (status === undefined || status < 200) return "retry";
  if (status === 401 || status === 403) return "refused";
  if (status >= 500 || status === 408 || status === 429) return "retry";
  return "not_a_harness";
}
