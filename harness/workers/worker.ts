/**
 * The Worker in front of the harness objects: it only picks the object a request belongs to
 * and forwards the request there, where the harness decides everything — the token endpoint
 * (http.md), executors' WebSocket upgrades (authenticated before the upgrade) and the brain
 * API (`/v1/harness/<object name>/...`).
 */
import { jsonAnswer } from "../../http/shared/json-answer.ts";
import { base64UrlDecode } from "../../http/token-endpoint/jwt.ts";
import { bearerToken } from "../principal.ts";
import type { HarnessEnv } from "./config.ts";
import { BRAIN_PATH } from "./object.ts";
import type { DurableObjectNamespaceLike } from "./types.ts";

/** The prefix of the brain API: `/v1/harness/<object name>/<route>`. */
export const BRAIN_API_PREFIX = "/v1/harness/";

/** A Worker's module export (`export default createHarnessWorker()`). */
export interface HarnessWorker {
  /** Handles a request to the Worker. */
  fetch(request: Request, env: HarnessEnv): Promise<Response>;
}

/** Options of {@linkcode createHarnessWorker}. */
export interface HarnessWorkerOptions {
  /** The env binding of the Durable Object namespace. Default `BMA_HARNESS`. */
  binding?: string;
  /**
   * The name of the object an executor's upgrade goes to. Default {@linkcode routeOfToken}:
   * `environments/<id>` or `machines/<id>` from the claims of the bearer JWT (read, not
   * verified: the object verifies it), else `default`. Give your own for other tokens.
   */
  route?: (request: Request, env: HarnessEnv) => string | Promise<string>;
}

/** Builds the Worker's fetch handler. */
export function createHarnessWorker(options: HarnessWorkerOptions = {}): HarnessWorker {
  const route = options.route ?? routeOfToken;
  const bindingName = options.binding ?? "BMA_HARNESS";
  const forward = (env: HarnessEnv, name: string, request: Request) => {
    const namespace = env[bindingName] as DurableObjectNamespaceLike | undefined;
    if (!namespace || typeof namespace.idFromName !== "function") {
      throw new Error(`the Durable Object binding ${bindingName} is missing`);
    }
    return namespace.get(namespace.idFromName(name)).fetch(request);
  };
  return {
    async fetch(request, env) {
      const url = new URL(request.url);
      const path = url.pathname;
      const token = /^\/v1\/(environments|machines)\/([^/]+)\/token$/.exec(path);
      if (token) {
        const owner = segment(token[2]);
        // http.md's answer to a malformed request (a bad percent-escape), never a 500.
        if (owner === undefined) return jsonAnswer(400, { error: "bad_request" });
        return await forward(env, `${token[1]}/${owner}`, request);
      }
      if (path === "/v1/executors/token") {
        const body = await request.clone().json().catch(() => undefined) as
          | { environment_id?: unknown }
          | undefined;
        const id = typeof body?.environment_id === "string" ? body.environment_id : "";
        return await forward(env, id ? `environments/${id}` : "default", request);
      }
      if (path.startsWith(BRAIN_API_PREFIX)) {
        const rest = path.slice(BRAIN_API_PREFIX.length).split("/");
        const scoped = (rest[0] === "environments" || rest[0] === "machines") && rest[1];
        const owner = segment(scoped ? rest[1] : rest[0]);
        if (!owner) return jsonAnswer(404, { error: "not_found" });
        const name = scoped ? `${rest[0]}/${owner}` : owner;
        url.pathname = `${BRAIN_PATH}/${rest.slice(scoped ? 2 : 1).join("/")}`;
        return await forward(env, name, new Request(url, request));
      }
      return await forward(env, await route(request, env), request);
    },
  };
}

/** A path segment decoded; `undefined` for a bad percent-escape (`%ZZ`). */
function segment(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

/**
 * The object of an executor's connection: `environments/<env>` or `machines/<mid>` from the
 * claims of its bearer JWT (the token endpoint's), else `default`. The token is only read
 * here; the object's harness verifies it, so a forged claim reaches an object that refuses it.
 */
export function routeOfToken(request: Request): string {
  const token = bearerToken(request.headers, new URL(request.url));
  const payload = token?.split(".")[1];
  const bytes = payload ? base64UrlDecode(payload) : undefined;
  if (!bytes) return "default";
  try {
    const claims = JSON.parse(new TextDecoder().decode(bytes)) as Record<string, unknown>;
    if (claims.scope === "machine" && typeof claims.mid === "string" && claims.mid) {
      return `machines/${claims.mid}`;
    }
    if (claims.scope === "environment" && typeof claims.env === "string" && claims.env) {
      return `environments/${claims.env}`;
    }
  } catch {
    // Not a JWT of the token endpoint.
  }
  return "default";
}
