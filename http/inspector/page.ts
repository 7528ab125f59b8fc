/**
 * The inspector's page: HTML and JavaScript written by hand and served as strings (no build
 * step, no framework; its style is in `page-style.ts`). The script builds every element with
 * `document.createElement` and puts what executors send in text nodes only — never `innerHTML` —
 * and the content security policy the handler sends runs no other script.
 */

/** The page. */
export const INDEX_HTML = String.raw`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>bma inspector</title>
<link rel="icon" href="favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="app.css">
<script type="module" src="app.js"></script>
</head>
<body>
<header>
  <h1>bma inspector</h1>
  <span id="conn" class="badge">connecting</span>
  <span class="spacer"></span>
  <button type="button" id="login-link" title="A one-time URL for another browser">Login link</button>
  <input id="login-url" readonly hidden aria-label="one-time login URL">
</header>
<div id="offline" role="status" hidden></div>
<main><fieldset id="live">
  <section id="executors-section"><h2>Executors</h2><div id="executors" class="cards"><p class="empty">No executor connected yet.</p></div></section>
  <section id="sessions-section"><h2>Sessions</h2><div id="sessions"><p class="empty">No session.</p></div></section>
  <section id="call-section"><h2>Call a tool</h2>
    <form id="call-form" autocomplete="off">
      <div class="row">
        <label>Session <select id="call-session" name="session"></select></label>
        <label>Tool <select id="call-tool" name="tool"></select></label>
        <label class="inline"><input type="checkbox" id="call-raw"> edit as JSON</label>
      </div>
      <p id="call-description" class="hint"></p>
      <div id="call-fields"></div>
      <textarea id="call-json" rows="6" hidden aria-label="input as JSON"></textarea>
      <div class="row"><button type="submit" id="call-submit">Call</button><span id="call-error" class="error" role="alert"></span></div>
    </form>
  </section>
  <section id="calls-section"><h2>Tool calls</h2><div id="calls"><p class="empty">No tool call yet.</p></div></section>
  <section id="agent-section"><h2>Agent turns and interactions</h2><div id="interactions"></div><div id="turns"><p class="empty">No agent turn yet.</p></div></section>
  <section id="events-section"><h2>Events</h2><div id="events" class="feed"><p class="empty">No event yet.</p></div></section>
  <section id="notices-section" hidden><h2>Notices</h2><ul id="notices"></ul></section>
</fieldset></main>
</body>
</html>
`;

/** The page's script. */
export const APP_JS = String.raw`import { $, h } from "./dom.js";

const state = {
  offset: 0, executors: new Map(), sessions: new Map(), calls: new Map(), output: new Map(),
  events: [], previews: new Map(), turns: new Map(), interactions: new Map(), notices: [],
};
const ui = {
  expanded: new Set(), openEvents: new Set(), session: "", tool: "", dirty: new Set(), timer: 0,
  // Whether the live stream is down (the harness or its inspector stopped): the page shows it
  // everywhere and its actions are off. What an action failed with, by action, shown beside it.
  offline: false, lostAt: 0, errors: new Map(),
};

const now = () => Date.now() + state.offset;
function ago(at) { return at === undefined ? "" : seconds(now() - at) + " ago"; }
function seconds(ms) {
  if (ms < 1000) return Math.max(0, Math.round(ms)) + " ms";
  if (ms < 120000) return (ms / 1000).toFixed(1) + " s";
  return Math.round(ms / 60000) + " min";
}
function clock(at) { return at === undefined ? "" : new Date(at).toLocaleTimeString(); }
function json(value) { return JSON.stringify(value, null, 2); }
function oneLine(value) { const text = JSON.stringify(value); return text.length > 400 ? text.slice(0, 400) + "…" : text; }
function short(id) { return String(id).length > 18 ? String(id).slice(0, 18) + "…" : String(id); }
function badge(text, kind) { return h("span", { class: "badge " + (kind || "") }, text); }
function describeError(error) {
  if (!error) return "failed";
  // An HTTP answer's error is {code, message, data}; a call's own is {name, message, reason, issues}.
  if (error.name === undefined && error.code !== undefined) error = { ...(error.data || {}), name: String(error.code), message: error.message };
  let text = (error.name || "Error") + ": " + (error.message || "");
  // The reason is said once: most messages name it already ("refused (draining)").
  if (error.reason && !String(error.message || "").includes(error.reason)) text += " (" + error.reason + ")";
  if (Array.isArray(error.issues)) {
    text += " — " + error.issues.map((i) => (Array.isArray(i.path) ? i.path.join(".") : "") + ": " + i.message).join("; ");
  }
  return text;
}

async function api(path, body) {
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
const enc = encodeURIComponent;
// Runs an action of the page. Its failure is shown once, beside the control that caused it
// (the element of errorSlot(key) that its renderer placed there, kept across re-renders).
function act(button, run, key) {
  key = key || button.id || "action";
  button.disabled = true;
  showError(key, "");
  Promise.resolve().then(run).then(() => showError(key, ""), (error) => {
    showError(key, error.message);
    if (!document.querySelector(errorSelector(key)) && button.isConnected) button.after(errorSlot(key));
  }).finally(() => { button.disabled = button.id === "login-link" && ui.offline; });
}
function errorSelector(key) { return "[data-error-for=\"" + CSS.escape(key) + "\"]"; }
function errorSlot(key) {
  const text = ui.errors.get(key) || "";
  return h("span", { class: "error action-error", role: "alert", "data-error-for": key, hidden: !text }, text);
}
function showError(key, text) {
  if (text) ui.errors.set(key, text); else ui.errors.delete(key);
  for (const el of document.querySelectorAll(errorSelector(key))) { el.textContent = text; el.hidden = !text; }
}

// ---- live state -------------------------------------------------------------------------

function load(snapshot) {
  state.offset = snapshot.now - Date.now();
  state.executors = new Map(snapshot.executors.map((e) => [e.id, e]));
  state.sessions = new Map(snapshot.sessions.map((s) => [s.id, s]));
  state.calls = new Map();
  state.output = new Map();
  for (const call of snapshot.calls) {
    const { output, ...view } = call;
    state.calls.set(view.id, view);
    state.output.set(view.id, output.map((c) => ({ stream: c.stream, text: c.text })));
  }
  state.events = snapshot.events;
  state.previews = new Map(snapshot.previews.map((p) => [p.eventId, p]));
  state.turns = new Map(snapshot.turns.map((t) => [t.sessionId + "/" + t.turnId, t]));
  state.interactions = new Map(snapshot.interactions.map((i) => [i.id, i]));
  state.notices = snapshot.notices;
  mark("all");
}

function apply(batch) {
  state.offset = batch.now - Date.now();
  for (const u of batch.updates) {
    switch (u.op) {
      case "executor": state.executors.set(u.executor.id, u.executor); mark("executors", "form"); break;
      case "session": state.sessions.delete(u.session.id); state.sessions.set(u.session.id, u.session); mark("sessions", "form"); break;
      case "call": state.calls.set(u.call.id, u.call); mark("calls"); break;
      case "output": {
        const chunks = state.output.get(u.id) || [];
        const last = chunks[chunks.length - 1];
        if (last && last.stream === u.stream) last.text += u.text; else chunks.push({ stream: u.stream, text: u.text });
        state.output.set(u.id, chunks);
        mark("calls");
        break;
      }
      case "event": state.events.push(u.event); if (state.events.length > 500) state.events.shift(); mark("events"); break;
      case "preview": {
        const p = state.previews.get(u.eventId) || { sessionId: u.sessionId, turnId: u.turnId, eventId: u.eventId, deltaType: u.deltaType, text: "" };
        p.text += u.append;
        state.previews.set(u.eventId, p);
        mark("events");
        break;
      }
      case "turn": state.turns.set(u.turn.sessionId + "/" + u.turn.turnId, u.turn); mark("turns"); break;
      case "interaction": state.interactions.set(u.interaction.id, u.interaction); mark("interactions"); break;
      case "notice": state.notices.push(u.notice); mark("notices"); break;
      case "forget": {
        const maps = { executor: state.executors, session: state.sessions, call: state.calls, preview: state.previews, turn: state.turns, interaction: state.interactions };
        maps[u.kind].delete(u.id);
        if (u.kind === "call") state.output.delete(u.id);
        mark("all");
        break;
      }
    }
  }
}

function mark(...parts) {
  for (const part of parts) ui.dirty.add(part);
  if (!ui.timer) ui.timer = setTimeout(render, 30);
}

function render() {
  ui.timer = 0;
  const parts = new Set(ui.dirty);
  ui.dirty.clear();
  const dirty = (part) => parts.has("all") || parts.has(part);
  if (dirty("executors")) renderExecutors();
  if (dirty("sessions")) renderSessions();
  if (dirty("form")) renderFormChoices();
  if (dirty("calls")) renderCalls();
  if (dirty("interactions")) renderInteractions();
  if (dirty("turns")) renderTurns();
  if (dirty("events")) renderEvents();
  if (dirty("notices")) renderNotices();
}

// ---- executors ----------------------------------------------------------------------------

function executorStatus(e) {
  if (e.gone) return badge("gone: " + e.gone, "bad");
  if (ui.offline) return badge("unknown: harness unreachable", "warn");
  if (!e.connected) return badge("disconnected", "warn");
  if (e.draining) return badge("draining", "warn");
  return badge("connected", "ok");
}

// Cards are made once per executor and updated in place: what is typed in them stays.
const cards = new Map();
function renderExecutors() {
  const list = [...state.executors.values()];
  for (const [id, card] of cards) if (!state.executors.has(id)) { card.root.remove(); cards.delete(id); }
  if (list.length === 0) return $("executors").replaceChildren(h("p", { class: "empty" }, "No executor connected yet."));
  const container = $("executors");
  for (const child of [...container.children]) if (!child.dataset.executor) child.remove();
  for (const e of list) {
    let card = cards.get(e.id);
    if (!card) { card = executorCard(e); cards.set(e.id, card); container.append(card.root); }
    updateCard(card, e);
  }
}

function executorCard(e) {
  const sessionInput = h("input", { type: "text", placeholder: "session id (optional)", "aria-label": "session id" });
  const card = {
    title: h("h3", {}),
    status: h("div", { class: "row" }),
    ids: h("div", { class: "meta mono" }),
    chips: h("div", { class: "chips" }),
    capabilities: h("pre", {}),
    actions: h("div", { class: "row" },
      sessionInput,
      h("button", { type: "button", class: "assign", onclick: (ev) => act(ev.currentTarget, async () => {
        const made = await api("api/executors/" + enc(e.id) + "/sessions", { session_id: sessionInput.value.trim() || undefined });
        ui.session = made.session_id;
        sessionInput.value = "";
        mark("form");
      }, "assign:" + e.id) }, "Assign session"),
      errorSlot("assign:" + e.id),
      h("button", { type: "button", class: "drain", onclick: (ev) => act(ev.currentTarget, () => api("api/executors/" + enc(e.id) + "/drain"), "drain:" + e.id) }, "Drain"),
      errorSlot("drain:" + e.id)),
    turn: turnForm(e),
  };
  card.root = h("div", { class: "card executor", "data-executor": e.id }, card.title, card.status, card.ids, card.chips,
    h("details", {}, h("summary", {}, "capabilities"), card.capabilities), card.actions, card.turn);
  return card;
}

function leaseText(e) {
  if (e.gone) return "gone: no longer held by the harness";
  if (ui.offline) return "lease unknown: the harness is not answering";
  if (e.leaseExpiresAt === undefined) return "no lease";
  const left = e.leaseExpiresAt - now();
  if (left <= 0) return "lease expired";
  return (e.connected ? "lease expires in " : "may reconnect within ") + seconds(left);
}

function executorState(e) {
  if (e.gone) return "gone";
  if (ui.offline) return "unknown";
  return e.connected ? (e.draining ? "draining" : "connected") : "disconnected";
}

function updateCard(card, e) {
  card.root.dataset.state = executorState(e);
  card.title.replaceChildren(e.name, " ", h("span", { class: "meta" }, e.version + " · " + e.os + "/" + e.arch));
  card.status.replaceChildren(executorStatus(e), badge(e.protocol), h("span", { class: "meta lease", "data-lease": e.leaseExpiresAt === undefined ? "" : e.leaseExpiresAt }, leaseText(e)));
  card.ids.replaceChildren(e.id, e.machineId ? " · machine " + e.machineId : "", e.environmentId ? " · env " + e.environmentId : "");
  card.chips.replaceChildren(...e.tools.map((t) => h("span", { class: "chip tool", title: t.description || "" }, t.name)),
    ...capabilityFlags(e.capabilities).map((flag) => h("span", { class: "chip" }, flag)));
  card.capabilities.textContent = json(e.capabilities);
  // A gone executor takes nothing more: its actions go (and are off, should one show).
  card.actions.hidden = Boolean(e.gone);
  card.turn.hidden = Boolean(e.gone) || !e.agent;
  for (const control of card.root.querySelectorAll(".row button, .row input, .turn-form button, .turn-form textarea, .turn-form input")) control.disabled = Boolean(e.gone);
}

function capabilityFlags(capabilities) {
  const out = [];
  for (const [key, value] of Object.entries(capabilities || {})) {
    if (key === "tools" || key === "tool_definitions") continue;
    if (value === true || (value && typeof value === "object" && value.enabled !== false)) out.push(key);
  }
  return out;
}

function turnForm(e) {
  const session = h("input", { type: "text", placeholder: "session id (optional)", "aria-label": "agent session id", class: "turn-session" });
  const text = h("textarea", { rows: 2, placeholder: "What the agent is asked", "aria-label": "turn input", class: "turn-text" });
  return h("div", { class: "turn-form" }, h("div", { class: "meta" }, "Start an agent turn"), text,
    h("div", { class: "row" }, session, h("button", { type: "button", class: "start-turn", onclick: (ev) => act(ev.currentTarget, async () => {
      if (!text.value.trim()) throw new Error("the turn needs some input");
      await api("api/executors/" + enc(e.id) + "/turns", { text: text.value, session_id: session.value.trim() || undefined });
      text.value = "";
    }, "turn:" + e.id) }, "Start turn"), errorSlot("turn:" + e.id)));
}

// ---- sessions -----------------------------------------------------------------------------

function sessionBadge(s) {
  const kind = { ready: "ok", assigning: "run", assigned: "run", stopping: "warn", ended: "" }[s.state];
  if (ui.offline && s.state !== "ended") return badge(s.state + " (last known)", "");
  return badge(s.state + (s.reason ? ": " + s.reason : ""), kind);
}

function renderSessions() {
  const list = [...state.sessions.values()].reverse();
  if (list.length === 0) return $("sessions").replaceChildren(h("p", { class: "empty" }, "No session."));
  $("sessions").replaceChildren(h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "session"), h("th", {}, "executor"), h("th", {}, "state"), h("th", {}, "since"), h("th", {}))),
    h("tbody", {}, list.map((s) => h("tr", { "data-session": s.id },
      h("td", { class: "mono" }, s.id),
      h("td", {}, (state.executors.get(s.executorId) || { name: s.executorId }).name),
      h("td", {}, sessionBadge(s)),
      h("td", { class: "meta since", "data-since": s.since }, ago(s.since)),
      h("td", { class: "actions" }, s.state !== "ended" && [
        h("button", { type: "button", class: "use", onclick: () => { ui.session = s.id; renderFormChoices(); $("call-form").scrollIntoView({ block: "nearest" }); } }, "Call tool"),
        " ",
        h("a", { class: "machine button", href: "machine.html?session=" + enc(s.id), title: "Its terminal, processes and files" }, "Machine"),
        " ",
        h("button", { type: "button", class: "stop danger", onclick: (ev) => act(ev.currentTarget, () => api("api/sessions/" + enc(s.id) + "/stop"), "stop:" + s.id) }, "Stop"),
        errorSlot("stop:" + s.id),
      ]))))));
}

// ---- the call form ------------------------------------------------------------------------

function liveSessions() { return [...state.sessions.values()].filter((s) => s.state !== "ended" && s.state !== "stopping"); }
function toolsOf(sessionId) {
  const session = state.sessions.get(sessionId);
  const executor = session && state.executors.get(session.executorId);
  return executor ? executor.tools : [];
}

function renderFormChoices() {
  const sessions = liveSessions();
  if (!sessions.some((s) => s.id === ui.session)) ui.session = sessions.length ? sessions[sessions.length - 1].id : "";
  const select = $("call-session");
  select.replaceChildren(...(sessions.length ? sessions.map((s) => h("option", { value: s.id, selected: s.id === ui.session }, s.id + " (" + s.state + ")")) : [h("option", { value: "" }, "no live session")]));
  select.value = ui.session;
  const tools = toolsOf(ui.session);
  const previous = ui.tool;
  if (!tools.some((t) => t.name === ui.tool)) ui.tool = tools.length ? tools[0].name : "";
  const toolSelect = $("call-tool");
  const wanted = tools.map((t) => t.name).join("\n");
  if (toolSelect.dataset.tools !== wanted) {
    toolSelect.replaceChildren(...(tools.length ? tools.map((t) => h("option", { value: t.name }, t.name)) : [h("option", { value: "" }, "no tool")]));
    toolSelect.dataset.tools = wanted;
  }
  toolSelect.value = ui.tool;
  if (previous !== ui.tool || $("call-fields").dataset.tool !== ui.tool) renderFields();
}

function currentTool() { return toolsOf(ui.session).find((t) => t.name === ui.tool); }

function renderFields() {
  const tool = currentTool();
  const fields = $("call-fields");
  fields.dataset.tool = ui.tool;
  $("call-description").textContent = tool ? tool.description || "" : "";
  $("call-error").textContent = "";
  const schema = tool && tool.inputSchema;
  const props = schema && schema.type === "object" && schema.properties && typeof schema.properties === "object" ? schema.properties : null;
  if (!props) {
    fields.replaceChildren(h("p", { class: "hint" }, tool ? "No input schema advertised: give the input as JSON." : ""));
    $("call-raw").checked = Boolean(tool);
    $("call-json").hidden = !tool;
    if (tool && !$("call-json").value) $("call-json").value = "{}";
    return;
  }
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  fields.replaceChildren(...Object.entries(props).map(([name, prop]) => field(name, prop || {}, required.has(name))));
  showRaw($("call-raw").checked);
}

// "Edit as JSON" replaces the fields: they are hidden and disabled (a disabled control is
// neither validated, so a required one does not hold the form back, nor sent).
function showRaw(raw) {
  $("call-json").hidden = !raw;
  const fields = $("call-fields");
  const controls = fields.querySelectorAll("[data-name]");
  fields.hidden = raw && controls.length > 0;
  for (const control of controls) control.disabled = raw;
}

// Back from JSON to the fields: what the JSON says fills them (what does not parse is left).
function fillFields(text) {
  let input;
  try { input = JSON.parse(text || "{}"); } catch { return; }
  if (!input || typeof input !== "object" || Array.isArray(input)) return;
  for (const control of $("call-fields").querySelectorAll("[data-name]")) {
    const value = input[control.dataset.name];
    const kind = control.dataset.kind;
    if (kind === "boolean") control.checked = value === true;
    else if (value === undefined) control.value = "";
    else if (kind === "string") control.value = String(value);
    else if (kind === "integer" || kind === "number") control.value = String(value);
    else control.value = kind === "enum" ? JSON.stringify(value) : json(value);
  }
}

const LONG = new Set(["content", "old_string", "new_string"]);
function field(name, prop, required) {
  const type = Array.isArray(prop.type) ? prop.type[0] : prop.type;
  let control;
  let kind = "json";
  if (Array.isArray(prop.enum)) {
    kind = "enum";
    control = h("select", {}, h("option", { value: "" }, ""), prop.enum.map((v) => h("option", { value: JSON.stringify(v) }, String(v))));
  } else if (type === "string") {
    kind = "string";
    control = LONG.has(name) || (prop.maxLength || 0) > 200 ? h("textarea", { rows: 4 }) : h("input", { type: "text" });
  } else if (type === "integer" || type === "number") {
    kind = type;
    control = h("input", { type: "number", step: type === "integer" ? 1 : "any", min: prop.minimum });
  } else if (type === "boolean") {
    kind = "boolean";
    control = h("input", { type: "checkbox", checked: prop.default === true });
  } else {
    control = h("textarea", { rows: 2, placeholder: type === "array" ? "[]" : "{}" });
  }
  control.dataset.name = name;
  control.dataset.kind = kind;
  control.setAttribute("aria-label", name);
  if (required) control.required = true;
  return h("label", { class: "field" }, h("span", {}, name, required ? " *" : "", h("small", {}, " " + (type || "any"))), control,
    prop.description ? h("small", {}, prop.description) : null);
}

function collect() {
  if ($("call-raw").checked) {
    try { return JSON.parse($("call-json").value || "{}"); } catch { throw new Error("the input is not JSON"); }
  }
  return collectFields();
}

function collectFields() {
  const input = {};
  for (const control of $("call-fields").querySelectorAll("[data-name]")) {
    const name = control.dataset.name;
    const kind = control.dataset.kind;
    if (kind === "boolean") { if (control.checked) input[name] = true; continue; }
    const raw = control.value;
    if (raw === "") continue;
    if (kind === "string") input[name] = raw;
    else if (kind === "integer" || kind === "number") input[name] = Number(raw);
    else {
      try { input[name] = JSON.parse(raw); } catch { throw new Error(name + " is not JSON"); }
    }
  }
  return input;
}

function setupForm() {
  $("call-session").addEventListener("change", (ev) => { ui.session = ev.target.value; renderFormChoices(); });
  $("call-tool").addEventListener("change", (ev) => { ui.tool = ev.target.value; renderFields(); });
  $("call-raw").addEventListener("change", (ev) => {
    if (ev.target.checked) {
      try { $("call-json").value = json(collectFields()); } catch { $("call-json").value = "{}"; }
    } else fillFields($("call-json").value);
    showRaw(ev.target.checked);
  });
  $("call-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    $("call-error").textContent = "";
    const button = $("call-submit");
    button.disabled = true;
    Promise.resolve().then(async () => {
      if (!ui.session) throw new Error("assign a session first");
      if (!ui.tool) throw new Error("the executor advertises no tool");
      const input = collect();
      const made = await api("api/sessions/" + enc(ui.session) + "/calls", { tool: ui.tool, input });
      ui.expanded.add(made.tool_call_id);
      mark("calls");
    }).catch((error) => { $("call-error").textContent = error.message; }).finally(() => { button.disabled = false; });
  });
  $("login-link").addEventListener("click", (ev) => act(ev.currentTarget, async () => {
    const { url } = await api("api/login-links");
    const box = $("login-url");
    box.value = url;
    box.hidden = false;
    box.select();
  }, "login-link"));
}

// ---- tool calls ---------------------------------------------------------------------------

const RUNNING = new Set(["requested", "dispatched", "acknowledged"]);
function callBadge(c) {
  if (c.state === "refused") return badge("refused", "bad");
  if (RUNNING.has(c.state)) return badge(c.state === "acknowledged" ? "running" : c.state, "run");
  if (c.error) return badge("failed", "bad");
  const kind = c.outcome === "completed" ? (c.isError ? "warn" : "ok") : c.outcome === "canceled" ? "warn" : "bad";
  return badge((c.outcome || "settled") + (c.isError ? " (tool error)" : ""), kind);
}

function timings(c) {
  const start = c.dispatchedAt !== undefined ? c.dispatchedAt : c.requestedAt;
  const parts = [];
  if (start !== undefined) parts.push(clock(start));
  if (c.acknowledgedAt !== undefined && start !== undefined) parts.push("ack +" + seconds(c.acknowledgedAt - start));
  if (c.settledAt !== undefined && start !== undefined) parts.push("done +" + seconds(c.settledAt - start));
  else if (RUNNING.has(c.state) && start !== undefined) parts.push("running " + seconds(now() - start));
  if (c.dispatches > 1) parts.push("sent " + c.dispatches + "×");
  return parts.join(" · ");
}

function renderCalls() {
  const list = [...state.calls.values()];
  const pending = list.filter((c) => RUNNING.has(c.state)).reverse();
  const finished = list.filter((c) => !RUNNING.has(c.state)).sort((a, b) => (b.settledAt || 0) - (a.settledAt || 0));
  if (list.length === 0) return $("calls").replaceChildren(h("p", { class: "empty" }, "No tool call yet."));
  const rows = [];
  for (const c of [...pending, ...finished]) {
    const open = ui.expanded.has(c.id);
    const session = state.sessions.get(c.sessionId);
    rows.push(h("tr", { class: "call", "data-call": c.id, "data-state": c.state, "data-outcome": c.outcome || "" },
      h("td", { class: "mono" }, short(c.id)),
      h("td", { class: "mono" }, c.tool),
      h("td", { class: "mono" }, c.sessionId),
      h("td", {}, callBadge(c), c.progress && RUNNING.has(c.state) ? h("span", { class: "meta" }, " " + progressText(c.progress)) : null),
      h("td", { class: "meta timing" }, timings(c)),
      h("td", { class: "actions" },
        RUNNING.has(c.state) && c.state !== "requested" && session && session.state !== "ended" &&
          [h("button", { type: "button", class: "cancel danger", onclick: (ev) => act(ev.currentTarget, () => api("api/sessions/" + enc(c.sessionId) + "/calls/" + enc(c.id) + "/cancel"), "cancel:" + c.id) }, "Cancel"), errorSlot("cancel:" + c.id)],
        " ",
        h("button", { type: "button", class: "details", onclick: () => { open ? ui.expanded.delete(c.id) : ui.expanded.add(c.id); mark("calls"); } }, open ? "Hide" : "Details"))));
    if (open) rows.push(h("tr", { class: "call-details", "data-call-details": c.id }, h("td", { colspan: 6 }, callDetails(c))));
  }
  $("calls").replaceChildren(h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "call"), h("th", {}, "tool"), h("th", {}, "session"), h("th", {}, "state"), h("th", {}, "timing"), h("th", {}))), h("tbody", {}, rows)));
}

function progressText(p) {
  const parts = [];
  if (p.message) parts.push(p.message);
  if (p.progress !== undefined) parts.push(p.total !== undefined ? p.progress + "/" + p.total : String(p.progress));
  return parts.join(" ");
}

function callDetails(c) {
  const output = state.output.get(c.id) || [];
  const parts = [h("div", { class: "meta" }, "input"), h("pre", { class: "input" }, json(c.input === undefined ? null : c.input))];
  if (c.traceId) parts.unshift(h("div", { class: "meta trace" }, "trace id ", h("span", { class: "mono", "data-trace-id": c.traceId }, c.traceId)));
  if (output.length) parts.push(h("div", { class: "meta" }, "output"), h("pre", { class: "output" }, output.map((chunk) => h("span", { class: chunk.stream }, chunk.text))));
  if (c.result) {
    const text = (c.result.content || []).filter((b) => b && b.type === "text").map((b) => b.text).join("");
    if (text) parts.push(h("div", { class: "meta" }, "result"), h("pre", { class: "result-text" }, text));
    if (c.result.structured_content !== undefined) parts.push(h("div", { class: "meta" }, "structured result"), h("pre", { class: "result" }, json(c.result.structured_content)));
    if (c.result.error) parts.push(h("pre", { class: "error" }, json(c.result.error)));
  }
  if (c.error) parts.push(h("pre", { class: "error" }, describeError(c.error)));
  return parts;
}

// ---- agent --------------------------------------------------------------------------------

function renderInteractions() {
  const list = [...state.interactions.values()].sort((a, b) => (a.status === "open" ? 0 : 1) - (b.status === "open" ? 0 : 1) || b.at - a.at).slice(0, 50);
  $("interactions").replaceChildren(...list.map((view) => {
    const i = view.interaction || {};
    const open = view.status === "open";
    const key = "answer:" + view.id;
    const answer = (outcome, value) => (ev) => act(ev.currentTarget, () => api("api/interactions/" + enc(view.id) + "/respond", { outcome, answer: value }), key);
    const buttons = [];
    if (open) {
      const options = Array.isArray(i.options) ? i.options : [];
      if (i.kind === "permission") {
        if (options.length) {
          for (const o of options) {
            const deny = /^deny|^reject/i.test(String(o.id));
            buttons.push(h("button", { type: "button", class: deny ? "deny danger" : "approve primary", title: o.description || "", onclick: answer(deny ? "denied" : "approved", o.id) }, o.label));
          }
        } else {
          buttons.push(h("button", { type: "button", class: "approve primary", onclick: answer("approved") }, "Approve"),
            h("button", { type: "button", class: "deny danger", onclick: answer("denied") }, "Deny"));
        }
      } else {
        for (const o of options) buttons.push(h("button", { type: "button", class: "answer", onclick: answer("answered", o.id) }, o.label));
        const free = h("input", { type: "text", placeholder: "answer", "aria-label": "answer" });
        buttons.push(free, h("button", { type: "button", class: "answer-text", onclick: (ev) => act(ev.currentTarget, () => api("api/interactions/" + enc(view.id) + "/respond", { outcome: "answered", answer: free.value }), key) }, "Answer"));
      }
      buttons.push(errorSlot(key));
    }
    return h("div", { class: "interaction" + (open ? "" : " settled"), "data-interaction": view.id, "data-status": view.status },
      h("h3", {}, i.title || (i.kind === "permission" ? "Permission" : "Question"), " ", badge(view.status + (i.outcome ? ": " + i.outcome : ""), open ? "warn" : "")),
      i.prompt ? h("pre", { class: "prompt" }, i.prompt) : null,
      h("div", { class: "meta mono" }, "session " + view.sessionId + (i.turn_id ? " · turn " + i.turn_id : "") + (i.tool_use_id ? " · tool use " + i.tool_use_id : "") + (i.expires_at ? " · expires " + i.expires_at : "")),
      buttons.length ? h("div", { class: "row" }, buttons) : null);
  }));
}

function renderTurns() {
  const list = [...state.turns.values()].reverse();
  if (list.length === 0) return $("turns").replaceChildren(h("p", { class: "empty" }, "No agent turn yet."));
  $("turns").replaceChildren(h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "turn"), h("th", {}, "session"), h("th", {}, "state"), h("th", {}, "time"))),
    h("tbody", {}, list.map((t) => h("tr", { class: "turn", "data-turn": t.turnId, "data-state": t.state },
      h("td", { class: "mono" }, t.turnId),
      h("td", { class: "mono" }, t.sessionId),
      h("td", {}, badge(t.state, t.state === "running" ? "run" : t.state === "completed" ? "ok" : "warn")),
      h("td", { class: "meta" }, clock(t.startedAt) + (t.endedAt !== undefined ? " · " + seconds(t.endedAt - t.startedAt) : "")))))));
}

// ---- events -------------------------------------------------------------------------------

function renderEvents() {
  const entries = [];
  for (const p of state.previews.values()) {
    entries.push(h("div", { class: "entry preview", "data-preview": p.eventId },
      h("span", { class: "meta" }, "preview"), h("span", { class: "mono" }, p.sessionId), h("span", { class: "mono" }, p.deltaType), h("span", { class: "body" }, p.text)));
  }
  for (const e of state.events.slice(-200).reverse()) {
    const open = ui.openEvents.has(e.seq);
    entries.push(h("div", { class: "entry" + (open ? " open" : ""), "data-event": e.type, "data-session": e.sessionId },
      h("span", { class: "meta" }, clock(e.at)),
      h("span", { class: "mono" }, e.sessionId),
      h("span", { class: "mono" }, e.type),
      h("span", { class: "body mono", onclick: () => { open ? ui.openEvents.delete(e.seq) : ui.openEvents.add(e.seq); mark("events"); } }, open ? json(e.event) : oneLine(e.event))));
  }
  if (entries.length === 0) entries.push(h("p", { class: "empty" }, "No event yet."));
  $("events").replaceChildren(...entries);
}

function renderNotices() {
  $("notices-section").hidden = state.notices.length === 0;
  $("notices").replaceChildren(...state.notices.slice(-20).reverse().map((n) => h("li", {}, h("span", { class: "meta" }, clock(n.at) + " "), n.text)));
}

// ---- connection ---------------------------------------------------------------------------

// Without its live stream the page knows nothing current: every part says so (executors
// "unknown", sessions "last known", a banner) and every action is off (the fieldset that holds
// them is disabled) until a snapshot comes again.
function setOffline(offline, why) {
  if (offline && !ui.offline) ui.lostAt = now();
  const changed = ui.offline !== offline;
  ui.offline = offline;
  document.body.classList.toggle("offline", offline);
  $("live").disabled = offline;
  $("login-link").disabled = offline;
  $("login-url").disabled = offline;
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

function connect() {
  const conn = $("conn");
  const source = new EventSource("api/stream");
  source.addEventListener("snapshot", (ev) => {
    setOffline(false);
    load(JSON.parse(ev.data));
    conn.textContent = "live";
    conn.className = "badge ok";
  });
  source.addEventListener("update", (ev) => apply(JSON.parse(ev.data)));
  source.addEventListener("error", () => {
    if (source.readyState === EventSource.CLOSED) {
      conn.textContent = "disconnected";
      conn.className = "badge bad";
      setOffline(true, "the inspector refused the page (it was restarted, or this browser's session ended): open a new login link.");
    } else {
      conn.textContent = "reconnecting";
      conn.className = "badge bad";
      setOffline(true, "it is not answering (stopped?); the page keeps trying to reconnect.");
    }
  });
}

setupForm();
connect();
// Leases, sessions' ages and running calls count on between updates, in place.
setInterval(() => {
  for (const el of document.querySelectorAll("[data-lease]")) {
    const e = state.executors.get(el.closest("[data-executor]").dataset.executor);
    if (e) el.textContent = leaseText(e);
  }
  for (const el of document.querySelectorAll("[data-since]")) el.textContent = ago(Number(el.dataset.since));
  for (const row of document.querySelectorAll("tr.call")) {
    const c = state.calls.get(row.dataset.call);
    if (c && RUNNING.has(c.state)) row.querySelector(".timing").textContent = timings(c);
  }
}, 1000);
`;

/** The inspector's icon, served at `favicon.svg` (a magnifier on the page's accent colour). */
export const FAVICON_SVG =
  `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#2f6fde"/><circle cx="14" cy="14" r="7" fill="none" stroke="#fff" stroke-width="3"/><path d="M19 19l6 6" stroke="#fff" stroke-width="3.5" stroke-linecap="round"/></svg>`;
