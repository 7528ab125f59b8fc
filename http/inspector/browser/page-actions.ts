/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * How the main page acts: its API requests, the words for what one failed with, and where the
 * failure shows (beside the control that caused it).
 */
import type { ErrorView } from "../views.ts";
import { errorView, h } from "./dom.ts";
import { ui } from "./page-state.ts";

/** An error the inspector answered with, in words. */
export function describeError(answered: ErrorView | undefined): string {
  const error = errorView(answered);
  if (!error) return "failed";
  let text = (error.name || "Error") + ": " + (error.message || "");
  // The reason is said once: most messages name it already ("refused (draining)").
  if (error.reason && !String(error.message || "").includes(error.reason)) {
    text += " (" + error.reason + ")";
  }
  if (Array.isArray(error.issues)) {
    text += " — " +
      error.issues.map((i: { path?: unknown; message?: string }) =>
        (Array.isArray(i.path) ? i.path.join(".") : "") + ": " + i.message
      ).join("; ");
  }
  return text;
}

/** POSTs JSON to the inspector's API; its answer, or an error in words. */
export async function api(path: string, body?: Record<string, unknown>): Promise<any> {
  const response = await fetch(path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body || {}),
    credentials: "same-origin",
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(describeError(data.error));
  return data;
}

/** A path segment. */
export const enc = encodeURIComponent;

/**
 * Runs an action of the page. Its failure is shown once, beside the control that caused it
 * (the element of errorSlot(key) that its renderer placed there, kept across re-renders).
 */
export function act(target: EventTarget | null, run: () => unknown, key?: string): void {
  const button = target as HTMLButtonElement;
  key = key || button.id || "action";
  const slot = key;
  button.disabled = true;
  showError(key, "");
  Promise.resolve().then(run).then(() => showError(slot, ""), (error) => {
    showError(slot, (error as Error).message);
    if (!document.querySelector(errorSelector(slot)) && button.isConnected) {
      button.after(errorSlot(slot));
    }
  }).finally(() => {
    button.disabled = button.id === "login-link" && ui.offline;
  });
}

/**
 * A button that POSTs to `path` (no body), and the slot beside it where its failure shows:
 * `key` names the action (`"stop:" + id`).
 */
export function postButton(
  label: string,
  className: string,
  path: string,
  key: string,
): [HTMLButtonElement, HTMLSpanElement] {
  return [
    h("button", {
      type: "button",
      class: className,
      onclick: (ev: Event) => act(ev.currentTarget, () => api(path), key),
    }, label),
    errorSlot(key),
  ];
}

function errorSelector(key: string): string {
  return '[data-error-for="' + CSS.escape(key) + '"]';
}

/** Where the failure of action `key` shows (what it failed with last, if it did). */
export function errorSlot(key: string): HTMLSpanElement {
  const text = ui.errors.get(key) || "";
  return h("span", {
    class: "error action-error",
    role: "alert",
    "data-error-for": key,
    hidden: !text,
  }, text);
}

function showError(key: string, text: string): void {
  if (text) ui.errors.set(key, text);
  else ui.errors.delete(key);
  for (const el of document.querySelectorAll<HTMLElement>(errorSelector(key))) {
    el.textContent = text;
    el.hidden = !text;
  }
}
