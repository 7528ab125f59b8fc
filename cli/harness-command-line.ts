/**
 * How `bma-harness` reads one command line: its words (split as a shell splits them, by
 * `shell-words.ts`) and the error of a line that cannot work as typed. Pure string work, apart
 * from the commands that act on it (`harness-commands.node.ts`).
 */
import { splitWords } from "./shell-words.ts";

/** A command line that cannot work as typed: its error line, nothing run. */
export class CommandError extends Error {}

/**
 * A command line split into words as a shell does (quotes, backslashes; nothing expanded). The
 * JSON of `call` and the command of `bash` are the rest of the line, as typed.
 */
export function words(line: string): { word: string | undefined; args: string[]; rest: string } {
  const [word] = splitWords(line, 1).words;
  // call <session> <tool> <json…>, bash <session> <command…>: the rest is not split.
  const max = word === "call" ? 3 : word === "bash" ? 2 : Infinity;
  const split = splitWords(line, max);
  return { word, args: split.words.slice(1), rest: split.rest };
}
