/**
 * gzip for web streams with backpressure both ways, on `node:zlib`. The runtimes'
 * `CompressionStream` accepts every write at once and queues it (an archive of a large workspace
 * would sit in memory whole while gzip catches up); here a chunk is written only once zlib has
 * room, and output is read only as fast as the consumer takes it, so memory stays at a few
 * chunks whatever the size, a decompression bomb included.
 */
import { once } from "node:events";
import { createGunzip, createGzip } from "node:zlib";
import type { Transform } from "node:stream";

/** `input` compressed with gzip. */
export function gzip(input: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  return through(input, createGzip());
}

/** `input` (gzip) decompressed. */
export function gunzip(input: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  return through(input, createGunzip());
}

function through(input: ReadableStream<Uint8Array>, zlib: Transform): ReadableStream<Uint8Array> {
  const reader = input.getReader();
  let feeding: Promise<void> | undefined;
  const feed = async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (!zlib.write(value)) await once(zlib, "drain");
      }
      zlib.end();
    } catch (error) {
      zlib.destroy(error as Error);
    }
  };
  const output = zlib[Symbol.asyncIterator]();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      feeding ??= feed();
      try {
        const next = await output.next();
        if (next.done) controller.close();
        else {
          const chunk = next.value as Uint8Array;
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
        }
      } catch (error) {
        await reader.cancel(error).catch(() => {});
        controller.error(error);
      }
    },
    async cancel(reason) {
      zlib.destroy();
      await reader.cancel(reason).catch(() => {});
    },
  }, { highWaterMark: 0 });
}
