/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * The main page's form that calls a tool: the live sessions and their executor's tools to choose
 * from, a field for each property of the tool's input schema (or the input as JSON), and the
 * call.
 */
import type { ToolView } from "../views.ts";
import { $, h } from "./dom.ts";
import { act, api, enc } from "./page-actions.ts";
import { json } from "./page-format.ts";
import { mark, state, ui } from "./page-state.ts";

/** The part of a JSON Schema property the form reads. */
interface Property {
  type?: string | string[];
  enum?: unknown[];
  maxLength?: number;
  minimum?: number;
  default?: unknown;
  description?: string;
}

/** A field's control: its `data-name` is the property, its `data-kind` how its value is read. */
type Control = HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;

function liveSessions() {
  return [...state.sessions.values()].filter((s) => s.state !== "ended" && s.state !== "stopping");
}

function toolsOf(sessionId: string): readonly ToolView[] {
  const session = state.sessions.get(sessionId);
  const executor = session && state.executors.get(session.executorId);
  return executor ? executor.tools : [];
}

/** Draws the form's choices again (a session, then one of its tools), and its fields if the tool changed. */
export function renderFormChoices(): void {
  const sessions = liveSessions();
  if (!sessions.some((s) => s.id === ui.session)) {
    ui.session = sessions.length ? sessions[sessions.length - 1].id : "";
  }
  const select = $<HTMLSelectElement>("call-session");
  select.replaceChildren(
    ...(sessions.length
      ? sessions.map((s) =>
        h("option", { value: s.id, selected: s.id === ui.session }, s.id + " (" + s.state + ")")
      )
      : [h("option", { value: "" }, "no live session")]),
  );
  select.value = ui.session;
  const tools = toolsOf(ui.session);
  const previous = ui.tool;
  if (!tools.some((t) => t.name === ui.tool)) ui.tool = tools.length ? tools[0].name : "";
  const toolSelect = $<HTMLSelectElement>("call-tool");
  const wanted = tools.map((t) => t.name).join("\n");
  if (toolSelect.dataset.tools !== wanted) {
    toolSelect.replaceChildren(
      ...(tools.length
        ? tools.map((t) => h("option", { value: t.name }, t.name))
        : [h("option", { value: "" }, "no tool")]),
    );
    toolSelect.dataset.tools = wanted;
  }
  toolSelect.value = ui.tool;
  if (previous !== ui.tool || $("call-fields").dataset.tool !== ui.tool) renderFields();
}

function currentTool(): ToolView | undefined {
  return toolsOf(ui.session).find((t) => t.name === ui.tool);
}

function renderFields(): void {
  const tool = currentTool();
  const fields = $("call-fields");
  fields.dataset.tool = ui.tool;
  $("call-description").textContent = tool ? tool.description || "" : "";
  $("call-error").textContent = "";
  const schema = (tool && tool.inputSchema) as
    | { type?: unknown; properties?: unknown; required?: unknown }
    | undefined;
  const props = schema && schema.type === "object" && schema.properties &&
      typeof schema.properties === "object"
    ? schema.properties as Record<string, Property | undefined>
    : null;
  const raw = $<HTMLInputElement>("call-raw");
  const text = $<HTMLTextAreaElement>("call-json");
  if (!props) {
    fields.replaceChildren(
      h("p", { class: "hint" }, tool ? "No input schema advertised: give the input as JSON." : ""),
    );
    raw.checked = Boolean(tool);
    text.hidden = !tool;
    if (tool && !text.value) text.value = "{}";
    return;
  }
  const required = new Set(Array.isArray(schema!.required) ? schema!.required : []);
  fields.replaceChildren(
    ...Object.entries(props).map(([name, prop]) => field(name, prop || {}, required.has(name))),
  );
  showRaw(raw.checked);
}

// "Edit as JSON" replaces the fields: they are hidden and disabled (a disabled control is
// neither validated, so a required one does not hold the form back, nor sent).
function showRaw(raw: boolean): void {
  $("call-json").hidden = !raw;
  const fields = $("call-fields");
  const controls = fields.querySelectorAll<Control>("[data-name]");
  fields.hidden = raw && controls.length > 0;
  for (const control of controls) control.disabled = raw;
}

// Back from JSON to the fields: what the JSON says fills them (what does not parse is left).
function fillFields(text: string): void {
  let input: unknown;
  try {
    input = JSON.parse(text || "{}");
  } catch {
    return;
  }
  if (!input || typeof input !== "object" || Array.isArray(input)) return;
  for (const control of $("call-fields").querySelectorAll<Control>("[data-name]")) {
    const value = (input as Record<string, unknown>)[control.dataset.name!];
    const kind = control.dataset.kind;
    if (kind === "boolean") (control as HTMLInputElement).checked = value === true;
    else if (value === undefined) control.value = "";
    else if (kind === "string") control.value = String(value);
    else if (kind === "integer" || kind === "number") control.value = String(value);
    else control.value = kind === "enum" ? JSON.stringify(value) : json(value);
  }
}

const LONG = new Set(["content", "old_string", "new_string"]);

function field(name: string, prop: Property, required: boolean): HTMLLabelElement {
  const type = Array.isArray(prop.type) ? prop.type[0] : prop.type;
  let control: Control;
  let kind = "json";
  if (Array.isArray(prop.enum)) {
    kind = "enum";
    control = h(
      "select",
      {},
      h("option", { value: "" }, ""),
      prop.enum.map((v) => h("option", { value: JSON.stringify(v) }, String(v))),
    );
  } else if (type === "string") {
    kind = "string";
    control = LONG.has(name) || (prop.maxLength || 0) > 200
      ? h("textarea", { rows: 4 })
      : h("input", { type: "text" });
  } else if (type === "integer" || type === "number") {
    kind = type;
    control = h("input", {
      type: "number",
      step: type === "integer" ? 1 : "any",
      min: prop.minimum,
    });
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
  return h(
    "label",
    { class: "field" },
    h("span", {}, name, required ? " *" : "", h("small", {}, " " + (type || "any"))),
    control,
    prop.description ? h("small", {}, prop.description) : null,
  );
}

function collect(): unknown {
  if ($<HTMLInputElement>("call-raw").checked) {
    try {
      return JSON.parse($<HTMLTextAreaElement>("call-json").value || "{}");
    } catch {
      throw new Error("the input is not JSON");
    }
  }
  return collectFields();
}

function collectFields(): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  for (const control of $("call-fields").querySelectorAll<Control>("[data-name]")) {
    const name = control.dataset.name!;
    const kind = control.dataset.kind;
    if (kind === "boolean") {
      if ((control as HTMLInputElement).checked) input[name] = true;
      continue;
    }
    const raw = control.value;
    if (raw === "") continue;
    if (kind === "string") input[name] = raw;
    else if (kind === "integer" || kind === "number") input[name] = Number(raw);
    else {
      try {
        input[name] = JSON.parse(raw);
      } catch {
        throw new Error(name + " is not JSON");
      }
    }
  }
  return input;
}

/** Wires the form's controls (and the header's login-link button). */
export function setupForm(): void {
  $("call-session").addEventListener("change", (ev) => {
    ui.session = (ev.target as HTMLSelectElement).value;
    renderFormChoices();
  });
  $("call-tool").addEventListener("change", (ev) => {
    ui.tool = (ev.target as HTMLSelectElement).value;
    renderFields();
  });
  $("call-raw").addEventListener("change", (ev) => {
    const checked = (ev.target as HTMLInputElement).checked;
    const text = $<HTMLTextAreaElement>("call-json");
    if (checked) {
      try {
        text.value = json(collectFields());
      } catch {
        text.value = "{}";
      }
    } else fillFields(text.value);
    showRaw(checked);
  });
  $("call-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    $("call-error").textContent = "";
    const button = $<HTMLButtonElement>("call-submit");
    button.disabled = true;
    Promise.resolve().then(async () => {
      if (!ui.session) throw new Error("assign a session first");
      if (!ui.tool) throw new Error("the executor advertises no tool");
      const input = collect();
      const made = await api("api/sessions/" + enc(ui.session) + "/calls", {
        tool: ui.tool,
        input,
      });
      ui.expanded.add(made.tool_call_id);
      mark("calls");
    }).catch((error) => {
      $("call-error").textContent = (error as Error).message;
    }).finally(() => {
      button.disabled = false;
    });
  });
  $("login-link").addEventListener("click", (ev) =>
    act(ev.currentTarget, async () => {
      const { url } = await api("api/login-links");
      const box = $<HTMLInputElement>("login-url");
      box.value = url;
      box.hidden = false;
      box.select();
    }, "login-link"));
}
