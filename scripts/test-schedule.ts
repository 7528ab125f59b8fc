/**
 * The order in which `scripts/test.ts` starts its stages, from what the last run recorded of each.
 *
 * The longest start first, so that no long stage starts last. But the suite is bound by the
 * machine's CPU, and some of its longest stages mostly wait (a workerd eviction, a lease running
 * out, a PostgreSQL standby taking over): started first, side by side, they left the cores idle
 * at the start of every run. So the lanes that run `jobs` stages at once take the stages that
 * compute, longest first, and one more lane takes the stages that mostly wait, longest first; once
 * no stage that computes is left, every lane takes what is.
 */

/** What a run recorded of one stage. */
export interface StageRecord {
  /** Wall-clock seconds. */
  seconds: number;
  /** CPU seconds of its processes, where the runner could read them (`test-stage.ts`). */
  cpu?: number;
}

/** A stage shorter than this is not worth a lane of its own, whatever it does. */
const WAITING_MIN_SECONDS = 3;
/** A stage that kept less than this share of one core busy over its time mostly waits. */
const WAITING_CPU_SHARE = 0.3;

/** Whether a stage, as recorded, mostly waits. */
export function mostlyWaits(record: StageRecord | undefined): boolean {
  return record?.cpu !== undefined && record.seconds >= WAITING_MIN_SECONDS &&
    record.cpu < WAITING_CPU_SHARE * record.seconds;
}

/** A recorded run as kept on disk: `{ name: seconds }`, or `{ name: [seconds, cpu] }`. */
export type TimingsFile = Record<string, number | [number, number]>;

/** The records of a timings file (entries of any other shape are skipped). */
export function readRecords(file: TimingsFile): Map<string, StageRecord> {
  const records = new Map<string, StageRecord>();
  for (const [name, value] of Object.entries(file)) {
    if (typeof value === "number") records.set(name, { seconds: value });
    else if (Array.isArray(value) && typeof value[0] === "number") {
      records.set(name, {
        seconds: value[0],
        cpu: typeof value[1] === "number" ? value[1] : undefined,
      });
    }
  }
  return records;
}

/** `records` as a timings file, to a tenth of a second. */
export function writeRecords(records: ReadonlyMap<string, StageRecord>): TimingsFile {
  const round = (n: number) => Math.round(n * 10) / 10;
  const file: TimingsFile = {};
  for (const [name, { seconds, cpu }] of [...records].sort(([a], [b]) => a < b ? -1 : 1)) {
    file[name] = cpu === undefined ? round(seconds) : [round(seconds), round(cpu)];
  }
  return file;
}

/** Stages handed out to lanes: see the module comment. */
export class StageQueue<T> {
  readonly #computing: T[];
  readonly #waiting: T[];

  /**
   * @param stages every stage of the run
   * @param record what the last run recorded of a stage (undefined: never run, so it starts
   *   first among those that compute unless `unknownSeconds` says otherwise)
   * @param unknownSeconds the seconds to assume for a stage with no record
   */
  constructor(
    stages: readonly T[],
    record: (stage: T) => StageRecord | undefined,
    unknownSeconds: (stage: T) => number = () => 0,
  ) {
    const seconds = (s: T) => record(s)?.seconds ?? unknownSeconds(s);
    const longestFirst = [...stages].sort((a, b) => seconds(b) - seconds(a));
    this.#computing = longestFirst.filter((s) => !mostlyWaits(record(s)));
    this.#waiting = longestFirst.filter((s) => mostlyWaits(record(s)));
  }

  /** How many stages are left. */
  get size(): number {
    return this.#computing.length + this.#waiting.length;
  }

  /**
   * The next stage for a lane: the waiting lane takes only stages that mostly wait; the others
   * take the longest that computes, and once none is left, the longest that waits.
   */
  next(waitingLane: boolean): T | undefined {
    if (waitingLane) return this.#waiting.shift();
    return this.#computing.shift() ?? this.#waiting.shift();
  }
}
