/**
 * The machine routes of the inspector without a browser, on Node, Deno and Bun, over a real
 * harness on 127.0.0.1 and a real `ExecutorClient` serving the machine (real PTYs, processes
 * and files in a temp workdir, through this runtime's entry point), the inspector served by `serveInspector`: a terminal's output
 * stream resumes from the offset a reconnecting `EventSource` sends (`Last-Event-ID`) with no
 * byte twice, and ends with the exit; a file goes up and comes back byte for byte; what the
 * routes refuse (an unknown terminal, an upload that is not raw bytes or is too large, a path
 * outside the workdir, bad offsets and sizes) is refused with the status that says so.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as Entry from "../../node.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
// This runtime's own entry point: its PTYs are this runtime's (Bun.spawn's terminal on Bun).
const { ExecutorClient, Harness, inspector, randomInspectorToken, serveInspector, serveMachine }:
  typeof Entry = await import(`../../${RUNTIME}.ts`);

describe(`inspector machine routes (${RUNTIME})`, { timeout: 300_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "bma-machine-api-"));
  const workdir = join(dir, "work");
  const home = join(dir, "home");
  mkdirSync(workdir);
  mkdirSync(home);
  const token = randomInspectorToken();
  let harness: Entry.Harness;
  let server: Entry.HarnessServer;
  let ui: Entry.Inspector;
  let web: Entry.InspectorServer;
  let client: Entry.ExecutorClient;
  let session: Entry.Session;

  before(async () => {
    harness = new Harness({ insecureNoAuth: true });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    ui = inspector(harness, { token, maxUploadBytes: 2 * 1024 * 1024 });
    web = await serveInspector(ui);
    client = new ExecutorClient({
      harnessUrl: server.url,
      executor: { name: "api-machine", os: "linux", arch: "amd64", version: "1.0.0" },
    });
    serveMachine(client, { workdir, cgroups: false, env: { HOME: home } });
    await client.start();
    session = await harness.executors[0].assignSession({ session_id: "ses_machine_api" });
    await session.ready();
  });

  after(async () => {
    ui?.close();
    await web?.close();
    await server?.close();
    await harness?.close();
    await client?.stop().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  });

  const auth = { authorization: `Bearer ${token}` };
  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${web.url}/api/${path}`, {
      ...init,
      headers: { ...auth, ...(init.headers as Record<string, string> | undefined) },
    });
  const post = (path: string, body: unknown) =>
    api(path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });

  /** The events of a stream until `stop` says so (or the stream ends). */
  async function events(
    response: Response,
    stop: (events: { event: string; id?: string; data: any }[]) => boolean,
  ): Promise<{ event: string; id?: string; data: any }[]> {
    const out: { event: string; id?: string; data: any }[] = [];
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    try {
      while (!stop(out)) {
        const { done, value } = await reader.read();
        if (done) break;
        buffer += value;
        let end: number;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const fields = Object.fromEntries(
            block.split("\n").filter((l) => !l.startsWith(":")).map((l) => {
              const at = l.indexOf(": ");
              return [l.slice(0, at), l.slice(at + 2)];
            }),
          );
          if (fields.event) {
            out.push({ event: fields.event, id: fields.id, data: JSON.parse(fields.data) });
          }
        }
      }
    } finally {
      await reader.cancel().catch(() => {});
    }
    return out;
  }
  const text = (evs: { event: string; data: any }[]) =>
    evs.filter((e) => e.event === "output").map((e) => atob(e.data.data)).join("");

  it("resumes a terminal's output from Last-Event-ID, each byte once, to its exit", async () => {
    const opened = await post(`sessions/${session.id}/terminals`, { cols: 100, rows: 30 });
    assert.equal(opened.status, 201);
    const view = await opened.json();
    assert.equal(view.cols, 100);
    const input = await post(`terminals/${view.id}/input`, { data: "echo one-$((1+1))\r" });
    assert.equal(input.status, 200);
    const first = await events(
      await api(`terminals/${view.id}/stream`),
      (evs) => evs.some((e) => e.event === "live") && text(evs).includes("one-2\r\n"),
    );
    const outputs = first.filter((e) => e.event === "output");
    const lastId = outputs.at(-1)!.id!;
    assert.equal(
      Number(lastId),
      outputs.at(-1)!.data.offset + atob(outputs.at(-1)!.data.data).length,
    );
    assert.ok(first.some((e) => e.event === "live"), "told when what was kept has been sent");

    // Written while no page follows; then a reconnect from where the last one stopped.
    await post(`terminals/${view.id}/input`, { data: "echo two-$((1+2)); exit 3\r" });
    const second = await events(
      await api(`terminals/${view.id}/stream`, { headers: { "last-event-id": lastId } }),
      (evs) => evs.some((e) => e.event === "exit"),
    );
    assert.equal(second.find((e) => e.event === "output")?.data.offset, Number(lastId));
    assert.ok(text(second).includes("two-3"), text(second));
    assert.ok(!text(second).includes("one-2\r\n"), "nothing from before the offset again");
    assert.deepEqual(second.at(-1), { event: "exit", id: undefined, data: { exit_code: 3 } });

    // From the start, everything (all of it is kept) and the exit.
    const all = await events(
      await api(`terminals/${view.id}/stream?from=0`),
      (evs) => evs.some((e) => e.event === "exit"),
    );
    assert.equal(text(all), text(first) + text(second));
    const listed = await (await api(`sessions/${session.id}/terminals`)).json();
    assert.deepEqual(
      listed.terminals.map((t: any) => [t.id, t.exited, t.exitCode]),
      [[view.id, true, 3]],
    );
  });

  it("uploads raw bytes in chunks and downloads them back", async () => {
    const bytes = randomBytes(1536 * 1024);
    const up = await api(`sessions/${session.id}/files/upload?path=sub/blob.bin`, {
      method: "POST",
      headers: { "content-type": "application/octet-stream" },
      body: bytes,
    });
    assert.equal(up.status, 201, await up.clone().text());
    const result = await up.json();
    assert.equal(result.size, bytes.length);
    assert.deepEqual(readFileSync(join(workdir, "sub", "blob.bin")), bytes);

    const down = await api(`sessions/${session.id}/files/download?path=sub/blob.bin`);
    assert.equal(down.status, 200);
    assert.equal(down.headers.get("x-sha256"), result.sha256);
    assert.match(down.headers.get("content-disposition") ?? "", /filename="blob\.bin"/);
    assert.deepEqual(Buffer.from(await down.arrayBuffer()), bytes);

    const listing = await (await api(`sessions/${session.id}/files?path=.`)).json();
    assert.deepEqual(listing.directories, ["sub"]);
    const inside = await (await api(`sessions/${session.id}/files?path=sub`)).json();
    assert.deepEqual(inside.files, ["blob.bin"]);
  });

  // 20 rounds here (each moves 2 MiB through the page); tests/machine/transfer.test.ts runs 50
  // of file.upload itself.
  it("two uploads to one path at once, 20 rounds with and without a file there: the file is one of them, whole", async () => {
    const put = (bytes: Uint8Array<ArrayBuffer>) =>
      api(`sessions/${session.id}/files/upload?path=race/same.bin`, {
        method: "POST",
        headers: { "content-type": "application/octet-stream" },
        body: bytes,
      });
    mkdirSync(join(workdir, "race"), { recursive: true });
    const file = join(workdir, "race", "same.bin");
    for (let round = 0; round < 20; round++) {
      const previous = round % 2 === 0 ? new Uint8Array(1000).fill(round) : undefined;
      if (previous) writeFileSync(file, previous);
      // More than one 512 KiB chunk each, so that the chunks of the two interleave.
      const a = new Uint8Array(512 * 1024 + 1).fill(0xa0 + (round % 16));
      const b = new Uint8Array(512 * 1024 + 3).fill(0x10 + (round % 16));
      const answers = await Promise.all([put(a), put(b)]);
      const what = `round ${round} (${previous ? "a file there" : "no file there"})`;
      for (const answer of answers) {
        assert.equal(answer.status, 201, `${what}: ${await answer.text()}`);
      }
      assert.ok(existsSync(file), `${what}: the file is gone`);
      const now = readFileSync(file);
      const which = [a, b, ...(previous ? [previous] : [])].find((one) => now.equals(one));
      assert.ok(which, `${what}: the file is none of them (${now.length} bytes)`);
      assert.deepEqual(
        readdirSync(join(workdir, "race")),
        ["same.bin"],
        `${what}: nothing else is left`,
      );
      rmSync(file);
    }
  });

  it("refuses a path outside the workdir 403 on every route that takes one, and writes nothing there", async () => {
    const outside = join(dir, "outside");
    mkdirSync(outside);
    writeFileSync(join(outside, "secret.txt"), "secret");
    symlinkSync(join(outside, "secret.txt"), join(workdir, "out-file"));
    symlinkSync(outside, join(workdir, "out-dir"));
    const routes: [string, (path: string) => Promise<Response>][] = [
      ["list", (path) => api(`sessions/${session.id}/files?path=${encodeURIComponent(path)}`)],
      [
        "download",
        (path) => api(`sessions/${session.id}/files/download?path=${encodeURIComponent(path)}`),
      ],
      [
        "upload",
        (path) =>
          api(`sessions/${session.id}/files/upload?path=${encodeURIComponent(path)}`, {
            method: "POST",
            headers: { "content-type": "application/octet-stream" },
            body: "pwned",
          }),
      ],
    ];
    const paths = [
      "../outside/secret.txt",
      "../x",
      "a/../../x",
      outside,
      "/etc",
      "out-file",
      "out-dir",
      "out-dir/secret.txt",
    ];
    for (const path of paths) {
      for (const [route, call] of routes) {
        const answer = await call(path);
        const body = await answer.text();
        assert.equal(answer.status, 403, `${route} ${path}: ${body}`);
        assert.equal(
          JSON.parse(body).error.data?.reason,
          "path_outside_workdir",
          `${route} ${path}`,
        );
      }
    }
    assert.equal(readFileSync(join(outside, "secret.txt"), "utf8"), "secret");
    assert.deepEqual(readdirSync(outside), ["secret.txt"]);
  });

  it("refuses what it cannot do, with the status that says why", async () => {
    const cases: [string, Promise<Response>, number][] = [
      ["an unknown terminal", post("terminals/term_nosuch/input", { data: "x" }), 404],
      ["a terminal too wide", post(`sessions/${session.id}/terminals`, { cols: 5000 }), 400],
      ["a stream of an unknown terminal", api("terminals/term_nosuch/stream"), 404],
      [
        "an upload sent as JSON",
        post(`sessions/${session.id}/files/upload?path=x.bin`, { content: "aGk=" }),
        415,
      ],
      [
        "an upload too large",
        api(`sessions/${session.id}/files/upload?path=big.bin`, {
          method: "POST",
          headers: { "content-type": "application/octet-stream" },
          body: new Uint8Array(3 * 1024 * 1024),
        }),
        413,
      ],
      [
        "a download outside the workdir",
        api(`sessions/${session.id}/files/download?path=/etc/passwd`),
        403,
      ],
      ["a missing file", api(`sessions/${session.id}/files/download?path=nope.txt`), 409],
      ["an unknown session", api("sessions/ses_nosuch/processes"), 404],
      ["a stream that is not one", api(`sessions/${session.id}/processes/p/output?stream=x`), 400],
    ];
    for (const [what, response, status] of cases) {
      const r = await response;
      assert.equal(r.status, status, `${what}: ${await r.text()}`);
    }
  });
});
