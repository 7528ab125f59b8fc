/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * The main page's executors: a card each, made once and updated in place (what is typed in it
 * stays), with its actions (assign a session, drain, start an agent turn).
 */
import type { ExecutorView } from "../views.ts";
import { $, h } from "./dom.ts";
import { act, api, enc, errorSlot, postButton } from "./page-actions.ts";
import { badge, json, seconds } from "./page-format.ts";
import { mark, now, state, ui } from "./page-state.ts";

interface Card {
  root: HTMLDivElement;
  title: HTMLHeadingElement;
  status: HTMLDivElement;
  ids: HTMLDivElement;
  chips: HTMLDivElement;
  capabilities: HTMLPreElement;
  actions: HTMLDivElement;
  turn: HTMLDivElement;
}

function executorStatus(e: ExecutorView): HTMLSpanElement {
  if (e.gone) return badge("gone: " + e.gone, "bad");
  if (ui.offline) return badge("unknown: harness unreachable", "warn");
  if (!e.connected) return badge("disconnected", "warn");
  if (e.draining) return badge("draining", "warn");
  return badge("connected", "ok");
}

// Cards are made once per executor and updated in place: what is typed in them stays.
const cards = new Map<string, Card>();

/** Draws the executors again. */
export function renderExecutors(): void {
  const list = [...state.executors.values()];
  for (const [id, card] of cards) {
    if (!state.executors.has(id)) {
      card.root.remove();
      cards.delete(id);
    }
  }
  if (list.length === 0) {
    return $("executors").replaceChildren(h("p", { class: "empty" }, "No executor connected yet."));
  }
  const container = $("executors");
  for (const child of [...container.children]) {
    if (!(child as HTMLElement).dataset.executor) child.remove();
  }
  for (const e of list) {
    let card = cards.get(e.id);
    if (!card) {
      card = executorCard(e);
      cards.set(e.id, card);
      container.append(card.root);
    }
    updateCard(card, e);
  }
}

function executorCard(e: ExecutorView): Card {
  const sessionInput = h("input", {
    type: "text",
    placeholder: "session id (optional)",
    "aria-label": "session id",
  });
  const parts = {
    title: h("h3", {}),
    status: h("div", { class: "row" }),
    ids: h("div", { class: "meta mono" }),
    chips: h("div", { class: "chips" }),
    capabilities: h("pre", {}),
    actions: h(
      "div",
      { class: "row" },
      sessionInput,
      h("button", {
        type: "button",
        class: "assign",
        onclick: (ev: Event) =>
          act(ev.currentTarget, async () => {
            const made = await api("api/executors/" + enc(e.id) + "/sessions", {
              session_id: sessionInput.value.trim() || undefined,
            });
            ui.session = made.session_id;
            sessionInput.value = "";
            mark("form");
          }, "assign:" + e.id),
      }, "Assign session"),
      errorSlot("assign:" + e.id),
      postButton("Drain", "drain", "api/executors/" + enc(e.id) + "/drain", "drain:" + e.id),
    ),
    turn: turnForm(e),
  };
  const root = h(
    "div",
    { class: "card executor", "data-executor": e.id },
    parts.title,
    parts.status,
    parts.ids,
    parts.chips,
    h("details", {}, h("summary", {}, "capabilities"), parts.capabilities),
    parts.actions,
    parts.turn,
  );
  return { ...parts, root };
}

/** What an executor's lease says now. */
export function leaseText(e: ExecutorView): string {
  if (e.gone) return "gone: no longer held by the harness";
  if (ui.offline) return "lease unknown: the harness is not answering";
  if (e.leaseExpiresAt === undefined) return "no lease";
  const left = e.leaseExpiresAt - now();
  if (left <= 0) return "lease expired";
  return (e.connected ? "lease expires in " : "may reconnect within ") + seconds(left);
}

function executorState(e: ExecutorView): string {
  if (e.gone) return "gone";
  if (ui.offline) return "unknown";
  return e.connected ? (e.draining ? "draining" : "connected") : "disconnected";
}

function updateCard(card: Card, e: ExecutorView): void {
  card.root.dataset.state = executorState(e);
  card.title.replaceChildren(
    e.name,
    " ",
    h("span", { class: "meta" }, e.version + " · " + e.os + "/" + e.arch),
  );
  card.status.replaceChildren(
    executorStatus(e),
    badge(e.protocol),
    h("span", {
      class: "meta lease",
      "data-lease": e.leaseExpiresAt === undefined ? "" : e.leaseExpiresAt,
    }, leaseText(e)),
  );
  card.ids.replaceChildren(
    e.id,
    e.machineId ? " · machine " + e.machineId : "",
    e.environmentId ? " · env " + e.environmentId : "",
  );
  card.chips.replaceChildren(
    ...e.tools.map((t) => h("span", { class: "chip tool", title: t.description || "" }, t.name)),
    ...capabilityFlags(e.capabilities).map((flag) => h("span", { class: "chip" }, flag)),
  );
  card.capabilities.textContent = json(e.capabilities);
  // A gone executor takes nothing more: its actions go (and are off, should one show).
  card.actions.hidden = Boolean(e.gone);
  card.turn.hidden = Boolean(e.gone) || !e.agent;
  const controls = card.root.querySelectorAll<
    HTMLButtonElement | HTMLInputElement | HTMLTextAreaElement
  >(
    ".row button, .row input, .turn-form button, .turn-form textarea, .turn-form input",
  );
  for (const control of controls) control.disabled = Boolean(e.gone);
}

function capabilityFlags(capabilities: unknown): string[] {
  const out: string[] = [];
  for (const [key, value] of Object.entries((capabilities || {}) as Record<string, unknown>)) {
    if (key === "tools" || key === "tool_definitions") continue;
    if (
      value === true ||
      (value && typeof value === "object" && (value as { enabled?: unknown }).enabled !== false)
    ) out.push(key);
  }
  return out;
}

function turnForm(e: ExecutorView): HTMLDivElement {
  const session = h("input", {
    type: "text",
    placeholder: "session id (optional)",
    "aria-label": "agent session id",
    class: "turn-session",
  });
  const text = h("textarea", {
    rows: 2,
    placeholder: "What the agent is asked",
    "aria-label": "turn input",
    class: "turn-text",
  });
  return h(
    "div",
    { class: "turn-form" },
    h("div", { class: "meta" }, "Start an agent turn"),
    text,
    h(
      "div",
      { class: "row" },
      session,
      h("button", {
        type: "button",
        class: "start-turn",
        onclick: (ev: Event) =>
          act(ev.currentTarget, async () => {
            if (!text.value.trim()) throw new Error("the turn needs some input");
            await api("api/executors/" + enc(e.id) + "/turns", {
              text: text.value,
              session_id: session.value.trim() || undefined,
            });
            text.value = "";
          }, "turn:" + e.id),
      }, "Start turn"),
      errorSlot("turn:" + e.id),
    ),
  );
}
