/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/** The main page's sessions: a table, with each live one's actions (call a tool, its machine, stop). */
import type { SessionView } from "../views.ts";
import { $, h, listTable } from "./dom.ts";
import { enc, postButton } from "./page-actions.ts";
import { renderFormChoices } from "./page-call-form.ts";
import { ago, badge } from "./page-format.ts";
import { state, ui } from "./page-state.ts";

const BADGE_KINDS: Readonly<Record<string, string>> = {
  ready: "ok",
  assigning: "run",
  assigned: "run",
  stopping: "warn",
  ended: "",
};

function sessionBadge(s: SessionView): HTMLSpanElement {
  const kind = BADGE_KINDS[s.state];
  if (ui.offline && s.state !== "ended") return badge(s.state + " (last known)", "");
  return badge(s.state + (s.reason ? ": " + s.reason : ""), kind);
}

/** Draws the sessions again. */
export function renderSessions(): void {
  const list = [...state.sessions.values()].reverse();
  $("sessions").replaceChildren(listTable(
    "No session.",
    ["session", "executor", "state", "since", ""],
    list.map((s) =>
      h(
        "tr",
        { "data-session": s.id },
        h("td", { class: "mono" }, s.id),
        h("td", {}, (state.executors.get(s.executorId) || { name: s.executorId }).name),
        h("td", {}, sessionBadge(s)),
        h("td", { class: "meta since", "data-since": s.since }, ago(s.since)),
        h(
          "td",
          { class: "actions" },
          s.state !== "ended" && [
            h("button", {
              type: "button",
              class: "use",
              onclick: () => {
                ui.session = s.id;
                renderFormChoices();
                $("call-form").scrollIntoView({ block: "nearest" });
              },
            }, "Call tool"),
            " ",
            h("a", {
              class: "machine button",
              href: "machine.html?session=" + enc(s.id),
              title: "Its terminal, processes and files",
            }, "Machine"),
            " ",
            postButton(
              "Stop",
              "stop danger",
              "api/sessions/" + enc(s.id) + "/stop",
              "stop:" + s.id,
            ),
          ],
        ),
      )
    ),
  ));
}
