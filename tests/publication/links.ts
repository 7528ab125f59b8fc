/**
 * The relative links of Markdown files, checked against a package's file list: every link
 * (`[text](target)`, `![alt](target)`, `[name]: target`, `<img src="target">`) that names no
 * scheme must name a file the package holds, and its `#anchor` a heading of that file (GitHub's
 * anchors: lower case, punctuation dropped, spaces to hyphens, `-1`, `-2` for repeats). Code
 * blocks and code spans are not read.
 */
import { posix } from "node:path";

/** A link that does not resolve. */
export interface BrokenLink {
  /** The Markdown file, package-relative. */
  readonly file: string;
  readonly target: string;
  readonly why: string;
}

/** The Markdown without its fenced blocks and code spans (lines kept, so lines still count). */
function prose(markdown: string): string {
  let inFence = false;
  let fence = "";
  const lines = markdown.split("\n").map((line) => {
    const open = /^\s*(`{3,}|~{3,})/.exec(line);
    if (open && (!inFence || open[1].startsWith(fence))) {
      if (inFence) inFence = false;
      else {
        inFence = true;
        fence = open[1];
      }
      return "";
    }
    return inFence ? "" : line;
  });
  return lines.join("\n").replace(/(`+)[^`]*?\1/g, "");
}

/** Every link target of `markdown`, as written. */
export function linkTargets(markdown: string): string[] {
  const text = prose(markdown);
  const targets: string[] = [];
  for (const [, target] of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
    targets.push(target);
  }
  for (const [, target] of text.matchAll(/^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)) {
    targets.push(target);
  }
  for (const [, target] of text.matchAll(/<img\b[^>]*\bsrc="([^"]+)"/g)) targets.push(target);
  return targets;
}

/** GitHub's anchors of the headings of `markdown`. */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let inFence = false;
  for (const line of markdown.split("\n")) {
    if (/^\s*(`{3,}|~{3,})/.test(line)) inFence = !inFence;
    const heading = inFence ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const base = heading[1]
      .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
      .replace(/<[^>]+>/g, "")
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

/**
 * The broken relative links of the Markdown files among `files` (package-relative paths),
 * read with `read`.
 */
export function brokenLinks(
  files: readonly string[],
  read: (path: string) => string,
): BrokenLink[] {
  const held = new Set(files);
  const broken: BrokenLink[] = [];
  const anchors = new Map<string, Set<string>>();
  const anchorsIn = (path: string) => {
    let set = anchors.get(path);
    if (!set) anchors.set(path, set = anchorsOf(read(path)));
    return set;
  };
  for (const file of files.filter((path) => path.endsWith(".md"))) {
    for (const target of linkTargets(read(file))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:, ...
      const [pathPart, anchor] = target.split("#", 2) as [string, string | undefined];
      const path = pathPart.split("?")[0];
      const resolved = path === ""
        ? file
        : posix.normalize(posix.join(posix.dirname(file), decodeURIComponent(path)));
      if (resolved.startsWith("../") || posix.isAbsolute(resolved)) {
        broken.push({ file, target, why: "points outside the package" });
      } else if (!held.has(resolved) && ![...held].some((p) => p.startsWith(`${resolved}/`))) {
        broken.push({ file, target, why: `${resolved} is not in the package` });
      } else if (anchor && resolved.endsWith(".md") && !anchorsIn(resolved).has(anchor)) {
        broken.push({ file, target, why: `${resolved} has no heading #${anchor}` });
      }
    }
  }
  return broken;
}
