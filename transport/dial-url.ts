/**
 * Which URLs this SDK's dialers open, as one rule for every runtime: a URL outside it is refused
 * before any socket is opened, with a cause the executor's connection loop takes as final (no
 * retry makes `"not a url"` or `ftp://…` dialable).
 */
import { LocalError } from "../protocol/errors.ts";
import { isLocalSocketUrl } from "./server.ts";
import { DialError } from "./transport.ts";

/** The URL schemes the runtime dialers open besides local sockets (`ws:` and `http:` alike). */
const DIALABLE_SCHEMES: ReadonlySet<string> = new Set(["ws:", "wss:", "http:", "https:"]);

/**
 * A dial of something no dialer of this runtime opens: not a URL, another scheme, or a local
 * socket where there are none (a Worker). The URL itself is not in the message (it may carry a
 * token).
 */
export class UnsupportedUrlError extends LocalError {
  /** The URL's scheme (`ftp:`), or undefined when it is no URL at all. */
  readonly scheme: string | undefined;
  /** Why the URL cannot be dialed; `scheme` when it has one. */
  constructor(message: string, scheme?: string) {
    super(message);
    this.name = "UnsupportedUrlError";
    this.scheme = scheme;
  }
}

/**
 * The dial of `url` refused up front when no dialer opens it: a {@linkcode DialError} whose
 * `cause` is an {@linkcode UnsupportedUrlError}. Undefined when the dial may go ahead.
 * `localSockets: false` refuses `unix:` and named pipes too.
 */
export function unsupportedDialUrl(
  url: unknown,
  options: { localSockets: boolean } = { localSockets: true },
): DialError | undefined {
  const refusal = urlRefusal(url, options.localSockets);
  return refusal && new DialError(refusal.message, undefined, { cause: refusal });
}

function urlRefusal(url: unknown, localSockets: boolean): UnsupportedUrlError | undefined {
  if (typeof url !== "string") return new UnsupportedUrlError("cannot dial: the URL is no string");
  if (isLocalSocketUrl(url)) {
    return localSockets
      ? undefined
      : new UnsupportedUrlError("cannot dial a Unix socket or pipe here");
  }
  let scheme: string;
  try {
    scheme = new URL(url).protocol;
  } catch {
    return new UnsupportedUrlError("cannot dial: not a URL");
  }
  if (DIALABLE_SCHEMES.has(scheme)) return undefined;
  return new UnsupportedUrlError(
    `cannot dial ${scheme} URLs (ws:, wss:, http:, https:, unix:)`,
    scheme,
  );
}

/** Whether `host` (a URL's `hostname`, or a listen address) is this machine's loopback. */
export function isLoopbackHost(host: string): boolean {
  return host === "localhost" || host === "::1" || host === "[::1]" || /^127\./.test(host);
}

/**
 * Whether `url` travels unencrypted to another machine (`http:` or `ws:` to a host that is not
 * loopback): what is sent there, a credential included, can be read on the way.
 */
export function sentInTheClear(url: string): boolean {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  return (parsed.protocol === "http:" || parsed.protocol === "ws:") &&
    !isLoopbackHost(parsed.hostname);
}
