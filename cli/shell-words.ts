/**
 * Splitting a `bma-harness` command line into words as a POSIX shell does (only the CLI imports
 * this): blanks separate words; '…' keeps everything literally; "…" keeps everything but `\`
 * before `$`, `` ` ``, `"`, `\` or a newline; an unquoted `\` keeps the next character. Nothing
 * is expanded (no variables, globs or substitutions: `attach ses_1 sh -c '…'` runs a shell that
 * does them). No package in the dependencies parses shell words, hence these few lines.
 */

/** A quote left open, or a `\` with nothing after it: the line cannot be split as typed. */
export class ShellWordsError extends Error {
  /** What is wrong, in words. */
  constructor(message: string) {
    super(message);
    this.name = "ShellWordsError";
  }
}

/** The words of a line, and what follows the last word taken when `max` was reached. */
export interface SplitLine {
  readonly words: string[];
  /** The text after the `max`th word, leading blanks removed, as typed ("" when none). */
  readonly rest: string;
}

const BLANK = /[ \t\n\r]/;
/** The characters a backslash escapes inside double quotes. */
const DOUBLE_QUOTED_ESCAPES = new Set(["$", "`", '"', "\\", "\n"]);

/**
 * Splits `line` into shell words; with `max`, stops after that many words and returns the rest
 * of the line unsplit (a JSON argument, a command for `bash`). Throws {@linkcode ShellWordsError}
 * for an unterminated quote or a trailing backslash.
 */
export function splitWords(line: string, max = Infinity): SplitLine {
  const words: string[] = [];
  let i = 0;
  const n = line.length;
  for (;;) {
    while (i < n && BLANK.test(line[i])) i++;
    if (i >= n) return { words, rest: "" };
    if (words.length >= max) return { words, rest: line.slice(i).trimEnd() };
    let word = "";
    while (i < n && !BLANK.test(line[i])) {
      const c = line[i];
      if (c === "'") {
        const end = line.indexOf("'", i + 1);
        if (end < 0) throw new ShellWordsError("unterminated ' quote");
        word += line.slice(i + 1, end);
        i = end + 1;
      } else if (c === '"') {
        i++;
        for (;;) {
          if (i >= n) throw new ShellWordsError('unterminated " quote');
          const d = line[i];
          if (d === '"') {
            i++;
            break;
          }
          if (d === "\\" && i + 1 < n && DOUBLE_QUOTED_ESCAPES.has(line[i + 1])) {
            if (line[i + 1] !== "\n") word += line[i + 1];
            i += 2;
          } else {
            word += d;
            i++;
          }
        }
      } else if (c === "\\") {
        if (i + 1 >= n) throw new ShellWordsError("a \\ ends the line: nothing to escape");
        if (line[i + 1] !== "\n") word += line[i + 1];
        i += 2;
      } else {
        word += c;
        i++;
      }
    }
    words.push(word);
  }
}
