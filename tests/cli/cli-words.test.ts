/**
 * The harness CLI's command-line splitter: words as a POSIX shell splits them (quotes,
 * backslashes, nothing expanded), and the rest of a line left as typed after `max` words.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ShellWordsError, splitWords } from "../../cli/shell-words.ts";

describe("splitWords", () => {
  it("splits on blanks, and keeps quoted text as one word", () => {
    assert.deepEqual(splitWords("  attach   ses_b\tsh  ").words, ["attach", "ses_b", "sh"]);
    assert.deepEqual(splitWords("attach ses_b sh -c 'echo term-ok; exit 7'").words, [
      "attach",
      "ses_b",
      "sh",
      "-c",
      "echo term-ok; exit 7",
    ]);
    assert.deepEqual(splitWords(`a "b c" 'd "e"' "f 'g'"`).words, ["a", "b c", 'd "e"', "f 'g'"]);
    assert.deepEqual(splitWords("").words, []);
    assert.deepEqual(splitWords("   ").words, []);
  });

  it("joins adjacent quoted and unquoted parts, and keeps empty quoted words", () => {
    assert.deepEqual(splitWords(`ab'c d'"e"f`).words, ["abc def"]);
    assert.deepEqual(splitWords(`x '' "" y`).words, ["x", "", "", "y"]);
  });

  it('backslashes: unquoted escapes any character; in double quotes only $ ` " \\; none in single', () => {
    assert.deepEqual(splitWords(String.raw`a\ b c\'d \\`).words, ["a b", "c'd", "\\"]);
    assert.deepEqual(splitWords(String.raw`"a\"b \$x \n \\"`).words, ['a"b $x \\n \\']);
    assert.deepEqual(splitWords(String.raw`'a\b\'`).words, ["a\\b\\"]);
  });

  it("expands nothing: variables, globs and substitutions stay as typed", () => {
    assert.deepEqual(splitWords("echo $HOME * $(id) `id` ~").words, [
      "echo",
      "$HOME",
      "*",
      "$(id)",
      "`id`",
      "~",
    ]);
  });

  it("an unterminated quote or a trailing backslash is a ShellWordsError", () => {
    for (const line of ["sh -c 'echo", 'echo "a', "echo a\\"]) {
      assert.throws(() => splitWords(line), ShellWordsError, line);
    }
    assert.throws(() => splitWords("a 'b"), /unterminated ' quote/);
    assert.throws(() => splitWords('a "b'), /unterminated " quote/);
  });

  it("with max, the rest of the line is left as typed (a JSON input, a bash command)", () => {
    const call = splitWords(`call ses_1 write {"path": "a b.txt", "content": "it's"}`, 3);
    assert.deepEqual(call.words, ["call", "ses_1", "write"]);
    assert.equal(call.rest, `{"path": "a b.txt", "content": "it's"}`);
    const bash = splitWords("bash 'ses_1'   echo it's  ", 2);
    assert.deepEqual(bash.words, ["bash", "ses_1"]);
    assert.equal(bash.rest, "echo it's");
    assert.deepEqual(splitWords("call ses_1", 3), { words: ["call", "ses_1"], rest: "" });
  });
});
