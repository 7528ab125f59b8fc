/**
 * A session's terminals, harness side: `terminal.open` (idempotent by `terminal_id`), the output
 * each receives (`terminal.output`), and the lossy output read back after the executor
 * reconnected and resumed the session. A terminal ends with its session.
 *
 * Part of the harness's sessions (sessions.ts): `Session.terminal`.
 */
import { refuseOptions, wireSpellings } from "./option-spelling.ts";
import type { TerminalOutputParams } from "../protocol/generated/contract.ts";
import { throwIfAborted } from "../protocol/abort.ts";
import type { Logger } from "../protocol/logger.ts";
import { randomId } from "../protocol/ids.ts";
import { traceContext } from "../protocol/trace-context.ts";
import { request } from "./send.ts";
import {
  type ExecutorEntry,
  hasEnded,
  sessionEnded,
  type SessionEntry,
  takesNoNewWork,
} from "./state.ts";
import {
  closeOnAbort,
  Terminal,
  type TerminalHost,
  type TerminalOptions,
  TerminalOutput,
} from "./terminal.ts";
import { traced } from "./tracing.ts";

/** `session.terminal`'s options in the wire's spelling. */
const TERMINAL_OPTIONS = wireSpellings("terminal_id");

/** Opens a pseudo-terminal of the session (`terminal.open`, capability `terminal`). */
export async function openTerminal(
  session: SessionEntry,
  options: TerminalOptions,
  timeoutMs: number | undefined,
  logger: Logger,
): Promise<Terminal> {
  const { signal, terminalId, trace, ...rest } = options;
  throwIfAborted(signal, "terminal.open");
  refuseOptions("terminal.open", options, TERMINAL_OPTIONS);
  // Nothing new opens in a session that is stopping: its executor would refuse it.
  if (takesNoNewWork(session)) throw sessionEnded(session);
  const id = terminalId ?? randomId("term_");
  const terminals = session.terminals ??= new Map();
  let known = terminals.get(id);
  const fresh = !known;
  if (!known) {
    // Routed before the request: output may arrive ahead of the answer.
    const host: TerminalHost = {
      sessionId: session.id,
      logger,
      request: (method, params, callOptions) =>
        request(session.executor, method, params, callOptions ?? {}, timeoutMs),
    };
    const entry = {} as { terminal: Terminal; output: TerminalOutput };
    // Forgotten once its output has ended: no more notifications are needed for it.
    entry.output = new TerminalOutput(id, host, () => {
      if (session.terminals?.get(id) === entry) session.terminals.delete(id);
    });
    entry.terminal = new Terminal(id, host, entry.output);
    terminals.set(id, known = entry);
  }
  const { terminal, output } = known;
  try {
    const result = await request(
      session.executor,
      "terminal.open",
      traced({
        // Last: an untyped caller's wire names in the options never replace the handle's ids.
        ...rest,
        session_id: session.id,
        terminal_id: id,
      }, trace === undefined ? undefined : traceContext(trace)),
      { signal },
      timeoutMs,
    );
    terminal.opened(result);
    // Already open on the executor (a retry, or a handle made anew): read what it holds.
    if (result.duplicate) output.resumed();
  } catch (error) {
    if (fresh) output.end();
    throw error;
  }
  // The session may have ended while terminal.open was in flight.
  if (hasEnded(session)) output.end();
  if (signal) closeOnAbort(terminal, signal, logger);
  return terminal;
}

/** A `terminal.output` notification. */
export function terminalOutput(session: SessionEntry, params: TerminalOutputParams): void {
  session.terminals?.get(params.terminal_id)?.output.deliver(params);
}

/** The executor reconnected and resumed `ids`: lossy output sent meanwhile is read back. */
export function resumeTerminals(executor: ExecutorEntry, ids: readonly string[]): void {
  for (const id of ids) {
    for (const { output } of executor.sessions?.get(id)?.terminals?.values() ?? []) {
      output.resumed();
    }
  }
}
