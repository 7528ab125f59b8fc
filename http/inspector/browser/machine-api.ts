/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * How the machine page talks to the inspector: its session's API path, requests that answer
 * JSON (or an error in words), and where a part's failure shows.
 */
import type { ErrorView } from "../views.ts";
import { $, errorView } from "./dom.ts";

/** A path segment. */
export const enc = encodeURIComponent;
/** The session the page shows (`machine.html?session=<id>`). */
export const sessionId = new URLSearchParams(location.search).get("session") || "";
/** The API path of the session. */
export const base = "api/sessions/" + enc(sessionId);

/** An error the inspector answered with, in words. */
export function describe(answered: ErrorView | undefined): string {
  const error = errorView(answered);
  if (!error) return "failed";
  const text = (error.name || "Error") + ": " + (error.message || "");
  return error.reason && !String(error.message || "").includes(error.reason)
    ? text + " (" + error.reason + ")"
    : text;
}

/** A response's JSON, or its error in words. */
export async function answer(response: Response): Promise<any> {
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(describe(data.error));
  return data;
}

/** GETs JSON from the inspector's API. */
export const get = (path: string, signal?: AbortSignal): Promise<any> =>
  fetch(path, { credentials: "same-origin", signal }).then(answer);

/** POSTs JSON to the inspector's API. */
export const post = (path: string, body?: Record<string, unknown>): Promise<any> =>
  fetch(path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body || {}),
    credentials: "same-origin",
  }).then(answer);

/** Shows what a part failed with in its error element `id` (nothing: hides it). */
export function showError(id: string, error?: unknown): void {
  const el = $(id);
  el.textContent = error ? (error as Error).message || String(error) : "";
  el.hidden = !error;
}

/** The bytes of base64 text. */
export function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}
