/**
 * The byte-stream WebSocket client (transport/websocket-stream.ts) reading frames that arrive in
 * many socket reads, through its socket seam (`dialByteWebSocket` with an injected byte socket,
 * as the runtime adapters use it): each received byte is copied once (give or take a read's
 * worth at a frame's edges). It was copied again at every later read until its frame was whole,
 * so a 15 MB tool call in 64 KiB reads cost ~1.7 GB of copying and seconds of CPU, and the
 * heartbeat answers queued behind it came too late (the executor dropped its own connection).
 * The copies are counted, not timed.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  type ByteSocket,
  type ByteSocketEvents,
  dialByteWebSocket,
} from "../../transport/websocket-stream.ts";

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/** What `node:net` hands over per read on this machine. */
const READ_BYTES = 64 * 1024;

/** An unmasked server text frame. */
function textFrame(text: string): Uint8Array {
  const body = new TextEncoder().encode(text);
  const head = body.length < 126 ? 2 : body.length < 65536 ? 4 : 10;
  const out = new Uint8Array(head + body.length);
  out[0] = 0x81;
  if (body.length < 126) out[1] = body.length;
  else if (body.length < 65536) {
    out[1] = 126;
    new DataView(out.buffer).setUint16(2, body.length);
  } else {
    out[1] = 127;
    new DataView(out.buffer).setBigUint64(2, BigInt(body.length));
  }
  out.set(body, head);
  return out;
}

/** A text of `length` characters whose content shifts with its position (a misplaced byte shows). */
function patterned(length: number, seed: string): string {
  const unit = `${seed}:0123456789abcdefghijklmnopqrstuvwxyz;`; // 37 + seed chars: no power of two
  return unit.repeat(Math.ceil(length / unit.length)).slice(0, length);
}

/** Dials through an injected byte socket that answers the handshake; hands back its events. */
async function dialInjected() {
  let events!: ByteSocketEvents;
  const socket: ByteSocket = {
    write(data, offset, length) {
      const request = new TextDecoder().decode(data.subarray(offset, offset + length));
      const key = /sec-websocket-key: (.*)\r\n/i.exec(request)?.[1];
      if (key) {
        const accept = createHash("sha1").update(key + GUID).digest("base64");
        const answer = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n" +
          `Connection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`;
        queueMicrotask(() => events.data(new TextEncoder().encode(answer)));
      }
      return length;
    },
    end() {},
  };
  const transport = await dialByteWebSocket("ws://127.0.0.1:9/", {}, (_target, given) => {
    events = given;
    queueMicrotask(() => events.open(socket));
  });
  return { transport, events };
}

/** Counts the bytes `Uint8Array#set` and `#slice` copy while `counting` is on. */
function copyCounter() {
  const proto = Uint8Array.prototype as unknown as Record<string, unknown>;
  const set = proto.set as (this: Uint8Array, source: ArrayLike<number>, offset?: number) => void;
  const slice = proto.slice as (this: Uint8Array, start?: number, end?: number) => Uint8Array;
  const counter = { counting: false, bytes: 0, restore: () => {} };
  Object.defineProperty(proto, "set", {
    configurable: true,
    writable: true,
    value(this: Uint8Array, source: ArrayLike<number>, offset?: number) {
      if (counter.counting) counter.bytes += source.length;
      return set.call(this, source, offset);
    },
  });
  Object.defineProperty(proto, "slice", {
    configurable: true,
    writable: true,
    value(this: Uint8Array, start?: number, end?: number) {
      const copy = slice.call(this, start, end);
      if (counter.counting) counter.bytes += copy.length;
      return copy;
    },
  });
  // The own properties shadow %TypedArray%.prototype's; deleting them brings those back.
  counter.restore = () => {
    delete proto.set;
    delete proto.slice;
  };
  return counter;
}

describe("byte-stream WebSocket client: frames in many reads", { timeout: 60_000 }, () => {
  it("copies each byte of a 15 MB stream once, and delivers it whole", async () => {
    const { transport, events } = await dialInjected();
    const got: string[] = [];
    transport.listen((frame) => got.push(frame));
    const texts = [patterned(8_000_000, "a"), patterned(300, "b"), patterned(7_000_000, "c")];
    const frames = texts.map(textFrame);
    const stream = new Uint8Array(frames.reduce((total, f) => total + f.length, 0));
    let offset = 0;
    const starts: number[] = [];
    for (const frame of frames) {
      starts.push(offset);
      stream.set(frame, offset);
      offset += frame.length;
    }
    // Reads of READ_BYTES, and two that end inside a header (of the small and the last frame).
    const cuts = new Set([starts[1] + 1, starts[2] + 5, stream.length]);
    for (let at = READ_BYTES; at < stream.length; at += READ_BYTES) cuts.add(at);
    const ends = [...cuts].sort((a, b) => a - b);
    // One read buffer, reused for every read as a socket's may be.
    const read = new Uint8Array(READ_BYTES);
    const counter = copyCounter();
    try {
      let from = 0;
      for (const to of ends) {
        read.set(stream.subarray(from, to));
        counter.counting = true;
        events.data(read.subarray(0, to - from));
        counter.counting = false;
        from = to;
      }
    } finally {
      counter.counting = false;
      counter.restore();
    }
    assert.equal(got.length, 3);
    got.forEach((frame, i) => assert.ok(frame === texts[i], `frame ${i} arrives intact`));
    assert.ok(
      counter.bytes <= stream.length + 4 * READ_BYTES,
      `${counter.bytes} bytes copied to read a ${stream.length}-byte stream`,
    );
    events.close();
    assert.equal((await transport.closed).code, 1006);
  });
});
