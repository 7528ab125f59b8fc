/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/** The main page's agent part: the platform's interactions (approve, deny, answer) and the turns. */
import { $, h, listTable } from "./dom.ts";
import { act, api, enc, errorSlot } from "./page-actions.ts";
import { badge, clock, seconds } from "./page-format.ts";
import { state } from "./page-state.ts";

/** What an interaction holds that the page shows (as the platform sent it). */
interface Interaction {
  kind?: string;
  title?: string;
  prompt?: string;
  options?: unknown;
  outcome?: string;
  turn_id?: string;
  tool_use_id?: string;
  expires_at?: string;
}

/** One of an interaction's options. */
interface Option {
  id: unknown;
  label: string;
  description?: string;
}

/** Draws the interactions again (the open ones first, then the latest). */
export function renderInteractions(): void {
  const list = [...state.interactions.values()].sort((a, b) =>
    (a.status === "open" ? 0 : 1) - (b.status === "open" ? 0 : 1) || b.at - a.at
  ).slice(0, 50);
  $("interactions").replaceChildren(...list.map((view) => {
    const i = (view.interaction || {}) as Interaction;
    const open = view.status === "open";
    const key = "answer:" + view.id;
    const answer = (outcome: string, value?: unknown) => (ev: Event) =>
      act(
        ev.currentTarget,
        () => api("api/interactions/" + enc(view.id) + "/respond", { outcome, answer: value }),
        key,
      );
    const buttons: HTMLElement[] = [];
    if (open) {
      const options: Option[] = Array.isArray(i.options) ? i.options : [];
      if (i.kind === "permission") {
        if (options.length) {
          for (const o of options) {
            const deny = /^deny|^reject/i.test(String(o.id));
            buttons.push(h("button", {
              type: "button",
              class: deny ? "deny danger" : "approve primary",
              title: o.description || "",
              onclick: answer(deny ? "denied" : "approved", o.id),
            }, o.label));
          }
        } else {
          buttons.push(
            h(
              "button",
              { type: "button", class: "approve primary", onclick: answer("approved") },
              "Approve",
            ),
            h(
              "button",
              { type: "button", class: "deny danger", onclick: answer("denied") },
              "Deny",
            ),
          );
        }
      } else {
        for (const o of options) {
          buttons.push(
            h(
              "button",
              { type: "button", class: "answer", onclick: answer("answered", o.id) },
              o.label,
            ),
          );
        }
        const free = h("input", { type: "text", placeholder: "answer", "aria-label": "answer" });
        buttons.push(
          free,
          h("button", {
            type: "button",
            class: "answer-text",
            onclick: (ev: Event) =>
              act(
                ev.currentTarget,
                () =>
                  api("api/interactions/" + enc(view.id) + "/respond", {
                    outcome: "answered",
                    answer: free.value,
                  }),
                key,
              ),
          }, "Answer"),
        );
      }
      buttons.push(errorSlot(key));
    }
    return h(
      "div",
      {
        class: "interaction" + (open ? "" : " settled"),
        "data-interaction": view.id,
        "data-status": view.status,
      },
      h(
        "h3",
        {},
        i.title || (i.kind === "permission" ? "Permission" : "Question"),
        " ",
        badge(view.status + (i.outcome ? ": " + i.outcome : ""), open ? "warn" : ""),
      ),
      i.prompt ? h("pre", { class: "prompt" }, i.prompt) : null,
      h(
        "div",
        { class: "meta mono" },
        "session " + view.sessionId + (i.turn_id ? " · turn " + i.turn_id : "") +
          (i.tool_use_id ? " · tool use " + i.tool_use_id : "") +
          (i.expires_at ? " · expires " + i.expires_at : ""),
      ),
      buttons.length ? h("div", { class: "row" }, buttons) : null,
    );
  }));
}

/** Draws the agent turns again. */
export function renderTurns(): void {
  const list = [...state.turns.values()].reverse();
  $("turns").replaceChildren(listTable(
    "No agent turn yet.",
    ["turn", "session", "state", "time"],
    list.map((t) =>
      h(
        "tr",
        { class: "turn", "data-turn": t.turnId, "data-state": t.state },
        h("td", { class: "mono" }, t.turnId),
        h("td", { class: "mono" }, t.sessionId),
        h(
          "td",
          {},
          badge(t.state, t.state === "running" ? "run" : t.state === "completed" ? "ok" : "warn"),
        ),
        h(
          "td",
          { class: "meta" },
          clock(t.startedAt) +
            (t.endedAt !== undefined ? " · " + seconds(t.endedAt - t.startedAt) : ""),
        ),
      )
    ),
  ));
}
