/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/** The main page's event feed (agent previews first, then the latest events) and its notices. */
import { $, h } from "./dom.ts";
import { clock, json, oneLine } from "./page-format.ts";
import { mark, state, ui } from "./page-state.ts";

/** Draws the events again. */
export function renderEvents(): void {
  const entries: HTMLElement[] = [];
  for (const p of state.previews.values()) {
    entries.push(h(
      "div",
      { class: "entry preview", "data-preview": p.eventId },
      h("span", { class: "meta" }, "preview"),
      h("span", { class: "mono" }, p.sessionId),
      h("span", { class: "mono" }, p.deltaType),
      h("span", { class: "body" }, p.text),
    ));
  }
  for (const e of state.events.slice(-200).reverse()) {
    const open = ui.openEvents.has(e.seq);
    entries.push(h(
      "div",
      { class: "entry" + (open ? " open" : ""), "data-event": e.type, "data-session": e.sessionId },
      h("span", { class: "meta" }, clock(e.at)),
      h("span", { class: "mono" }, e.sessionId),
      h("span", { class: "mono" }, e.type),
      h("span", {
        class: "body mono",
        onclick: () => {
          if (open) ui.openEvents.delete(e.seq);
          else ui.openEvents.add(e.seq);
          mark("events");
        },
      }, open ? json(e.event) : oneLine(e.event)),
    ));
  }
  if (entries.length === 0) entries.push(h("p", { class: "empty" }, "No event yet."));
  $("events").replaceChildren(...entries);
}

/** Draws the notices again (the latest 20; the section shows when there is one). */
export function renderNotices(): void {
  $("notices-section").hidden = state.notices.length === 0;
  $("notices").replaceChildren(
    ...state.notices.slice(-20).reverse().map((n) =>
      h("li", {}, h("span", { class: "meta" }, clock(n.at) + " "), n.text)
    ),
  );
}
