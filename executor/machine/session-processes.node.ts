/**
 * Every process of one session (bash calls, `process.start`, MCP servers, terminals), so that
 * the session ends only once none of them is left: each is a {@linkcode ProcessUnit} (its
 * process group, and a leaf of the session's cgroup where the executor has cgroups), or a
 * {@linkcode SessionMember} started by other means (a terminal's program, which a PTY host
 * starts, in a leaf of its own too), and {@linkcode SessionProcesses.end} terminates them all
 * (SIGTERM, or a terminal's SIGHUP, then SIGKILL after the grace period to every survivor) and
 * resolves when none is alive. Should the executor's process end first, the executor's reaper
 * (`reaper.node.ts`) ends them: each is registered with it from its start until none of its
 * processes is left, and so is the session's cgroup until it is removed.
 */
import { NotFoundError } from "../../protocol/generated/errors.ts";
import type { Logger } from "../../protocol/logger.ts";
import type { Cgroup, CgroupTree } from "./cgroup.node.ts";
import { ProcessUnit, type SpawnUnitOptions } from "./process-group.node.ts";
import { reapCgroupOnExit, reapSessionOnExit } from "./reaper.node.ts";

/**
 * A process of the session that something else started and knows how to end (a terminal: the
 * PTY host starts it, the terminal table ends it).
 */
export interface SessionMember {
  /** The pid of the leader of its session (a terminal's program), when it has one. */
  readonly pid?: number;
  /** Ends it (its own way), SIGKILL after `graceMs`; resolves once none of its processes is left. */
  terminate(graceMs: number): Promise<void>;
  /** Resolves once it has ended, by {@linkcode terminate} or by itself. */
  readonly ended: Promise<void>;
}

/** A member and the cgroup leaf it was started in. */
interface Adopted {
  readonly member: SessionMember;
  readonly cgroup: Cgroup | undefined;
}

/** Where the session's cgroups come from (shared by the sessions of one executor). */
export interface CgroupSource {
  /** The executor's cgroup tree, or undefined where cgroups cannot be used. */
  tree(): Promise<CgroupTree | undefined>;
}

/** Opens the executor's cgroup tree once, on first use. */
export function cgroupSource(
  setting: boolean | string | undefined,
  open: (parent?: string) => Promise<CgroupTree | undefined>,
  logger: Logger,
): CgroupSource {
  let tree: Promise<CgroupTree | undefined> | undefined;
  return {
    tree: () =>
      tree ??= setting === false ? Promise.resolve(undefined) : open(
        typeof setting === "string" ? setting : undefined,
      ).then((found) => {
        logger.info(
          found
            ? "session processes are tracked in cgroups"
            : "no writable cgroup v2: session processes are tracked by process group",
        );
        return found;
      }, () => undefined),
  };
}

/** The processes of one session. */
export class SessionProcesses {
  readonly sessionId: string;
  readonly #cgroups: CgroupSource;
  readonly #logger: Logger;
  readonly #units = new Set<ProcessUnit>();
  readonly #adopted = new Set<Adopted>();
  #cgroup: Promise<Cgroup | undefined> | undefined;
  #leaves = 0;
  readonly #inFlight = new Set<Promise<void>>();
  #ending: Promise<void> | undefined;
  #graceMs = 0;
  /** Withdraws the session's cgroup from the executor's reaper. */
  #unreapCgroup: (() => void) | undefined;

  constructor(sessionId: string, cgroups: CgroupSource, logger: Logger) {
    this.sessionId = sessionId;
    this.#cgroups = cgroups;
    this.#logger = logger;
  }

  /** Whether the session's processes are being ended (no new ones start). */
  get ending(): boolean {
    return this.#ending !== undefined;
  }

  /** Starts a process of the session. Refused (-32002 `unknown_session`) once it is ending. */
  spawn(argv: readonly string[], options: Omit<SpawnUnitOptions, "cgroup">): Promise<ProcessUnit> {
    try {
      this.#refuseIfEnding();
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#inFlightWhile(this.#spawn(argv, options));
  }

  /**
   * Starts a process of the session by other means (a terminal's program on a PTY): `launch` is
   * given the cgroup leaf to start it in (undefined without cgroups; the argv it starts must
   * enter it, see `inCgroup`) and returns the started member, which is ended with the session's
   * other processes. Refused (-32002 `unknown_session`) once the session is ending.
   */
  adopt<M extends SessionMember>(launch: (cgroup: Cgroup | undefined) => M): Promise<M> {
    try {
      this.#refuseIfEnding();
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#inFlightWhile(this.#adopt(launch));
  }

  /** Counts `attempt` as a start in flight (the session's end waits for it) until it settles. */
  #inFlightWhile<T>(attempt: Promise<T>): Promise<T> {
    const settled = attempt.then(() => {}, () => {});
    this.#inFlight.add(settled);
    settled.then(() => this.#inFlight.delete(settled));
    return attempt;
  }

  async #adopt<M extends SessionMember>(launch: (cgroup: Cgroup | undefined) => M): Promise<M> {
    const leaf = await this.#leaf("t");
    let member: M;
    try {
      member = launch(leaf);
    } catch (error) {
      leaf?.remove();
      throw error;
    }
    const adopted: Adopted = { member, cgroup: leaf };
    this.#adopted.add(adopted);
    // `ended` is when none of its processes is left (or they were SIGKILLed and did not go).
    const unreap = member.pid === undefined
      ? () => {}
      : reapSessionOnExit(member.pid, this.#logger);
    member.ended.then(unreap, unreap);
    if (this.#ending) void member.terminate(this.#graceMs);
    member.ended.then(() => {
      // One that left nothing behind is forgotten (its cgroup removed) at once.
      if (!this.#ending && release(adopted.cgroup)) this.#adopted.delete(adopted);
    });
    return member;
  }

  /** A new, empty leaf of the session's cgroup (`<prefix><n>`); undefined without cgroups. */
  async #leaf(prefix: string): Promise<Cgroup | undefined> {
    const sessionCgroup = await (this.#cgroup ??= this.#makeCgroup());
    this.#refuseIfEnding();
    if (!sessionCgroup) return undefined;
    try {
      return sessionCgroup.child(`${prefix}${++this.#leaves}`);
    } catch (error) {
      this.#logger.warn("cannot create a process cgroup: tracked by process group only", {
        session_id: this.sessionId,
        error: String(error),
      });
      return undefined;
    }
  }

  async #spawn(
    argv: readonly string[],
    options: Omit<SpawnUnitOptions, "cgroup">,
  ): Promise<ProcessUnit> {
    const leaf = await this.#leaf("p");
    let unit: ProcessUnit;
    try {
      unit = await ProcessUnit.spawn(argv, { ...options, cgroup: leaf, logger: this.#logger });
    } catch (error) {
      leaf?.remove();
      throw error;
    }
    this.#units.add(unit);
    // The session began to end while this one started: it ends with the others.
    if (this.#ending) void unit.terminate(this.#graceMs);
    unit.leaderExited.then(() => {
      // A unit that left nothing behind is forgotten (its cgroup removed) at once.
      if (!this.#ending && !unit.alive() && unit.release()) this.#units.delete(unit);
    });
    return unit;
  }

  /**
   * Ends every process of the session: SIGTERM, then SIGKILL after `graceMs` to every
   * survivor. Resolves once none is left, and its cgroups are removed. Idempotent.
   */
  end(graceMs: number): Promise<void> {
    this.#graceMs = Math.min(graceMs, this.#ending ? this.#graceMs : graceMs);
    if (this.#ending) {
      for (const unit of this.#units) void unit.terminate(graceMs);
      for (const { member } of this.#adopted) void member.terminate(graceMs);
      return this.#ending;
    }
    this.#ending = (async () => {
      // Starts in flight finish first (and are ended with the rest): repeat until none is left.
      const leaves: Cgroup[] = [];
      while (this.#inFlight.size > 0 || this.#units.size > 0 || this.#adopted.size > 0) {
        await Promise.all(this.#inFlight);
        const units = [...this.#units];
        const adopted = [...this.#adopted];
        await Promise.all([
          ...units.map((unit) => unit.terminate(this.#graceMs)),
          ...adopted.map(({ member }) => member.terminate(this.#graceMs)),
        ]);
        for (const unit of units) {
          unit.release();
          this.#units.delete(unit);
        }
        for (const member of adopted) {
          if (member.cgroup) leaves.push(member.cgroup);
          this.#adopted.delete(member);
        }
      }
      const cgroup = await this.#cgroup;
      if (cgroup) {
        // Belt and braces: anything that found its way into the session's cgroup goes too.
        while (cgroup.populated()) {
          cgroup.kill();
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        for (const leaf of leaves) leaf.remove();
        if (cgroup.remove()) this.#unreapCgroup?.();
        else this.#logger.warn("session cgroup not removed", { session_id: this.sessionId });
      }
    })();
    return this.#ending;
  }

  #refuseIfEnding(): void {
    if (this.#ending) {
      throw new NotFoundError("the session is ending", { reason: "unknown_session" });
    }
  }

  async #makeCgroup(): Promise<Cgroup | undefined> {
    const tree = await this.#cgroups.tree();
    if (!tree) return undefined;
    try {
      const cgroup = tree.session();
      this.#unreapCgroup = reapCgroupOnExit(cgroup.path, this.#logger);
      return cgroup;
    } catch (error) {
      this.#logger.warn("cannot create the session cgroup: tracked by process group only", {
        session_id: this.sessionId,
        error: String(error),
      });
      return undefined;
    }
  }
}

/** Removes an emptied cgroup leaf; true when it is gone (or there was none). */
function release(cgroup: Cgroup | undefined): boolean {
  return !cgroup || (cgroup.populated() !== true && cgroup.remove());
}
