/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/** How the main page writes times, values and states. */
import { h } from "./dom.ts";
import { now } from "./page-state.ts";

/** How long ago `at` was (nothing for no time). */
export function ago(at: number | undefined): string {
  return at === undefined ? "" : seconds(now() - at) + " ago";
}

/** A duration. */
export function seconds(ms: number): string {
  if (ms < 1000) return Math.max(0, Math.round(ms)) + " ms";
  if (ms < 120000) return (ms / 1000).toFixed(1) + " s";
  return Math.round(ms / 60000) + " min";
}

/** A time of day (nothing for no time). */
export function clock(at: number | undefined): string {
  return at === undefined ? "" : new Date(at).toLocaleTimeString();
}

/** A value as indented JSON. */
export function json(value: unknown): string {
  return JSON.stringify(value, null, 2);
}

/** A value as JSON on one line, cut at 400 characters. */
export function oneLine(value: unknown): string {
  const text = JSON.stringify(value);
  return text.length > 400 ? text.slice(0, 400) + "…" : text;
}

/** An id, cut at 18 characters. */
export function short(id: string): string {
  return String(id).length > 18 ? String(id).slice(0, 18) + "…" : String(id);
}

/** A badge (`kind`: ok, warn, bad, run, or none). */
export function badge(text: string, kind?: string): HTMLSpanElement {
  return h("span", { class: "badge " + (kind || "") }, text);
}
