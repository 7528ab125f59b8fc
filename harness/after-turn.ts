/**
 * `afterTurn`: a callback once this turn of the event loop has handled its I/O, on every runtime
 * (Node's, Deno's and Bun's `setImmediate`; a zero timer where there is none, as on Workers).
 *
 * @module
 */

const setImmediateOf = (globalThis as { setImmediate?: (run: () => void) => unknown })
  .setImmediate;

/** Runs `run` once this turn of the event loop has handled its I/O. */
export function afterTurn(run: () => void): void {
  if (setImmediateOf !== undefined) setImmediateOf(run);
  else setTimeout(run, 0);
}

/**
 * Whether work was handed over in this turn of the event loop: then more is arriving in a burst
 * (a runtime that hands over each frame in a task of its own), and what comes next waits for the
 * turn's end to go together; otherwise it goes once its own task's microtasks ran, adding no
 * wait to one alone. The rule of group commit, for the stores and the event log.
 */
export class TurnBurst {
  #active = false;
  readonly #ended = () => {
    this.#active = false;
  };

  /** Work was handed over in this turn. */
  get active(): boolean {
    return this.#active;
  }

  /** Notes a hand-over: until the turn's end, what follows is a burst. */
  mark(): void {
    if (this.#active) return;
    this.#active = true;
    afterTurn(this.#ended);
  }

  /** Runs `run` at the turn's end in a burst, else once this task's microtasks ran. */
  defer(run: () => void): void {
    if (this.#active) afterTurn(run);
    else queueMicrotask(run);
  }
}
