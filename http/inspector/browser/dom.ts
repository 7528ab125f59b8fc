/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * What the inspector's two pages share in the browser (served as `dom.js`, an ES module both
 * import): the element builder that puts what executors send in text nodes only (never markup),
 * the element lookup, and an error answer in the one shape the pages describe.
 */
import type { ErrorView } from "../views.ts";

/** An element's attributes: `on*` are listeners; `undefined`, `null` and `false` leave one out. */
export type Attributes = Readonly<Record<string, unknown>>;

/** An element's children: strings (and numbers) become text; `null`, `undefined`, `false` nothing. */
export type Child = Node | string | number | boolean | null | undefined | readonly Child[];

/** An element with attributes (on* are listeners) and children (strings become text). */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attributes | null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value as string;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value as EventListener);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of (children as unknown[]).flat(4)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/**
 * A table of the pages' lists: a head of `headings` (an empty one heads a column of buttons) over
 * `rows`.
 */
export function table(headings: readonly string[], rows: Child): HTMLTableElement {
  return h(
    "table",
    {},
    h("thead", {}, h("tr", {}, headings.map((text) => h("th", {}, text || null)))),
    h("tbody", {}, rows),
  );
}

/** A list's table ({@linkcode table}), or, with no rows, a line saying `empty` ("No session."). */
export function listTable(
  empty: string,
  headings: readonly string[],
  rows: readonly Child[],
): HTMLElement {
  return rows.length === 0 ? h("p", { class: "empty" }, empty) : table(headings, rows);
}

/** The element with `id` (of the type the page's markup gives it). */
export const $ = <T extends HTMLElement = HTMLElement>(id: string): T =>
  document.getElementById(id) as T;

/**
 * An error as the pages describe it: an HTTP answer's error (`{code, message, data}`, the one
 * body every API answers with) as a call's own (`{name, message, reason, issues}`).
 */
export function errorView(
  error:
    | ErrorView
    | { code?: unknown; message?: string; data?: Record<string, unknown> }
    | undefined,
): ErrorView | undefined {
  if (!error || ("name" in error && error.name !== undefined)) {
    return error as ErrorView | undefined;
  }
  const answer = error as { code?: unknown; message?: string; data?: Record<string, unknown> };
  if (answer.code === undefined) return error as ErrorView;
  return { ...(answer.data ?? {}), name: String(answer.code), message: answer.message ?? "" };
}
