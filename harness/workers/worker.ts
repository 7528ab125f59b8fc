/**
 * The Worker in front of the harness objects: the self-hosted token endpoint (http.md), the
 * executors' connect endpoint (authenticated before the upgrade, then routed to the object of
 * the token's environment or machine) and the brain API (bearer `BMA_BRAIN_TOKEN`, routed by
 * its path to the same objects).
 */
import { PROTOCOLS } from "../../protocol/generated/contract.ts";
import { bearerToken, type Principal } from "../principal.ts";
import {
  defaultRoute,
  type HarnessEnv,
  insecureNoAuth,
  resolveAuthenticate,
  resolveLogger,
  tokenIssuer,
  type WorkersHarnessOptions,
} from "./config.ts";
import { ADMITTED_HEADER, type AdmittedConnection, BRAIN_PREFIX, CONNECT_PATH } from "./object.ts";
import { storePrincipal } from "./store.ts";
import type { DurableObjectNamespaceLike, ExecutionContextLike } from "./types.ts";

/** The paths that accept an executor's WebSocket upgrade. */
export const CONNECT_PATHS: readonly string[] = ["/v1/executors/connect", "/"];
/** The prefix of the brain API: `/v1/harness/<route>/...`. */
export const BRAIN_API_PREFIX = "/v1/harness/";

/** A Worker's module export (`export default createHarnessWorker()`). */
export interface HarnessWorker {
  /** Handles a request to the Worker. */
  fetch(request: Request, env: HarnessEnv, ctx?: ExecutionContextLike): Promise<Response>;
}

const INTERNAL_ORIGIN = "https://harness.internal";
const encoder = new TextEncoder();

/** Builds the Worker's fetch handler. */
export function createHarnessWorker(options: WorkersHarnessOptions = {}): HarnessWorker {
  const route = options.route ?? defaultRoute;
  const bindingName = options.binding ?? "BMA_HARNESS";
  const logger = resolveLogger(options);

  const namespace = (env: HarnessEnv): DurableObjectNamespaceLike => {
    const binding = env[bindingName] as DurableObjectNamespaceLike | undefined;
    if (!binding || typeof binding.idFromName !== "function") {
      throw new Error(`the Durable Object binding ${bindingName} is missing`);
    }
    return binding;
  };
  const stub = (env: HarnessEnv, name: string) => {
    const ns = namespace(env);
    return ns.get(ns.idFromName(name));
  };

  const exchange = async (
    env: HarnessEnv,
    scope: "environment" | "machine",
    owner: string,
    request: Request,
  ): Promise<Response> => {
    const issuer = tokenIssuer(env, logger);
    if (!issuer) return json(404, { error: "not_found" });
    const match = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.get("authorization") ?? "");
    if (!match || !owner) return json(401, { error: "invalid_credential" });
    const issued = await issuer.exchange(scope, owner, match[1], new URL(request.url));
    if (!issued) {
      logger.info("token exchange refused", { scope, owner });
      return json(401, { error: "invalid_credential" });
    }
    return json(200, issued);
  };

  const connect = async (request: Request, env: HarnessEnv): Promise<Response> => {
    if (request.headers.get("upgrade")?.toLowerCase() !== "websocket") {
      return json(426, { error: "upgrade_required" });
    }
    const offered = (request.headers.get("sec-websocket-protocol") ?? "").split(",")
      .map((p) => p.trim()).filter(Boolean);
    const protocol = PROTOCOLS.find((p) => offered.includes(p));
    if (!protocol) return json(400, { error: "unsupported_subprotocol" });
    const authenticate = resolveAuthenticate(options, env, logger);
    const url = new URL(request.url);
    let principal: Principal = {};
    if (authenticate) {
      try {
        principal = await authenticate({
          kind: "connect",
          token: bearerToken(request.headers, url),
          url,
          headers: request.headers,
          protocols: offered,
        });
      } catch {
        logger.info("connection refused before upgrade", { path: url.pathname });
        return json(401, { error: "unauthorized" });
      }
    } else if (!insecureNoAuth(options, env)) {
      logger.error("no authenticate and no BMA_JWT_SECRET: refusing every connection");
      return json(401, { error: "unauthorized" });
    }
    const stored = storePrincipal(principal);
    if (stored.expiresAt !== undefined && stored.expiresAt <= Date.now()) {
      return json(401, { error: "unauthorized" });
    }
    const admitted: AdmittedConnection = { protocol, principal: stored };
    // A fresh request: nothing the client sent (its token included) reaches the object.
    return await stub(env, route(principal)).fetch(
      new Request(`${INTERNAL_ORIGIN}${CONNECT_PATH}`, {
        headers: { upgrade: "websocket", [ADMITTED_HEADER]: JSON.stringify(admitted) },
      }),
    );
  };

  const brain = async (request: Request, env: HarnessEnv, url: URL): Promise<Response> => {
    if (!await brainAuthorized(request, env)) return json(401, { error: "unauthorized" });
    const rest = url.pathname.slice(BRAIN_API_PREFIX.length).split("/");
    let name: string;
    let path: string[];
    if ((rest[0] === "environments" || rest[0] === "machines") && rest[1]) {
      name = `${rest[0]}/${decodeURIComponent(rest[1])}`;
      path = rest.slice(2);
    } else if (rest[0]) {
      name = decodeURIComponent(rest[0]);
      path = rest.slice(1);
    } else return json(404, { error: "not_found" });
    const init: RequestInit = {
      method: request.method,
      headers: { "content-type": "application/json" },
      ...(request.method === "GET" || request.method === "HEAD"
        ? {}
        : { body: await request.text() }),
    };
    return await stub(env, name).fetch(
      new Request(`${INTERNAL_ORIGIN}${BRAIN_PREFIX}/${path.join("/")}${url.search}`, init),
    );
  };

  return {
    async fetch(request: Request, env: HarnessEnv): Promise<Response> {
      const url = new URL(request.url);
      const path = url.pathname;
      try {
        if (request.method === "POST") {
          const machine = /^\/v1\/machines\/([^/]+)\/token$/.exec(path);
          if (machine) {
            return await exchange(env, "machine", decodeURIComponent(machine[1]), request);
          }
          const environment = /^\/v1\/environments\/([^/]+)\/token$/.exec(path);
          if (environment) {
            return await exchange(env, "environment", decodeURIComponent(environment[1]), request);
          }
          if (path === "/v1/executors/token") {
            let body: unknown;
            try {
              body = await request.clone().json();
            } catch {
              return json(400, { error: "bad_request" });
            }
            const id = (body as { environment_id?: unknown } | null)?.environment_id;
            if (typeof id !== "string" || id === "") return json(400, { error: "bad_request" });
            return await exchange(env, "environment", id, request);
          }
        }
        if (path.startsWith(BRAIN_API_PREFIX)) return await brain(request, env, url);
        if (request.method === "GET" && CONNECT_PATHS.includes(path)) {
          return await connect(request, env);
        }
        return json(404, { error: "not_found" });
      } catch (error) {
        logger.error("request failed", { path, error: String(error) });
        return json(500, { error: "internal_error" });
      }
    },
  };
}

/** Whether the request carries the brain token (compared as digests, in constant time). */
async function brainAuthorized(request: Request, env: HarnessEnv): Promise<boolean> {
  const expected = env.BMA_BRAIN_TOKEN;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.get("authorization") ?? "");
  if (typeof expected !== "string" || expected === "" || !match) return false;
  const [a, b] = await Promise.all([digest(match[1]), digest(expected)]);
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}

async function digest(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
}

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json" },
  });
}
