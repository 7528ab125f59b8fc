/**
 * A JSON answer of the harness's HTTP side, the faces' and the protocol's endpoints alike.
 *
 * Portable: web-standard APIs only.
 *
 * @module
 */

/** A JSON answer that no cache keeps (`headers` added). */
export function jsonAnswer(
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: {
      "content-type": "application/json; charset=utf-8",
      "cache-control": "no-store",
      ...headers,
    },
  });
}
