/**
 * Which requests a face served to browsers accepts by where they say they go and where they come
 * from: the `Host` a request names must be one the server serves (a page of another site whose
 * name resolves to 127.0.0.1, DNS rebinding, reaches nothing), and a write must come from the
 * face's own origin (a cross-site form or script is refused). The one rule of both, used by every
 * face that is served to a browser.
 *
 * Portable: web-standard APIs only.
 *
 * @module
 */

/** The host names a server on the loopback interface always answers to. */
export const LOOPBACK_HOSTS: readonly string[] = ["127.0.0.1", "localhost", "[::1]"];

/** The host names a server answers to: the loopback ones and `allowed` (without ports). */
export function servedHosts(allowed: readonly string[] = []): ReadonlySet<string> {
  return new Set([...LOOPBACK_HOSTS, ...allowed].map((name) => name.toLowerCase()));
}

/** A refusal of a request before any handler runs: its HTTP status and a plain message. */
export type HostRefusal = readonly [status: number, message: string];

/**
 * The URL a request names (RFC 9112 3.2: an absolute-form `target` wins over `host`, the `Host`
 * header), or why it is refused: a missing or malformed `Host` (400), a host that is not one of
 * `hosts` (421).
 */
export function requestedUrl(
  target: string,
  host: string | undefined,
  hosts: ReadonlySet<string>,
): URL | HostRefusal {
  let url: URL;
  try {
    if (/^https?:\/\//i.test(target)) url = new URL(target);
    else if (target.startsWith("/")) {
      if (!host) return [400, "a Host header is needed"];
      url = new URL(`http://${host}${target}`);
      // A Host the URL parser repaired (spaces, stray characters) is not the one sent.
      if (url.host !== host.toLowerCase()) return [400, "malformed Host header"];
    } else return [400, "malformed request target"];
  } catch {
    return [400, "malformed Host header or request target"];
  }
  if (!hosts.has(url.hostname)) return [421, `this server does not serve ${url.hostname}`];
  return url;
}

/**
 * Whether `request` names an `Origin` other than its own URL's: a write from another site. A
 * request with no `Origin` (not sent by a browser's script or form) is not cross-origin.
 */
export function isCrossOrigin(request: Request): boolean {
  const origin = request.headers.get("origin");
  return origin !== null && origin !== new URL(request.url).origin;
}

/** Whether `hostname` (as a URL spells it) cannot be a DNS name: a loopback name or an IP. */
function isAddressOrLoopback(hostname: string): boolean {
  return LOOPBACK_HOSTS.includes(hostname) || hostname.startsWith("[") ||
    /^\d{1,3}(\.\d{1,3}){3}$/.test(hostname);
}

/**
 * Whether `headers` are a browser's: it sends `Sec-Fetch-*` (every current one) and a
 * `User-Agent` starting `Mozilla/` (every one), and a page can change neither. A client library
 * may send an `Origin` of its own (Python's websocket-client sends its target's, which a proxy
 * that rewrites `Host` makes another), and is no browser.
 */
function fromBrowser(headers: Headers): boolean {
  return headers.has("sec-fetch-mode") || headers.has("sec-fetch-site") ||
    (headers.get("user-agent") ?? "").startsWith("Mozilla/");
}

/**
 * Why a request that a browser sent for a web page is refused by a face that is not served to
 * browsers (the executor's connect endpoint, artifact uploads, the token exchange), or
 * `undefined`. Browsers always send `Origin` on a WebSocket upgrade and a POST: a browser's
 * request from another origin is refused (403: cross-site WebSocket hijacking, or a form filling
 * the artifact store). When nothing authenticates the caller (a harness on loopback without
 * tokens), a browser's request must also name the server by address, never by a DNS name (421):
 * a page whose name was made to resolve to 127.0.0.1 (DNS rebinding) is of its own origin, and
 * would otherwise reach the harness as an executor. Executors and other clients that are no
 * browser are never refused here, whatever `Origin` they send.
 */
export function browserRefusal(
  request: Request,
  unauthenticated: boolean,
): HostRefusal | undefined {
  const origin = request.headers.get("origin");
  if (origin === null || !fromBrowser(request.headers)) return undefined;
  // The host the browser went to is the one it named (a server may build the URL from its own
  // address); the scheme is left out, as a proxy in front may have ended TLS.
  let target: URL;
  let from: URL;
  try {
    const host = request.headers.get("host");
    target = host === null ? new URL(request.url) : new URL(`http://${host}`);
    from = new URL(origin);
  } catch {
    return [403, "a request for a page of another origin"];
  }
  if (from.hostname !== target.hostname || from.port !== target.port) {
    return [403, "a request for a page of another origin"];
  }
  if (unauthenticated && !isAddressOrLoopback(target.hostname)) {
    return [421, `a browser's request for ${target.hostname}: name this server by its address`];
  }
  return undefined;
}
