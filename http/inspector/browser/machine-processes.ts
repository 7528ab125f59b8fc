/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/** The machine page's processes: the session's list, and one stream of one process's output, followed. */
import type {
  ProcessInfo,
  ProcessListResult,
  ProcessReadResult,
} from "../../../protocol/generated/contract.ts";
import type { ErrorView } from "../views.ts";
import { $, h, listTable } from "./dom.ts";
import { base, describe, enc, fromBase64, get, post, showError } from "./machine-api.ts";

/** The process whose output is shown, the stream shown, and how to stop reading it. */
interface Shown {
  info: ProcessInfo;
  stream: string;
  abort: AbortController;
}

let shown: Shown | undefined;

function processState(p: ProcessInfo): HTMLSpanElement {
  if (p.running) return h("span", { class: "badge run" }, "running");
  return h(
    "span",
    { class: "badge" },
    p.signal ? "killed by " + p.signal : "exited " + (p.exit_code ?? ""),
  );
}

/** Lists the session's processes again. */
export async function refreshProcesses(): Promise<void> {
  try {
    const { processes } = await get(base + "/processes") as ProcessListResult;
    showError("processes-error");
    $("processes").replaceChildren(listTable(
      "No process.",
      ["process", "command", "pid", "state", ""],
      processes.map((p) =>
        h(
          "tr",
          { "data-process": p.process_id },
          h("td", { class: "mono" }, p.process_id),
          h("td", { class: "mono" }, p.argv.join(" ")),
          h("td", {}, p.pid ?? ""),
          h("td", {}, processState(p)),
          h(
            "td",
            { class: "actions" },
            h(
              "button",
              {
                type: "button",
                class: "output",
                onclick: () => openProcess(p),
              },
              "Output",
            ),
          ),
        )
      ),
    ));
    if (shown) {
      const now = processes.find((p) => p.process_id === shown!.info.process_id);
      if (now) {
        shown.info = now;
        $<HTMLButtonElement>("process-signal").disabled = !now.running;
      }
    }
  } catch (error) {
    showError("processes-error", error);
  }
}

// The output of one stream of one process, read from offset 0 to its end, then followed.
function openProcess(info: ProcessInfo): void {
  if (shown) shown.abort.abort();
  const stream = document.querySelector<HTMLInputElement>("input[name=stream]:checked")!.value;
  const view: Shown = { info, stream, abort: new AbortController() };
  shown = view;
  $("process-view").hidden = false;
  $("process-title").textContent = info.process_id + ": " + info.argv.join(" ");
  $<HTMLButtonElement>("process-signal").disabled = !info.running;
  $("process-text").textContent = "";
  $("process-text").dataset.stream = stream;
  readProcess(view).catch((error) => {
    if (!view.abort.signal.aborted) $("process-status").textContent = describe(error as ErrorView);
  });
}

async function readProcess(view: Shown): Promise<void> {
  const decoder = new TextDecoder();
  const out = $("process-text");
  let offset = 0;
  for (;;) {
    const path = base + "/processes/" + enc(view.info.process_id) + "/output?stream=" +
      view.stream +
      "&offset=" + offset + "&wait_ms=" + (view.info.running ? 2000 : 0);
    const chunk = await get(path, view.abort.signal) as ProcessReadResult;
    if (view.abort.signal.aborted) return;
    if (chunk.offset > offset) {
      out.append("[" + (chunk.offset - offset) + " earlier bytes are no longer kept]\n");
    }
    const bytes = chunk.encoding === "base64"
      ? fromBase64(chunk.data)
      : new TextEncoder().encode(chunk.data);
    out.append(decoder.decode(bytes, { stream: !chunk.eof }));
    offset = chunk.next_offset;
    $("process-status").textContent = chunk.eof
      ? "end of " + view.stream + " (" + offset + " bytes)"
      : offset + " bytes, following";
    if (chunk.eof) return;
    if (bytes.byteLength === 0 && !view.info.running) await new Promise((r) => setTimeout(r, 1000));
  }
}

/** Wires the process view's controls: its stream's choice, and its signal button. */
export function setupProcesses(): void {
  $("processes-refresh").addEventListener("click", refreshProcesses);
  for (const radio of document.querySelectorAll("input[name=stream]")) {
    radio.addEventListener("change", () => shown && openProcess(shown.info));
  }
  $("process-signal").addEventListener("click", () => {
    const view = shown;
    if (view) {
      post(base + "/processes/" + enc(view.info.process_id) + "/signal", { signal: "SIGTERM" })
        .then(refreshProcesses, (e) => {
          $("process-status").textContent = e.message;
        });
    }
  });
}
