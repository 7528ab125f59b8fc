/**
 * The inspector's streams share one budget of unread bytes (`maxUnsentBytes`): pages that stop
 * reading, each within its own `maxStreamQueueBytes`, cannot together hold more. Past the budget
 * the streams that hold the most error (`StreamBacklogError`, what they held discarded), and a
 * page that reads keeps its stream.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { boundedEventStream, type EventSink } from "../../http/inspector/event-stream.ts";
import { StreamBacklogError } from "../../harness/errors.ts";
import { silentLogger } from "../../protocol/logger.ts";
import { UnsentBudget } from "../../transport/unsent-budget.ts";

const BUDGET = 1024 * 1024;
const CHUNK = new Uint8Array(128 * 1024);

describe("inspector streams: a budget across streams", () => {
  it("errors the streams holding the most past the budget; a reading page goes on", async () => {
    const budget = new UnsentBudget(BUDGET);
    const pages = new AbortController();
    const open = () => {
      let sink!: EventSink;
      const { response } = boundedEventStream({
        signal: pages.signal,
        maxQueueBytes: 4 * BUDGET,
        logger: silentLogger,
        headers: {},
        budget,
      }, (s) => {
        sink = s;
        return () => {};
      });
      return { sink, reader: response.body!.getReader(), written: 0 };
    };
    const stalled = Array.from({ length: 10 }, open);
    const reading = open();
    let read = 0;
    for (let round = 0; round < 4; round++) {
      for (const page of stalled) {
        page.sink.write(CHUNK);
        page.written += CHUNK.byteLength;
      }
      reading.sink.write(CHUNK);
      reading.written += CHUNK.byteLength;
      const { value } = await reading.reader.read();
      read += value!.byteLength;
    }
    assert.equal(read, reading.written, "the reading page got everything");
    // 10 pages were written 512 KiB each (5 MiB): each within its own 4 MiB bound.
    let kept = 0;
    let dropped = 0;
    for (const page of stalled) {
      const first = await page.reader.read().then(() => "open", (error) => error);
      if (first === "open") kept += page.written;
      else {
        assert.ok(first instanceof StreamBacklogError, String(first));
        dropped++;
      }
    }
    assert.ok(dropped > 0, "the budget dropped streams");
    assert.ok(kept <= BUDGET, `the pages that stop reading hold ${kept} bytes`);
    reading.sink.write(CHUNK);
    assert.equal((await reading.reader.read()).value!.byteLength, CHUNK.byteLength);
    pages.abort();
  });
});
