/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * The inspector's main page, in the browser (served as `app.js`; its markup is `INDEX_HTML` in
 * `../page.ts`): it loads the harness's live state from `api/stream` (a snapshot, then updates),
 * draws what changed, and acts through the inspector's API. Every element is built with
 * `document.createElement` (`h`), what executors send goes in text nodes only — never
 * `innerHTML` — and the content security policy the inspector sends runs no other script.
 */
import type { InspectorBatch, InspectorSnapshot } from "../views.ts";
import { $ } from "./dom.ts";
import { renderInteractions, renderTurns } from "./page-agent.ts";
import { renderFormChoices, setupForm } from "./page-call-form.ts";
import { renderCalls, RUNNING, timings } from "./page-calls.ts";
import { renderEvents, renderNotices } from "./page-events.ts";
import { leaseText, renderExecutors } from "./page-executors.ts";
import { ago, clock } from "./page-format.ts";
import { renderSessions } from "./page-sessions.ts";
import { apply, load, now, type Part, renderWith, state, ui } from "./page-state.ts";

/** Draws the parts marked dirty again. */
function render(): void {
  ui.timer = 0;
  const parts = new Set(ui.dirty);
  ui.dirty.clear();
  const dirty = (part: Part) => parts.has("all") || parts.has(part);
  if (dirty("executors")) renderExecutors();
  if (dirty("sessions")) renderSessions();
  if (dirty("form")) renderFormChoices();
  if (dirty("calls")) renderCalls();
  if (dirty("interactions")) renderInteractions();
  if (dirty("turns")) renderTurns();
  if (dirty("events")) renderEvents();
  if (dirty("notices")) renderNotices();
}

// Without its live stream the page knows nothing current: every part says so (executors
// "unknown", sessions "last known", a banner) and every action is off (the fieldset that holds
// them is disabled) until a snapshot comes again.
function setOffline(offline: boolean, why?: string): void {
  if (offline && !ui.offline) ui.lostAt = now();
  const changed = ui.offline !== offline;
  ui.offline = offline;
  document.body.classList.toggle("offline", offline);
  $<HTMLFieldSetElement>("live").disabled = offline;
  $<HTMLButtonElement>("login-link").disabled = offline;
  $<HTMLInputElement>("login-url").disabled = offline;
  const banner = $("offline");
  banner.hidden = !offline;
  if (offline) {
    banner.textContent = "Lost the harness at " + clock(ui.lostAt) + ": " + why +
      " What is shown below is as it was then; the actions are off until the page is live again.";
  }
  // At once: nothing may read live while the badge says otherwise.
  if (changed) {
    ui.dirty.add("all");
    clearTimeout(ui.timer);
    render();
  }
}

function connect(): void {
  const conn = $("conn");
  const source = new EventSource("api/stream");
  source.addEventListener("snapshot", (ev) => {
    setOffline(false);
    load(JSON.parse(ev.data) as InspectorSnapshot);
    conn.textContent = "live";
    conn.className = "badge ok";
  });
  source.addEventListener("update", (ev) => apply(JSON.parse(ev.data) as InspectorBatch));
  source.addEventListener("error", () => {
    if (source.readyState === EventSource.CLOSED) {
      conn.textContent = "disconnected";
      conn.className = "badge bad";
      setOffline(
        true,
        "the inspector refused the page (it was restarted, or this browser's session ended): open a new login link.",
      );
    } else {
      conn.textContent = "reconnecting";
      conn.className = "badge bad";
      setOffline(true, "it is not answering (stopped?); the page keeps trying to reconnect.");
    }
  });
}

renderWith(render);
setupForm();
connect();
// Leases, sessions' ages and running calls count on between updates, in place.
setInterval(() => {
  for (const el of document.querySelectorAll<HTMLElement>("[data-lease]")) {
    const e = state.executors.get(el.closest<HTMLElement>("[data-executor]")!.dataset.executor!);
    if (e) el.textContent = leaseText(e);
  }
  for (const el of document.querySelectorAll<HTMLElement>("[data-since]")) {
    el.textContent = ago(Number(el.dataset.since));
  }
  for (const row of document.querySelectorAll<HTMLElement>("tr.call")) {
    const c = state.calls.get(row.dataset.call!);
    if (c && RUNNING.has(c.state)) row.querySelector(".timing")!.textContent = timings(c);
  }
}, 1000);
