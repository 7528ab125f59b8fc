/**
 * How much a piece of work raises this process's peak resident memory, on Linux: the peak
 * (`VmHWM` of `/proc/self/status`) is reset to what the process holds now through
 * `/proc/self/clear_refs` (Linux 4.0 and later), the work runs, and the peak is read again.
 * Deterministic where a sampled RSS is not: the kernel keeps the high-water mark.
 */
import { readFileSync, writeFileSync } from "node:fs";

/** Why a test of peak memory is skipped here, or `false` on Linux. */
export const PEAK_MEMORY_SKIP: string | false = process.platform !== "linux" &&
  "reads the peak RSS from /proc";

function peakRss(): number {
  const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"));
  return Number(match?.[1]) * 1024;
}

/** Runs `work` and resolves with its result and the bytes it raised the peak RSS by. */
export async function peakGrowth<T>(work: () => Promise<T>): Promise<{ value: T; grown: number }> {
  writeFileSync("/proc/self/clear_refs", "5");
  const before = peakRss();
  const value = await work();
  return { value, grown: peakRss() - before };
}
