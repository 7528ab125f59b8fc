/**
 * The CLIs' standard output and error outlive their readers: a reader that goes away (the end of
 * a `| head`, a `| tee` or log shipper that died) makes the next write fail with EPIPE, which
 * Node raises as an uncaught error, ending a harness that serves executors or an executor that
 * runs sessions over a line of log. A stream whose reader is gone drops what is written to it.
 */

/** From now on, a failed write to stdout or stderr drops the output, not the process. */
export function outliveOutputReaders(): void {
  for (const stream of [process.stdout, process.stderr]) {
    if (stream.listenerCount("error") === 0) stream.on("error", dropOutput);
  }
}

function dropOutput(): void {
  // The reader is gone: nothing can be told to it, and nothing else depends on it.
}
