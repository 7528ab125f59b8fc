/**
 * A file's bytes as a web stream read only as fast as it is taken: each `pull` reads one chunk.
 * Node 20's `Readable.toWeb(createReadStream(…))` counts its queue in chunks, with the file
 * stream's byte high-water mark as the count (65,536 chunks), so it read a spooled output of
 * hundreds of MiB into memory ahead of a slower upload.
 */
import { open } from "node:fs/promises";

/** The size of each read. */
const CHUNK_BYTES = 64 * 1024;

/** The bytes of the file at `path`, read as the stream is pulled; the file closes at its end. */
export function fileStream(path: string): ReadableStream<Uint8Array> {
  let handle: Awaited<ReturnType<typeof open>> | undefined;
  const close = async () => {
    const opened = handle;
    handle = undefined;
    await opened?.close().catch(() => {});
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        handle ??= await open(path, "r");
        const chunk = new Uint8Array(CHUNK_BYTES);
        const { bytesRead } = await handle.read(chunk, 0, CHUNK_BYTES, null);
        if (bytesRead === 0) {
          await close();
          controller.close();
        } else {
          controller.enqueue(chunk.subarray(0, bytesRead));
        }
      } catch (error) {
        await close();
        controller.error(error);
      }
    },
    cancel: close,
  }, { highWaterMark: 0 });
}
