/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * The machine page's files: a directory of the session's working directory at a time (its
 * files to download, its directories to open), and an upload into it.
 */
import type { FileUploadResult } from "../../../protocol/generated/contract.ts";
import { $, h } from "./dom.ts";
import { answer, base, enc, get, showError } from "./machine-api.ts";

/** A directory as the inspector lists it. */
interface Listing {
  path: string;
  directories: string[];
  files: string[];
  truncated: boolean;
}

/** The directory shown, relative to the working directory (`.`: itself). */
let cwd = ".";

const join = (dir: string, name: string) => dir === "." ? name : dir + "/" + name;

/** Shows directory `dir`. */
export async function listFiles(dir: string): Promise<void> {
  try {
    const listing = await get(base + "/files?path=" + enc(dir)) as Listing;
    cwd = listing.path;
    showError("files-error");
    renderPath();
    const entries = [
      ...listing.directories.map((d) =>
        h(
          "li",
          { "data-dir": d },
          h("button", {
            type: "button",
            class: "link",
            onclick: () => listFiles(join(cwd, d)),
          }, d + "/"),
        )
      ),
      ...listing.files.map((f) =>
        h(
          "li",
          { "data-file": f },
          h("a", { href: base + "/files/download?path=" + enc(join(cwd, f)), download: f }, f),
        )
      ),
    ];
    $("files").replaceChildren(
      entries.length ? h("ul", {}, entries) : h("p", { class: "empty" }, "No file here."),
    );
    if (listing.truncated) {
      $("files").append(
        h(
          "p",
          { class: "hint" },
          "The listing is cut short: more files are here than the glob tool returns.",
        ),
      );
    }
  } catch (error) {
    showError("files-error", error);
  }
}

function renderPath(): void {
  const parts = cwd === "." ? [] : cwd.split("/");
  const crumbs: (HTMLElement | string)[] = [
    h("button", { type: "button", class: "link", onclick: () => listFiles(".") }, "workdir"),
  ];
  parts.forEach((part, i) => {
    crumbs.push(
      " / ",
      h("button", {
        type: "button",
        class: "link",
        onclick: () => listFiles(parts.slice(0, i + 1).join("/")),
      }, part),
    );
  });
  $("files-path").replaceChildren(...crumbs);
}

async function upload(event: Event): Promise<void> {
  event.preventDefault();
  const file = $<HTMLInputElement>("upload-file").files![0];
  if (!file) return;
  const button = $<HTMLButtonElement>("upload-submit");
  button.disabled = true;
  $("upload-status").textContent = "uploading " + file.name + "…";
  try {
    const result = await fetch(base + "/files/upload?path=" + enc(join(cwd, file.name)), {
      method: "POST",
      headers: { "content-type": "application/octet-stream" },
      body: file,
      credentials: "same-origin",
    }).then(answer) as FileUploadResult;
    $("upload-status").textContent = "uploaded " + result.path + " (" + result.size + " bytes)";
    $<HTMLFormElement>("upload-form").reset();
    await listFiles(cwd);
  } catch (error) {
    $("upload-status").textContent = (error as Error).message;
  } finally {
    button.disabled = false;
  }
}

/** Wires the upload form. */
export function setupFiles(): void {
  $("upload-form").addEventListener("submit", upload);
}
