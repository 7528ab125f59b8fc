/**
 * The inspector's machine page (`machine.html?session=<id>`): a terminal of the session in
 * xterm.js, its processes and their output, its files to browse, download and upload. Written
 * by hand like the main page: elements made with `document.createElement`, what executors send
 * put in text nodes (or terminal cells), never `innerHTML`. Its routes are in `machine.ts`.
 */

/** The page. */
export const MACHINE_HTML = String.raw`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>bma inspector: machine</title>
<link rel="icon" href="favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="app.css">
<link rel="stylesheet" href="xterm.css">
<link rel="stylesheet" href="machine.css">
<script type="module" src="machine.js"></script>
</head>
<body>
<header>
  <a href="./" id="back">&larr; inspector</a>
  <h1>Session <code id="session-id"></code></h1>
  <span id="session-state" class="badge">connecting</span>
  <span id="executor-name" class="meta"></span>
</header>
<div id="offline" role="status" hidden></div>
<main><fieldset id="live">
  <section id="terminal-section"><h2>Terminal</h2>
    <div class="row">
      <select id="terminal-choice" aria-label="terminal"></select>
      <button type="button" id="terminal-new" class="primary">New terminal</button>
      <button type="button" id="terminal-close" class="danger" disabled>Close terminal</button>
      <span id="terminal-status" class="meta" role="status"></span>
    </div>
    <div id="terminal-error" class="error" role="alert" hidden></div>
    <div id="terminal"><p class="empty">No terminal open: New terminal opens the executor's shell here.</p></div>
  </section>
  <section id="processes-section"><h2>Processes</h2>
    <div class="row"><button type="button" id="processes-refresh">Refresh</button><span id="processes-error" class="error" role="alert" hidden></span></div>
    <div id="processes"><p class="empty">Loading…</p></div>
    <div id="process-view" hidden>
      <h3 id="process-title"></h3>
      <div class="row">
        <label class="inline"><input type="radio" name="stream" value="stdout" checked> stdout</label>
        <label class="inline"><input type="radio" name="stream" value="stderr"> stderr</label>
        <button type="button" id="process-signal" class="danger">Send SIGTERM</button>
        <span id="process-status" class="meta" role="status"></span>
      </div>
      <pre id="process-text"></pre>
    </div>
  </section>
  <section id="files-section"><h2>Files</h2>
    <nav id="files-path" class="row" aria-label="directory"></nav>
    <div id="files-error" class="error" role="alert" hidden></div>
    <div id="files"><p class="empty">Loading…</p></div>
    <p class="hint">Directories show when they hold files.</p>
    <form id="upload-form" class="row">
      <input type="file" id="upload-file" aria-label="file to upload" required>
      <button type="submit" id="upload-submit">Upload here</button>
      <span id="upload-status" class="meta" role="status"></span>
    </form>
  </section>
</fieldset></main>
</body>
</html>
`;

/** The page's own style (on top of the main page's `app.css`). */
export const MACHINE_CSS = String.raw`
#back { color: var(--accent); text-decoration: none; }
#live { grid-template-columns: minmax(0, 1fr); }
#terminal { height: 380px; background: #000; border-radius: 6px; padding: 4px; overflow: hidden; }
#terminal .empty { color: #bbb; padding: 8px; }
#processes { overflow-x: auto; }
#process-text { max-height: 360px; min-height: 3em; }
#files ul { list-style: none; margin: 4px 0; padding: 0; }
#files li { padding: 3px 0; border-bottom: 1px dashed var(--line); overflow-wrap: anywhere; }
#files a, #files button.link, #files-path button.link { color: var(--accent); }
button.link { border: 0; background: none; padding: 0 2px; text-decoration: underline; }
#files-path { gap: 2px; }
@media (max-width: 600px) { #terminal { height: 300px; } }
`;

/** The page's script (an ES module: it imports xterm.js and its fit addon from the inspector). */
export const MACHINE_JS = String.raw`import { Terminal } from "./xterm.mjs";
import { FitAddon } from "./addon-fit.mjs";
import { $, h } from "./dom.js";

const enc = encodeURIComponent;
const sessionId = new URLSearchParams(location.search).get("session") || "";
const base = "api/sessions/" + enc(sessionId);
const page = { session: undefined, executor: undefined, offline: false, terminal: undefined, cwd: ".", process: undefined };

function describe(error) {
  if (!error) return "failed";
  // An HTTP answer's error is {code, message, data}; a call's own is {name, message, reason, issues}.
  if (error.name === undefined && error.code !== undefined) error = { ...(error.data || {}), name: String(error.code), message: error.message };
  const text = (error.name || "Error") + ": " + (error.message || "");
  return error.reason && !String(error.message || "").includes(error.reason) ? text + " (" + error.reason + ")" : text;
}
async function answer(response) {
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(describe(data.error));
  return data;
}
const get = (path, signal) => fetch(path, { credentials: "same-origin", signal }).then(answer);
const post = (path, body) => fetch(path, {
  method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body || {}), credentials: "same-origin",
}).then(answer);
function showError(id, error) {
  const el = $(id);
  el.textContent = error ? error.message || String(error) : "";
  el.hidden = !error;
}
function fromBase64(text) { return Uint8Array.from(atob(text), (c) => c.charCodeAt(0)); }

// ---- the session ----------------------------------------------------------------------------

// The page follows the harness's live state for this session only: whether it is still there.
function setSession(session) {
  page.session = session;
  const badge = $("session-state");
  const ended = !session || session.state === "ended";
  badge.textContent = !session ? "unknown session" : session.state + (session.reason ? ": " + session.reason : "");
  badge.className = "badge " + (ended ? "bad" : session.state === "ready" ? "ok" : "run");
  $("executor-name").textContent = page.executor ? "on " + page.executor.name : "";
  $("live").disabled = ended || page.offline;
}
function followSession() {
  const source = new EventSource("api/stream");
  source.addEventListener("snapshot", (ev) => {
    const snapshot = JSON.parse(ev.data);
    page.offline = false;
    $("offline").hidden = true;
    const session = snapshot.sessions.find((s) => s.id === sessionId);
    page.executor = session && snapshot.executors.find((e) => e.id === session.executorId);
    setSession(session);
  });
  source.addEventListener("update", (ev) => {
    for (const u of JSON.parse(ev.data).updates) {
      if (u.op === "session" && u.session.id === sessionId) setSession(u.session);
      if (u.op === "executor" && page.session && u.executor.id === page.session.executorId) { page.executor = u.executor; setSession(page.session); }
    }
  });
  source.addEventListener("error", () => {
    page.offline = true;
    const banner = $("offline");
    banner.hidden = false;
    banner.textContent = source.readyState === EventSource.CLOSED
      ? "The inspector refused the page (its session ended, or it restarted): open a new login link."
      : "Lost the harness: the page keeps trying to reconnect; the actions are off until then.";
    setSession(page.session);
  });
}

// ---- the terminal ---------------------------------------------------------------------------

function terminalStatus(text) { $("terminal-status").textContent = text; }

async function listTerminals(select) {
  const { terminals } = await get(base + "/terminals");
  const choice = $("terminal-choice");
  choice.replaceChildren(...(terminals.length
    ? terminals.map((t) => h("option", { value: t.id }, t.id + (t.exited ? " (exited " + (t.exitCode ?? "") + ")" : "")))
    : [h("option", { value: "" }, "no terminal")]));
  const wanted = select || (page.terminal && page.terminal.id) || (terminals.filter((t) => !t.exited).pop() || {}).id;
  if (wanted) choice.value = wanted;
  return terminals;
}

// One terminal is shown at a time. Its output comes over a stream whose event ids are byte
// offsets, so a reconnect (EventSource sends the last id) and a reload (which starts from what
// the inspector keeps) both show every byte once.
function attach(view) {
  detach();
  const term = new Terminal({ cols: view.cols, rows: view.rows, convertEol: false, cursorBlink: true, scrollback: 5000,
    fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace", fontSize: 13 });
  const fit = new FitAddon();
  term.loadAddon(fit);
  const container = $("terminal");
  container.replaceChildren();
  term.open(container);
  const t = { id: view.id, term, fit, source: undefined, pending: "", sending: false, resizeTimer: 0, exited: view.exited, onWindowResize: () => fit.fit() };
  page.terminal = t;
  $("terminal-close").disabled = view.exited;
  container.dataset.terminal = view.id;
  // The size shown, and the size the program was last told: equal once a resize has landed.
  container.dataset.size = container.dataset.sent = view.cols + "x" + view.rows;
  term.onData((data) => { t.pending += data; flushInput(t); });
  term.onResize(({ cols, rows }) => {
    container.dataset.size = cols + "x" + rows;
    clearTimeout(t.resizeTimer);
    t.resizeTimer = setTimeout(() => {
      if (!t.exited) post("api/terminals/" + enc(t.id) + "/resize", { cols, rows })
        .then(() => { if (page.terminal === t) container.dataset.sent = cols + "x" + rows; })
        .catch((e) => showError("terminal-error", e));
    }, 100);
  });
  addEventListener("resize", t.onWindowResize);
  const source = new EventSource("api/terminals/" + enc(view.id) + "/stream?from=0");
  t.source = source;
  source.addEventListener("open", () => { if (!t.exited) terminalStatus("connected"); });
  // What was kept is drawn at the size it was written at, then fitted to the window: xterm.js
  // reflows its lines, and the program redraws for the new size.
  source.addEventListener("live", () => term.write("", () => fit.fit()));
  source.addEventListener("output", (ev) => term.write(fromBase64(JSON.parse(ev.data).data)));
  source.addEventListener("skipped", (ev) => {
    const { from, to } = JSON.parse(ev.data);
    term.write("\r\n\x1b[2m[" + (to - from) + " earlier bytes are no longer kept]\x1b[0m\r\n");
  });
  source.addEventListener("exit", (ev) => {
    const { exit_code } = JSON.parse(ev.data);
    t.exited = true;
    source.close();
    terminalStatus("exited" + (exit_code === null ? "" : " with code " + exit_code));
    $("terminal-close").disabled = true;
    listTerminals(t.id).catch(() => {});
  });
  source.addEventListener("error", () => {
    if (t.exited) return;
    terminalStatus(source.readyState === EventSource.CLOSED ? "disconnected: the inspector refused the stream" : "reconnecting…");
  });
  term.focus();
  return t;
}

function detach() {
  const t = page.terminal;
  if (!t) return;
  if (t.source) t.source.close();
  removeEventListener("resize", t.onWindowResize);
  t.term.dispose();
  page.terminal = undefined;
}

// Keystrokes go in order, one request at a time, what was typed meanwhile in the next.
function flushInput(t) {
  if (t.sending || !t.pending || t.exited) return;
  const data = t.pending;
  t.pending = "";
  t.sending = true;
  post("api/terminals/" + enc(t.id) + "/input", { data })
    .then(() => showError("terminal-error"), (e) => showError("terminal-error", e))
    .finally(() => { t.sending = false; flushInput(t); });
}

async function newTerminal() {
  showError("terminal-error");
  const probe = new Terminal({ cols: 80, rows: 24 });
  const fit = new FitAddon();
  probe.loadAddon(fit);
  const container = $("terminal");
  container.replaceChildren();
  probe.open(container);
  const size = fit.proposeDimensions() || { cols: 80, rows: 24 };
  probe.dispose();
  const view = await post(base + "/terminals", { cols: size.cols, rows: size.rows });
  await listTerminals(view.id);
  attach(view);
}

async function showChosenTerminal() {
  const id = $("terminal-choice").value;
  if (!id || (page.terminal && page.terminal.id === id)) return;
  const { terminals } = await get(base + "/terminals");
  const view = terminals.find((t) => t.id === id);
  if (view) attach(view);
  if (view && view.exited) terminalStatus("exited" + (view.exitCode === null || view.exitCode === undefined ? "" : " with code " + view.exitCode));
}

// ---- processes ------------------------------------------------------------------------------

function processState(p) {
  if (p.running) return h("span", { class: "badge run" }, "running");
  return h("span", { class: "badge" }, p.signal ? "killed by " + p.signal : "exited " + (p.exit_code ?? ""));
}

async function refreshProcesses() {
  try {
    const { processes } = await get(base + "/processes");
    showError("processes-error");
    if (processes.length === 0) return $("processes").replaceChildren(h("p", { class: "empty" }, "No process."));
    $("processes").replaceChildren(h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, "process"), h("th", {}, "command"), h("th", {}, "pid"), h("th", {}, "state"), h("th", {}))),
      h("tbody", {}, processes.map((p) => h("tr", { "data-process": p.process_id },
        h("td", { class: "mono" }, p.process_id),
        h("td", { class: "mono" }, p.argv.join(" ")),
        h("td", {}, p.pid ?? ""),
        h("td", {}, processState(p)),
        h("td", { class: "actions" }, h("button", { type: "button", class: "output", onclick: () => openProcess(p) }, "Output")))))));
    if (page.process) {
      const now = processes.find((p) => p.process_id === page.process.info.process_id);
      if (now) { page.process.info = now; $("process-signal").disabled = !now.running; }
    }
  } catch (error) {
    showError("processes-error", error);
  }
}

// The output of one stream of one process, read from offset 0 to its end, then followed.
function openProcess(info) {
  if (page.process) page.process.abort.abort();
  const stream = document.querySelector("input[name=stream]:checked").value;
  const view = { info, stream, abort: new AbortController() };
  page.process = view;
  $("process-view").hidden = false;
  $("process-title").textContent = info.process_id + ": " + info.argv.join(" ");
  $("process-signal").disabled = !info.running;
  $("process-text").textContent = "";
  $("process-text").dataset.stream = stream;
  readProcess(view).catch((error) => {
    if (!view.abort.signal.aborted) $("process-status").textContent = describe(error);
  });
}

async function readProcess(view) {
  const decoder = new TextDecoder();
  const out = $("process-text");
  let offset = 0;
  for (;;) {
    const path = base + "/processes/" + enc(view.info.process_id) + "/output?stream=" + view.stream + "&offset=" + offset + "&wait_ms=" + (view.info.running ? 2000 : 0);
    const chunk = await get(path, view.abort.signal);
    if (view.abort.signal.aborted) return;
    if (chunk.offset > offset) out.append("[" + (chunk.offset - offset) + " earlier bytes are no longer kept]\n");
    const bytes = chunk.encoding === "base64" ? fromBase64(chunk.data) : new TextEncoder().encode(chunk.data);
    out.append(decoder.decode(bytes, { stream: !chunk.eof }));
    offset = chunk.next_offset;
    $("process-status").textContent = chunk.eof ? "end of " + view.stream + " (" + offset + " bytes)" : offset + " bytes, following";
    if (chunk.eof) return;
    if (bytes.byteLength === 0 && !view.info.running) await new Promise((r) => setTimeout(r, 1000));
  }
}

// ---- files ----------------------------------------------------------------------------------

const join = (dir, name) => dir === "." ? name : dir + "/" + name;

async function listFiles(dir) {
  try {
    const listing = await get(base + "/files?path=" + enc(dir));
    page.cwd = listing.path;
    showError("files-error");
    renderPath();
    const entries = [
      ...listing.directories.map((d) => h("li", { "data-dir": d }, h("button", { type: "button", class: "link", onclick: () => listFiles(join(page.cwd, d)) }, d + "/"))),
      ...listing.files.map((f) => h("li", { "data-file": f }, h("a", { href: base + "/files/download?path=" + enc(join(page.cwd, f)), download: f }, f))),
    ];
    $("files").replaceChildren(entries.length ? h("ul", {}, entries) : h("p", { class: "empty" }, "No file here."));
    if (listing.truncated) $("files").append(h("p", { class: "hint" }, "The listing is cut short: more files are here than the glob tool returns."));
  } catch (error) {
    showError("files-error", error);
  }
}

function renderPath() {
  const parts = page.cwd === "." ? [] : page.cwd.split("/");
  const crumbs = [h("button", { type: "button", class: "link", onclick: () => listFiles(".") }, "workdir")];
  parts.forEach((part, i) => {
    crumbs.push(" / ", h("button", { type: "button", class: "link", onclick: () => listFiles(parts.slice(0, i + 1).join("/")) }, part));
  });
  $("files-path").replaceChildren(...crumbs);
}

async function upload(event) {
  event.preventDefault();
  const file = $("upload-file").files[0];
  if (!file) return;
  const button = $("upload-submit");
  button.disabled = true;
  $("upload-status").textContent = "uploading " + file.name + "…";
  try {
    const result = await fetch(base + "/files/upload?path=" + enc(join(page.cwd, file.name)), {
      method: "POST", headers: { "content-type": "application/octet-stream" }, body: file, credentials: "same-origin",
    }).then(answer);
    $("upload-status").textContent = "uploaded " + result.path + " (" + result.size + " bytes)";
    $("upload-form").reset();
    await listFiles(page.cwd);
  } catch (error) {
    $("upload-status").textContent = error.message;
  } finally {
    button.disabled = false;
  }
}

// ---- start ----------------------------------------------------------------------------------

$("session-id").textContent = sessionId || "(none)";
$("terminal-new").addEventListener("click", () => newTerminal().catch((e) => showError("terminal-error", e)));
$("terminal-close").addEventListener("click", () => {
  const t = page.terminal;
  if (t) post("api/terminals/" + enc(t.id) + "/close").catch((e) => showError("terminal-error", e));
});
$("terminal-choice").addEventListener("change", () => showChosenTerminal().catch((e) => showError("terminal-error", e)));
$("processes-refresh").addEventListener("click", refreshProcesses);
for (const radio of document.querySelectorAll("input[name=stream]")) radio.addEventListener("change", () => page.process && openProcess(page.process.info));
$("process-signal").addEventListener("click", () => {
  const view = page.process;
  if (view) post(base + "/processes/" + enc(view.info.process_id) + "/signal", { signal: "SIGTERM" }).then(refreshProcesses, (e) => { $("process-status").textContent = e.message; });
});
$("upload-form").addEventListener("submit", upload);
followSession();
listTerminals().then((terminals) => {
  const open = terminals.filter((t) => !t.exited).pop();
  if (open) attach(open);
}).catch((e) => showError("terminal-error", e));
refreshProcesses();
listFiles(".");
setInterval(() => { if (!document.hidden && !$("live").disabled) refreshProcesses(); }, 3000);
`;
