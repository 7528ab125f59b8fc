/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/** The main page's tool calls: the running ones first, then the finished, each with its details. */
import type { CallView } from "../views.ts";
import { $, h, table } from "./dom.ts";
import { describeError, enc, postButton } from "./page-actions.ts";
import { badge, clock, json, seconds, short } from "./page-format.ts";
import { mark, now, state, ui } from "./page-state.ts";

/** What a call's result holds that the page shows. */
interface Result {
  content?: { type?: string; text?: string }[];
  structured_content?: unknown;
  error?: unknown;
}

/** The states of a call that has not finished. */
export const RUNNING: ReadonlySet<string> = new Set(["requested", "dispatched", "acknowledged"]);

function callBadge(c: CallView): HTMLSpanElement {
  if (c.state === "refused") return badge("refused", "bad");
  if (RUNNING.has(c.state)) return badge(c.state === "acknowledged" ? "running" : c.state, "run");
  if (c.error) return badge("failed", "bad");
  const kind = c.outcome === "completed"
    ? (c.isError ? "warn" : "ok")
    : c.outcome === "canceled"
    ? "warn"
    : "bad";
  return badge((c.outcome || "settled") + (c.isError ? " (tool error)" : ""), kind);
}

/** When a call was sent, acknowledged and done (or how long it has run). */
export function timings(c: CallView): string {
  const start = c.dispatchedAt !== undefined ? c.dispatchedAt : c.requestedAt;
  const parts: string[] = [];
  if (start !== undefined) parts.push(clock(start));
  if (c.acknowledgedAt !== undefined && start !== undefined) {
    parts.push("ack +" + seconds(c.acknowledgedAt - start));
  }
  if (c.settledAt !== undefined && start !== undefined) {
    parts.push("done +" + seconds(c.settledAt - start));
  } else if (RUNNING.has(c.state) && start !== undefined) {
    parts.push("running " + seconds(now() - start));
  }
  if (c.dispatches > 1) parts.push("sent " + c.dispatches + "×");
  return parts.join(" · ");
}

/** Draws the tool calls again. */
export function renderCalls(): void {
  const list = [...state.calls.values()];
  const pending = list.filter((c) => RUNNING.has(c.state)).reverse();
  const finished = list.filter((c) => !RUNNING.has(c.state)).sort((a, b) =>
    (b.settledAt || 0) - (a.settledAt || 0)
  );
  if (list.length === 0) {
    return $("calls").replaceChildren(h("p", { class: "empty" }, "No tool call yet."));
  }
  const rows: HTMLTableRowElement[] = [];
  for (const c of [...pending, ...finished]) {
    const open = ui.expanded.has(c.id);
    const session = state.sessions.get(c.sessionId);
    rows.push(h(
      "tr",
      { class: "call", "data-call": c.id, "data-state": c.state, "data-outcome": c.outcome || "" },
      h("td", { class: "mono" }, short(c.id)),
      h("td", { class: "mono" }, c.tool),
      h("td", { class: "mono" }, c.sessionId),
      h(
        "td",
        {},
        callBadge(c),
        c.progress && RUNNING.has(c.state)
          ? h("span", { class: "meta" }, " " + progressText(c.progress))
          : null,
      ),
      h("td", { class: "meta timing" }, timings(c)),
      h(
        "td",
        { class: "actions" },
        RUNNING.has(c.state) && c.state !== "requested" && session && session.state !== "ended" &&
          postButton(
            "Cancel",
            "cancel danger",
            "api/sessions/" + enc(c.sessionId) + "/calls/" + enc(c.id) + "/cancel",
            "cancel:" + c.id,
          ),
        " ",
        h("button", {
          type: "button",
          class: "details",
          onclick: () => {
            if (open) ui.expanded.delete(c.id);
            else ui.expanded.add(c.id);
            mark("calls");
          },
        }, open ? "Hide" : "Details"),
      ),
    ));
    if (open) {
      rows.push(h(
        "tr",
        { class: "call-details", "data-call-details": c.id },
        h("td", { colspan: 6 }, callDetails(c)),
      ));
    }
  }
  $("calls").replaceChildren(table(["call", "tool", "session", "state", "timing", ""], rows));
}

function progressText(p: NonNullable<CallView["progress"]>): string {
  const parts: string[] = [];
  if (p.message) parts.push(p.message);
  if (p.progress !== undefined) {
    parts.push(p.total !== undefined ? p.progress + "/" + p.total : String(p.progress));
  }
  return parts.join(" ");
}

function callDetails(c: CallView): HTMLElement[] {
  const output = state.output.get(c.id) || [];
  const parts = [
    h("div", { class: "meta" }, "input"),
    h("pre", { class: "input" }, json(c.input === undefined ? null : c.input)),
  ];
  if (c.traceId) {
    parts.unshift(
      h(
        "div",
        { class: "meta trace" },
        "trace id ",
        h("span", { class: "mono", "data-trace-id": c.traceId }, c.traceId),
      ),
    );
  }
  if (output.length) {
    parts.push(
      h("div", { class: "meta" }, "output"),
      h(
        "pre",
        { class: "output" },
        output.map((chunk) => h("span", { class: chunk.stream }, chunk.text)),
      ),
    );
  }
  if (c.result) {
    const result = c.result as Result;
    const text = (result.content || []).filter((b) => b && b.type === "text").map((b) => b.text)
      .join("");
    if (text) {
      parts.push(h("div", { class: "meta" }, "result"), h("pre", { class: "result-text" }, text));
    }
    if (result.structured_content !== undefined) {
      parts.push(
        h("div", { class: "meta" }, "structured result"),
        h("pre", { class: "result" }, json(result.structured_content)),
      );
    }
    if (result.error) parts.push(h("pre", { class: "error" }, json(result.error)));
  }
  if (c.error) parts.push(h("pre", { class: "error" }, describeError(c.error)));
  return parts;
}
