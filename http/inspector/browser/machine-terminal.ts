/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * The machine page's terminal: one of the session's terminals at a time, in xterm.js, its
 * keystrokes and size sent to the inspector, its output followed over a stream.
 */
import { FitAddon } from "@xterm/addon-fit";
import { Terminal } from "@xterm/xterm";
import { $, h } from "./dom.ts";
import { base, enc, fromBase64, get, post, showError } from "./machine-api.ts";

/** A terminal as the inspector lists it (its `InspectorTerminalView`). */
export interface TerminalView {
  readonly id: string;
  readonly cols: number;
  readonly rows: number;
  readonly exited: boolean;
  readonly exitCode?: number | null;
}

/** The terminal shown. */
interface Shown {
  id: string;
  term: Terminal;
  fit: FitAddon;
  source: EventSource | undefined;
  /** What was typed and not sent yet. */
  pending: string;
  sending: boolean;
  resizeTimer: ReturnType<typeof setTimeout> | 0;
  exited: boolean;
  onWindowResize: () => void;
}

let shown: Shown | undefined;

function terminalStatus(text: string): void {
  $("terminal-status").textContent = text;
}

/** Lists the session's terminals in the choice (`select`, the shown one or the latest live one chosen). */
export async function listTerminals(select?: string): Promise<TerminalView[]> {
  const { terminals } = await get(base + "/terminals") as { terminals: TerminalView[] };
  const choice = $<HTMLSelectElement>("terminal-choice");
  choice.replaceChildren(
    ...(terminals.length
      ? terminals.map((t) =>
        h(
          "option",
          { value: t.id },
          t.id + (t.exited ? " (exited " + (t.exitCode ?? "") + ")" : ""),
        )
      )
      : [h("option", { value: "" }, "no terminal")]),
  );
  const wanted = select || (shown && shown.id) ||
    (terminals.filter((t) => !t.exited).pop() || {}).id;
  if (wanted) choice.value = wanted;
  return terminals;
}

// One terminal is shown at a time. Its output comes over a stream whose event ids are byte
// offsets, so a reconnect (EventSource sends the last id) and a reload (which starts from what
// the inspector keeps) both show every byte once.
/** Shows terminal `view`. */
export function attach(view: TerminalView): Shown {
  detach();
  const term = new Terminal({
    cols: view.cols,
    rows: view.rows,
    convertEol: false,
    cursorBlink: true,
    scrollback: 5000,
    fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace",
    fontSize: 13,
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  const container = $("terminal");
  container.replaceChildren();
  term.open(container);
  const t: Shown = {
    id: view.id,
    term,
    fit,
    source: undefined,
    pending: "",
    sending: false,
    resizeTimer: 0,
    exited: view.exited,
    onWindowResize: () => fit.fit(),
  };
  shown = t;
  $<HTMLButtonElement>("terminal-close").disabled = view.exited;
  container.dataset.terminal = view.id;
  // The size shown, and the size the program was last told: equal once a resize has landed.
  container.dataset.size = container.dataset.sent = view.cols + "x" + view.rows;
  term.onData((data) => {
    t.pending += data;
    flushInput(t);
  });
  term.onResize(({ cols, rows }) => {
    container.dataset.size = cols + "x" + rows;
    clearTimeout(t.resizeTimer);
    t.resizeTimer = setTimeout(() => {
      if (!t.exited) {
        post("api/terminals/" + enc(t.id) + "/resize", { cols, rows })
          .then(() => {
            if (shown === t) container.dataset.sent = cols + "x" + rows;
          })
          .catch((e) => showError("terminal-error", e));
      }
    }, 100);
  });
  addEventListener("resize", t.onWindowResize);
  const source = new EventSource("api/terminals/" + enc(view.id) + "/stream?from=0");
  t.source = source;
  source.addEventListener("open", () => {
    if (!t.exited) terminalStatus("connected");
  });
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
    $<HTMLButtonElement>("terminal-close").disabled = true;
    listTerminals(t.id).catch(() => {});
  });
  source.addEventListener("error", () => {
    if (t.exited) return;
    terminalStatus(
      source.readyState === EventSource.CLOSED
        ? "disconnected: the inspector refused the stream"
        : "reconnecting…",
    );
  });
  term.focus();
  return t;
}

function detach(): void {
  const t = shown;
  if (!t) return;
  if (t.source) t.source.close();
  removeEventListener("resize", t.onWindowResize);
  t.term.dispose();
  shown = undefined;
}

// Keystrokes go in order, one request at a time, what was typed meanwhile in the next.
function flushInput(t: Shown): void {
  if (t.sending || !t.pending || t.exited) return;
  const data = t.pending;
  t.pending = "";
  t.sending = true;
  post("api/terminals/" + enc(t.id) + "/input", { data })
    .then(() => showError("terminal-error"), (e) => showError("terminal-error", e))
    .finally(() => {
      t.sending = false;
      flushInput(t);
    });
}

/** Opens a terminal of the window's size, and shows it. */
export async function newTerminal(): Promise<void> {
  showError("terminal-error");
  const probe = new Terminal({ cols: 80, rows: 24 });
  const fit = new FitAddon();
  probe.loadAddon(fit);
  const container = $("terminal");
  container.replaceChildren();
  probe.open(container);
  const size = fit.proposeDimensions() || { cols: 80, rows: 24 };
  probe.dispose();
  const view = await post(base + "/terminals", {
    cols: size.cols,
    rows: size.rows,
  }) as TerminalView;
  await listTerminals(view.id);
  attach(view);
}

/** Shows the terminal chosen in the list. */
export async function showChosenTerminal(): Promise<void> {
  const id = $<HTMLSelectElement>("terminal-choice").value;
  if (!id || (shown && shown.id === id)) return;
  const { terminals } = await get(base + "/terminals") as { terminals: TerminalView[] };
  const view = terminals.find((t) => t.id === id);
  if (view) attach(view);
  if (view && view.exited) {
    terminalStatus(
      "exited" +
        (view.exitCode === null || view.exitCode === undefined
          ? ""
          : " with code " + view.exitCode),
    );
  }
}

/** Asks the inspector to close the terminal shown. */
export function closeTerminal(): void {
  const t = shown;
  if (t) post("api/terminals/" + enc(t.id) + "/close").catch((e) => showError("terminal-error", e));
}
