/**
 * A CLI's handling of signals before it has loaded: its entry installs this first, then loads the
 * SDK (hundreds of milliseconds from a cold cache), so that SIGTERM, SIGINT or SIGHUP meanwhile
 * ends the process as they do later at start (`stopped, exit code 0`), never with the runtime's
 * default action (killed, 143, nothing printed). The CLI's own handlers replace these.
 */
import process from "node:process";

const SIGNALS = ["SIGTERM", "SIGINT", "SIGHUP"] as const;

/** Installs the handlers; the returned function removes them (the CLI's own take over). */
export function stopOnEarlySignals(): () => void {
  const stop = () => {
    process.stdout.write("stopped, exit code 0\n");
    process.exit(0);
  };
  for (const signal of SIGNALS) process.on(signal, stop);
  return () => {
    for (const signal of SIGNALS) process.off(signal, stop);
  };
}
