/**
 * The reaper's process on Bun (`reaper.node.ts` starts it): `Bun.spawn`, whose stdin (a
 * `FileSink`) writes when flushed. Bun's `node:child_process` writes a child's stdin in a later
 * turn of its event loop, so an executor killed in between left the session it had just
 * registered unknown to the reaper, and its processes running.
 */
import type { ReaperEvents, ReaperProcess } from "./reaper-process.ts";

/** The part of Bun's API used here, typed locally so other checkers compile this file. */
interface BunSpawn {
  spawn(argv: string[], options: {
    stdin: "pipe";
    stdout: "ignore";
    stderr: "ignore";
    env: Record<string, string>;
    detached: boolean;
    onExit(): void;
  }): {
    readonly stdin: { write(text: string): number; flush(): unknown; unref?(): void };
    unref(): void;
  };
}

/**
 * Starts `/bin/sh -c script` in a session of its own with a pipe as its stdin; throws when it
 * cannot be started.
 */
export function startReaperOnBun(
  script: string,
  env: Record<string, string>,
  events: ReaperEvents,
): ReaperProcess {
  const bun = (globalThis as { Bun?: BunSpawn }).Bun;
  if (!bun) throw new Error("startReaperOnBun needs the Bun runtime");
  const child = bun.spawn(["/bin/sh", "-c", script], {
    stdin: "pipe",
    stdout: "ignore",
    stderr: "ignore",
    env,
    // Its own session: a Ctrl-C (or any signal to the executor's process group) passes it by.
    detached: true,
    onExit: () => events.exit(),
  });
  // The executor's process may end whenever it likes: the reaper does not hold it.
  child.unref();
  child.stdin.unref?.();
  return {
    write(text) {
      try {
        child.stdin.write(text);
        // Into the pipe now; a flush that has to wait (a full pipe) finishes on its own.
        const flushed = child.stdin.flush();
        if (flushed instanceof Promise) flushed.catch(() => {});
      } catch { /* the reaper ended: its exit is handled */ }
    },
  };
}
