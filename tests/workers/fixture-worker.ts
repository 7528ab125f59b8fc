/**
 * The Worker the edge tests run in workerd: the example's `createHarnessWorker()` and a
 * `HarnessObject` subclass with a brain inside it — the conformance suite's own harness agent
 * (`tests/conformance/harness-agent.ts`), driving the object's `Harness` through the same
 * `Harness` / `Session` API it drives on Node. Tests reach that brain at
 * `POST /_driver/<object name>/<method>` with the method's arguments as a JSON array;
 * `GET /_driver/<object name>/instance` names the object's in-memory incarnation (a new one
 * after each eviction). With `?detach` a method's outcome is awaited by the brain alone (no
 * request stays open, so the object may be evicted meanwhile). `POST /_evict/<object name>`
 * has workerd evict the object now (`evictNow`).
 */
import { AgentPlatform } from "../../agent/mod.ts";
import type { Harness } from "../../harness/mod.ts";
import {
  createHarnessWorker,
  type DurableObjectNamespaceLike,
  type DurableObjectStateLike,
  type HarnessEnv,
  HarnessObject,
  harnessOptionsFromEnv,
} from "../../harness/workers/mod.ts";
import { HarnessAgent } from "../conformance/harness-agent.ts";
import { evictNow } from "../helpers/workerd-eviction.ts";

const DRIVER = "/_driver/";
const EVICT = "/_evict/";

/** The object with the conformance harness agent as its brain. */
export class TestHarnessObject extends HarnessObject {
  readonly #instance = crypto.randomUUID();
  readonly #driver: Promise<HarnessAgent>;
  #h = "";

  constructor(ctx: DurableObjectStateLike, env: HarnessEnv) {
    const platform = new AgentPlatform();
    let held: Harness | undefined;
    super(ctx, env, {
      ...harnessOptionsFromEnv(env),
      agent: platform,
      brain: (harness) => (held = harness),
    });
    // The agent's "SDK": its `new Harness()` and `new AgentPlatform()` give this object's own.
    const sdk = {
      Harness: function () {
        return held;
      },
    };
    const agent = {
      AgentPlatform: function () {
        return platform;
      },
    };
    const driver = new HarnessAgent(sdk as never, agent as never);
    this.#driver = driver.create({ serve: "none", agent: true }).then((created) => {
      this.#h = created.id;
      return driver;
    });
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (!url.pathname.startsWith(DRIVER)) return await super.fetch(request);
    const method = url.pathname.split("/").pop()!;
    if (method === "instance") return Response.json({ instance: this.#instance });
    const driver = await this.#driver;
    const args = await request.json() as unknown[];
    const fn = (driver as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[method];
    if (typeof fn !== "function") {
      return Response.json({ error: "no such method" }, { status: 404 });
    }
    if (url.searchParams.has("detach")) {
      fn.call(driver, this.#h, ...args).catch(() => {});
      return Response.json({ result: null });
    }
    try {
      const result = await fn.call(driver, this.#h, ...args);
      return Response.json({ result: result ?? null });
    } catch (e) {
      const error = e as Error & Record<string, unknown>;
      return Response.json({
        error: {
          name: error.name,
          message: error.message,
          ...(typeof error.code === "number" ? { code: error.code } : {}),
          ...(typeof error.reason === "string" ? { reason: error.reason } : {}),
          ...(error.data !== undefined ? { data: error.data } : {}),
        },
      });
    }
  }
}

const worker = createHarnessWorker();

export default {
  fetch(request: Request, env: HarnessEnv): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname.startsWith(DRIVER)) {
      const name = decodeURIComponent(url.pathname.slice(DRIVER.length).split("/")[0]);
      const ns = env.BMA_HARNESS as DurableObjectNamespaceLike;
      return ns.get(ns.idFromName(name)).fetch(request);
    }
    if (url.pathname.startsWith(EVICT) && request.method === "POST") {
      const name = decodeURIComponent(url.pathname.slice(EVICT.length));
      const ns = env.BMA_HARNESS as DurableObjectNamespaceLike;
      return evictNow(ns.get(ns.idFromName(name))).then(() => Response.json({}));
    }
    return worker.fetch(request, env);
  },
};
