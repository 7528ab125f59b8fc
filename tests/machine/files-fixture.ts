/**
 * An executor serving the machine tools (`serveMachine`) on a real temp workdir, registered with
 * the project's `Harness` over a real WebSocket on 127.0.0.1, and a session assigned to it: the
 * wire path every file tool and capability request of these tests goes through.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serveMachine, type ServeMachineOptions } from "../../executor/machine/serve.node.ts";
import type { ExecutorHandle, Session } from "../../harness/node.ts";
import type { ExecutorClient } from "../../executor/node.ts";
import { Fixtures, type StartHarnessOptions } from "../helpers/executor-fixture.ts";
import type { CapturingLogger } from "../helpers/raw.ts";

/** What {@linkcode machineSession} made. */
export interface MachineSession {
  /** A temp directory holding the workdir (`root`) and whatever a test puts beside it. */
  readonly top: string;
  /** The workdir. */
  readonly root: string;
  readonly executor: ExecutorHandle;
  readonly session: Session;
  readonly client: ExecutorClient;
  /** The executor's logger. */
  readonly logger: CapturingLogger;
}

/** Options of {@linkcode machineSession}. */
export interface MachineSessionOptions {
  harness?: StartHarnessOptions;
  serve?: Omit<ServeMachineOptions, "workdir">;
}

/** Starts the harness, the executor with `serveMachine`, and assigns session `ses_machine`. */
export async function machineSession(
  fx: Fixtures,
  options: MachineSessionOptions = {},
): Promise<MachineSession> {
  const top = mkdtempSync(join(tmpdir(), "bma-machine-"));
  fx.defer(() => rmSync(top, { recursive: true, force: true }));
  const root = join(top, "work");
  mkdirSync(root);
  const { harness, server } = await fx.harness(options.harness);
  const { client, logger } = fx.client(server);
  const served = serveMachine(client, { workdir: root, ...options.serve });
  fx.defer(() => served.dispose());
  await client.start();
  const executor = await harness.waitExecutor();
  const session = await executor.assignSession({ session_id: "ses_machine" });
  return { top, root, executor, session, client, logger };
}

export { Fixtures };
