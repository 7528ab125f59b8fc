/**
 * The Workers bundle stays within its budget (114 KiB gzipped: trace context and the metrics
 * endpoint took it past the 100 KiB it had before, the refusals of unusable credentials, options
 * in the wire's spelling and store formats it cannot read past 110, the ids' bounds in the
 * contract's checks and the artifacts a claimed store keeps past 112) and pulls in nothing that
 * Workers cannot load: no import left for the runtime to resolve (a `node:` module included),
 * and not ws (the Node harness's server). It is the portable harness core: the Workers glue is
 * a small part of it.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { buildWorkersBundle } from "../../scripts/bench/workers-bundle.ts";

describe("Workers bundle", { timeout: 60_000 }, () => {
  it("is self-contained and at most 114 KiB gzipped", async () => {
    const bundle = await buildWorkersBundle();
    assert.ok(bundle.gzipBytes <= 114 * 1024, `${bundle.gzipBytes} bytes gzipped`);
    assert.deepEqual(bundle.external, [], "no import is left for the runtime");
    const sources = bundle.inputs.map(([path]) => path);
    assert.ok(sources.some((path) => path.includes("harness/workers/object.ts")));
    assert.ok(sources.some((path) => path.endsWith("harness/core.ts")), "the portable core");
    assert.ok(!sources.some((path) => /node_modules\/ws\//.test(path)), sources.join());
  });
});
