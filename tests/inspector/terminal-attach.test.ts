/**
 * A page attaching to a terminal that has written more than the inspector keeps of it (a second
 * browser, a fresh page), on Node, Deno and Bun, over a real harness, a real `ExecutorClient`
 * serving the machine (a real PTY) and `serveInspector`: attached from 0 it is told what was no
 * longer kept, then gets every byte that is, then `live`, then what the terminal writes next;
 * attached from an offset in the middle of what is kept, the same from that offset on. What is
 * kept is more than the stream holds for a page that does not read (1 MiB kept, sent as base64),
 * so it must be sent as the page reads it, not queued at once.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as Entry from "../../node.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
// This runtime's own entry point: its PTYs are this runtime's (Bun.spawn's terminal on Bun).
const { ExecutorClient, Harness, inspector, randomInspectorToken, serveInspector, serveMachine }:
  typeof Entry = await import(`../../${RUNTIME}.ts`);

/** What the inspector keeps of a terminal's output (`TERMINAL_KEPT_BYTES`). */
const KEPT = 1024 * 1024;
/** The lines the terminal writes: `seq 1 LAST`, about 2.3 MB through the PTY. */
const LAST = 300_000;

interface StreamEvent {
  event: string;
  id?: string;
  data: any;
}

describe(`a page attaching to a busy terminal (${RUNTIME})`, { timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "bma-terminal-attach-"));
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
    ui = inspector(harness, { token });
    web = await serveInspector(ui);
    client = new ExecutorClient({
      harnessUrl: server.url,
      executor: { name: "attach-machine", os: "linux", arch: "amd64", version: "1.0.0" },
    });
    serveMachine(client, { workdir, cgroups: false, env: { HOME: home } });
    await client.start();
    session = await harness.executors[0].assignSession({ session_id: "ses_terminal_attach" });
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

  /** An open event stream, read event by event. */
  async function stream(path: string) {
    const response = await api(path);
    assert.equal(response.status, 200);
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    const received: StreamEvent[] = [];
    let buffer = "";
    let ended = false;
    return {
      received,
      /** Reads until `stop` holds of what was received; fails if the stream ends first. */
      async until(stop: (events: StreamEvent[]) => boolean): Promise<StreamEvent[]> {
        while (!stop(received)) {
          assert.ok(!ended, `the stream ended after ${JSON.stringify(received.slice(0, 3))}`);
          const { done, value } = await reader.read();
          if (done) {
            ended = true;
            continue;
          }
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
              received.push({ event: fields.event, id: fields.id, data: JSON.parse(fields.data) });
            }
          }
        }
        return received;
      },
      close: () => reader.cancel().catch(() => {}),
    };
  }

  const outputs = (events: StreamEvent[]) => events.filter((e) => e.event === "output");
  const text = (events: StreamEvent[]) => outputs(events).map((e) => atob(e.data.data)).join("");
  const isLive = (events: StreamEvent[]) => events.some((e) => e.event === "live");

  /** Asserts that the output events of `events` follow one another from `from`, with no gap. */
  function assertContiguous(events: StreamEvent[], from: number): number {
    let at = from;
    for (const e of outputs(events)) {
      assert.equal(e.data.offset, at, "each output starts where the one before ended");
      at += atob(e.data.data).length;
      assert.equal(Number(e.id), at, "its id is the offset after it");
    }
    return at;
  }

  it("streams what is kept from 0 and from the middle, then live output", async () => {
    const opened = await post(`sessions/${session.id}/terminals`, { cols: 100, rows: 30 });
    assert.equal(opened.status, 201);
    const { id } = await opened.json() as { id: string };
    await post(`terminals/${id}/input`, { data: `seq 1 ${LAST}; echo done-$((40+2))\r` });

    // Waits for the end of the output, following the terminal from close to its listed offset
    // each time (what works with little kept to send). The end is where the stream that saw
    // `done-42` went live (the id of its last output), not the offset listed before it: the
    // terminal may have written much more in between.
    let end = 0;
    for (let tail = ""; !tail.includes("done-42");) {
      const listed = await (await api(`sessions/${session.id}/terminals`)).json();
      const from = Math.max(0, listed.terminals[0].offset - 512);
      const follow = await stream(`terminals/${id}/stream?from=${from}`);
      const followed = await follow.until(isLive);
      await follow.close();
      tail = text(followed);
      const last = outputs(followed).at(-1);
      if (last) end = Number(last.id);
      if (!tail.includes("done-42")) await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(end > KEPT + 512 * 1024, `the terminal wrote more than is kept (${end} bytes)`);

    const fromStart = await stream(`terminals/${id}/stream?from=0`);
    const replayed = await fromStart.until(isLive);
    const skipped = replayed.find((e) => e.event === "skipped");
    assert.ok(skipped, "told what is no longer kept");
    assert.equal(skipped.data.from, 0);
    const start: number = skipped.data.to;
    assert.ok(start > 0 && end - start >= KEPT - 64 * 1024, `kept ${end - start} bytes`);
    assert.equal(replayed.at(-1)!.event, "live", "live comes after what was kept");
    const liveAt = assertContiguous(replayed, start);
    const kept = text(replayed);
    assert.ok(kept.length >= end - start, `${kept.length} bytes of ${end - start} kept`);
    // The kept bytes are the end of what `seq` wrote: whole lines counting up to LAST.
    const lines = kept.split("\r\n");
    const last = lines.indexOf(String(LAST));
    assert.ok(last > 1000, "the end of the output was kept");
    for (let i = 2; i <= last; i++) assert.equal(Number(lines[i]), Number(lines[i - 1]) + 1);

    const middle = start + Math.floor((end - start) / 2) + 7;
    const fromMiddle = await stream(`terminals/${id}/stream?from=${middle}`);
    const resumed = await fromMiddle.until(isLive);
    assert.ok(!resumed.some((e) => e.event === "skipped"), "nothing skipped: it is kept");
    assert.equal(assertContiguous(resumed, middle), liveAt);
    assert.equal(text(resumed), kept.slice(middle - start));

    // Then the output as it comes, on both.
    await post(`terminals/${id}/input`, { data: "echo live-$((50+5))\r" });
    for (const attached of [fromStart, fromMiddle]) {
      const after = await attached.until((events) => text(events).includes("live-55\r\n"));
      assertContiguous(after, outputs(after)[0].data.offset);
      await attached.close();
    }
  });
});
