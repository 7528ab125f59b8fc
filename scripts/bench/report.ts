/** The benchmark's printed report: number formatting, text tables, and the targets it checks. */

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export function int(value: number): string {
  return Math.round(value).toLocaleString("en-US");
}

/** A median rate with its spread (half the range, as a percentage of the median). */
export function rate(values: number[] | undefined): string {
  if (!values?.length) return "–";
  const m = median(values);
  if (values.length < 2) return int(m);
  const spread = ((Math.max(...values) - Math.min(...values)) / 2 / m) * 100;
  return `${int(m)} ±${spread.toFixed(0)}%`;
}

export function kb(bytes: number): string {
  return `${(bytes / 1024).toFixed(1)} KB`;
}

export type Row = [string, ...string[]];

export function table(header: Row, rows: Row[]): string {
  const widths = header.map((_, i) =>
    Math.max(...[header, ...rows].map((r) => (r[i] ?? "").length))
  );
  const line = (r: Row) =>
    r.map((
      cell,
      i,
    ) => (i === 0 ? (cell ?? "").padEnd(widths[i]) : (cell ?? "").padStart(widths[i])))
      .join("   ").trimEnd();
  return [line(header), ...rows.map(line)].join("\n");
}

/** A target of the benchmark, held or missed. */
export interface Target {
  what: string;
  holds: boolean | undefined;
  detail: string;
}

/** A ratio against its target, as a cell: the value, and "ok" or "MISS". */
export function verdict(value: number | undefined, limit: number, atLeast: boolean): string {
  if (value === undefined || !Number.isFinite(value)) return "–";
  const ok = atLeast ? value >= limit : value <= limit;
  return `${value.toFixed(2)} ${ok ? "ok" : "MISS"}`;
}

/** What the run prints, and the targets it checks (listed at the end). */
export class Report {
  readonly lines: string[] = [];
  readonly targets: Target[] = [];

  readonly print = (text = ""): void => {
    this.lines.push(text);
    console.log(text);
  };

  /** Records whether every measured value is at least (or at most) `limit`. */
  readonly check = (
    what: string,
    values: [string, number | undefined][],
    limit: number,
    atLeast: boolean,
  ): void => {
    const known = values.filter((v): v is [string, number] =>
      v[1] !== undefined && Number.isFinite(v[1])
    );
    const holds = known.length === 0
      ? undefined
      : known.every(([, v]) => (atLeast ? v >= limit : v <= limit));
    this.targets.push({
      what,
      holds,
      detail: known.map(([k, v]) => `${k} ${v.toFixed(2)}`).join(", ") || "not measured",
    });
  };
}
