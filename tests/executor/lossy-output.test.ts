/**
 * The second try of lossy output (`LossyOutput`, behind `terminal.output` and `process.output`):
 * a stream's latest dropped chunk goes out again once the link has room, unless a later chunk of
 * the stream got through first. On a manual clock; the link is the test's. A terminal's case runs
 * end to end in tests/machine/terminal-congestion.test.ts.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ManualClock } from "../../mod.ts";
import { LOSSY_RETRY_MS, LossyOutput } from "../../executor/machine/lossy-output.ts";

interface Chunk {
  session_id: string;
  process_id: string;
  stream: "stdout" | "stderr";
  offset: number;
  data: string;
}

function setup() {
  const clock = new ManualClock();
  const link = { congested: true, connected: true, sent: [] as Chunk[] };
  const output = new LossyOutput<Chunk>(
    {
      send: (params) => {
        if (!link.connected) throw new Error("not connected");
        if (link.congested) return false;
        link.sent.push(params);
        return true;
      },
      congested: () => link.congested,
    },
    (params) => `${params.session_id}\n${params.process_id}\n${params.stream}`,
    clock,
  );
  const chunk = (offset: number, data: string, stream: Chunk["stream"] = "stdout"): Chunk => ({
    session_id: "ses_1",
    process_id: "p_1",
    stream,
    offset,
    data,
  });
  return { clock, link, output, chunk };
}

describe("lossy output's second try", () => {
  it("sends a stream's latest dropped chunk once the link has room, once", async () => {
    const { clock, link, output, chunk } = setup();
    output.send(chunk(0, "aaaa"));
    output.send(chunk(4, "bbbb"));
    output.send(chunk(0, "err", "stderr"));
    assert.equal(output.owed, 2);
    await clock.advance(LOSSY_RETRY_MS * 3);
    assert.deepEqual(link.sent, [], "nothing while the link is congested");
    link.congested = false;
    await clock.advance(LOSSY_RETRY_MS);
    assert.deepEqual(link.sent, [chunk(4, "bbbb"), chunk(0, "err", "stderr")]);
    assert.equal(output.owed, 0);
    await clock.advance(LOSSY_RETRY_MS * 3);
    assert.equal(link.sent.length, 2);
  });

  it("a later chunk that got through is enough: nothing is sent again", async () => {
    const { clock, link, output, chunk } = setup();
    output.send(chunk(0, "aaaa"));
    link.congested = false;
    output.send(chunk(4, "bbbb"));
    await clock.advance(LOSSY_RETRY_MS * 2);
    assert.deepEqual(link.sent, [chunk(4, "bbbb")]);
  });

  it("dropped again on the second try: owed again, sent on the next", async () => {
    const clock = new ManualClock();
    const sent: Chunk[] = [];
    // The link looks clear each time it is looked at, and drops the first two chunks anyway
    // (it filled up in between).
    let drops = 2;
    const output = new LossyOutput<Chunk>(
      {
        send: (params) => {
          if (drops-- > 0) return false;
          sent.push(params);
          return true;
        },
        congested: () => false,
      },
      (params) => params.process_id,
      clock,
    );
    const { chunk } = setup();
    output.send(chunk(0, "cccc"));
    await clock.advance(LOSSY_RETRY_MS);
    assert.equal(output.owed, 1);
    assert.deepEqual(sent, []);
    await clock.advance(LOSSY_RETRY_MS);
    assert.deepEqual(sent, [chunk(0, "cccc")]);
    assert.equal(output.owed, 0);
  });

  it("forgets what it owes when not connected (the receiver reads back on resume)", async () => {
    const { clock, link, output, chunk } = setup();
    output.send(chunk(0, "aaaa"));
    link.connected = false;
    link.congested = false;
    await clock.advance(LOSSY_RETRY_MS);
    assert.equal(output.owed, 0);
    link.connected = true;
    await clock.advance(LOSSY_RETRY_MS * 2);
    assert.deepEqual(link.sent, []);
  });

  it("forgets an ended session's streams, and everything on dispose", async () => {
    const { clock, link, output, chunk } = setup();
    output.send(chunk(0, "aaaa"));
    output.send({ ...chunk(0, "other"), session_id: "ses_2" });
    output.forgetSession("ses_1");
    assert.equal(output.owed, 1);
    output.dispose();
    assert.equal(output.owed, 0);
    link.congested = false;
    await clock.advance(LOSSY_RETRY_MS * 2);
    assert.deepEqual(link.sent, []);
  });
});
