/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * The inspector's machine page (`machine.html?session=<id>`), in the browser (served as
 * `machine.js`; its markup and style are in `../machine-page.ts`, its routes in
 * `../machine.ts`): a terminal of the session in xterm.js, its processes and their output, its
 * files to browse, download and upload. Written like the main page: elements made with
 * `document.createElement`, what executors send put in text nodes (or terminal cells), never
 * `innerHTML`.
 */
import type { ExecutorView, InspectorBatch, InspectorSnapshot, SessionView } from "../views.ts";
import { $ } from "./dom.ts";
import { sessionId, showError } from "./machine-api.ts";
import { listFiles, setupFiles } from "./machine-files.ts";
import { refreshProcesses, setupProcesses } from "./machine-processes.ts";
import {
  attach,
  closeTerminal,
  listTerminals,
  newTerminal,
  showChosenTerminal,
} from "./machine-terminal.ts";

/** The session as the harness's live state has it, its executor, and whether that state is live. */
const page: { session?: SessionView; executor?: ExecutorView; offline: boolean } = {
  offline: false,
};

// ---- the session ----------------------------------------------------------------------------

// The page follows the harness's live state for this session only: whether it is still there.
function setSession(session: SessionView | undefined): void {
  page.session = session;
  const badge = $("session-state");
  const ended = !session || session.state === "ended";
  badge.textContent = !session
    ? "unknown session"
    : session.state + (session.reason ? ": " + session.reason : "");
  badge.className = "badge " + (ended ? "bad" : session.state === "ready" ? "ok" : "run");
  $("executor-name").textContent = page.executor ? "on " + page.executor.name : "";
  $<HTMLFieldSetElement>("live").disabled = ended || page.offline;
}

function followSession(): void {
  const source = new EventSource("api/stream");
  source.addEventListener("snapshot", (ev) => {
    const snapshot = JSON.parse(ev.data) as InspectorSnapshot;
    page.offline = false;
    $("offline").hidden = true;
    const session = snapshot.sessions.find((s) => s.id === sessionId);
    page.executor = session && snapshot.executors.find((e) => e.id === session.executorId);
    setSession(session);
  });
  source.addEventListener("update", (ev) => {
    for (const u of (JSON.parse(ev.data) as InspectorBatch).updates) {
      if (u.op === "session" && u.session.id === sessionId) setSession(u.session);
      if (u.op === "executor" && page.session && u.executor.id === page.session.executorId) {
        page.executor = u.executor;
        setSession(page.session);
      }
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

// ---- start ----------------------------------------------------------------------------------

$("session-id").textContent = sessionId || "(none)";
$("terminal-new").addEventListener(
  "click",
  () => newTerminal().catch((e) => showError("terminal-error", e)),
);
$("terminal-close").addEventListener("click", closeTerminal);
$("terminal-choice").addEventListener(
  "change",
  () => showChosenTerminal().catch((e) => showError("terminal-error", e)),
);
setupProcesses();
setupFiles();
followSession();
listTerminals().then((terminals) => {
  const open = terminals.filter((t) => !t.exited).pop();
  if (open) attach(open);
}).catch((e) => showError("terminal-error", e));
refreshProcesses();
listFiles(".");
setInterval(() => {
  if (!document.hidden && !$<HTMLFieldSetElement>("live").disabled) refreshProcesses();
}, 3000);
