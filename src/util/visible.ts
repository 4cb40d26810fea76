/*
 * How a string that did not come from Troupe itself reaches a terminal: every character a terminal
 * would obey rather than show, or that would hide or reorder the text around it, is written as a
 * visible escape instead. Each such character is replaced on its own, so text written in pieces
 * (a model's streaming answer) can never put an escape sequence together across two pieces.
 */

// Kept as they are: an emoji sequence's joiner (between two pictographs) and a flag's tag letters.
const EMOJI_JOINER =
  /(?<=\p{Extended_Pictographic}|\u{fe0f}|[\u{1f3fb}-\u{1f3ff}])\u200d(?=\p{Extended_Pictographic})/u;
const FLAG_TAGS = /\u{1f3f4}[\u{e0020}-\u{e007e}]+\u{e007f}/u;
/*
 * Shown: C0 controls but tab and newline (a carriage return only when no newline follows: "\r\n"
 * ends a line), DEL and C1; the invisible formatting characters, bidi controls among them, that make
 * a text look other than it is (zero-width spaces and joiners, direction marks, embeddings,
 * overrides and isolates, word joiner and invisible operators, line and paragraph separators, the
 * byte order mark, interlinear annotation, soft hyphen, tag characters, the Hangul fillers that
 * stand alone as blank letters, the combining grapheme joiner, the blank braille pattern, variation
 * selectors (the emoji one only after a character it can dress), Khmer and Mongolian fillers,
 * shorthand and musical format controls), and every combining mark past the fourth on one letter
 * (a stack of them draws over the lines around it).
 */
const HIDDEN =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point here
  // biome-ignore lint/suspicious/noMisleadingCharacterClass: variation selectors are matched on their own, on purpose
  /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\xad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufeff\uffa0\ufff9-\ufffb\u{e0000}-\u{e007f}\u115f\u1160\u2800\ufe00-\ufe0e\u{e0100}-\u{e01ef}\u17b4\u17b5\u180b-\u180d\u180f\u{1bca0}-\u{1bca3}\u{1d173}-\u{1d17a}]|(?<!\p{Extended_Pictographic}|[0-9#*\u2000-\u2bff])\ufe0f|(?<=\p{M}{4})\p{M}|\u034f|\r(?!\n)/u;
const PATTERN = new RegExp(`(${FLAG_TAGS.source})|(${EMOJI_JOINER.source})|${HIDDEN.source}`, "gu");

/** `\e` for ESC, `\r` for a lone carriage return, `\x07` for other C0 and DEL, `\u202e` for the rest. */
function shown(char: string): string {
  if (char === "\x1b") return "\\e";
  if (char === "\r") return "\\r";
  const code = char.codePointAt(0) ?? 0;
  if (code < 0x80) return `\\x${code.toString(16).padStart(2, "0")}`;
  if (code > 0xffff) return `\\u{${code.toString(16)}}`;
  return `\\u${code.toString(16).padStart(4, "0")}`;
}

/**
 * `text` as a terminal should show it when Troupe did not write it (what a model said, a task, a
 * tool's name, arguments or output, a path, an error): control, bidi and invisible formatting
 * characters as visible escapes (`\e`, `\r`, `\x07`, `\u009b`, `\u202e`), all else, tabs and
 * newlines among it, as it is. Not reversible: a backslash is left as it is.
 */
export function visible(text: string): string {
  return text.replace(PATTERN, (match, flag: string | undefined, joiner: string | undefined) =>
    flag !== undefined || joiner !== undefined ? match : shown(match),
  );
}

/**
 * `text` as `visible` shows it, kept to one line: newlines and tabs are shown as `\n` and `\t` too.
 * For what stands in a line of Troupe's own (a name, an id, a path, a table's cell), where a line
 * break would start a line that looks like Troupe's.
 */
export function visibleLine(text: string): string {
  return visible(text).replace(/\r?\n|\t/g, (char) =>
    char === "\t" ? "\\t" : char === "\n" ? "\\n" : "\\r\\n",
  );
}

// In JSON text a C0 control can only be whitespace between tokens (a string has them escaped): tab,
// newline, carriage return. The rest of what `visible` shows may stand raw in a string.
const RAW_IN_JSON =
  /\u034f|[\x7f-\x9f\xad\u061c\u115f\u1160\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\u2800\u3164\ufeff\uffa0\ufff9-\ufffb]|\udb40[\udc00-\udc7f]/g;

/**
 * Valid JSON text on one line, with the characters `visible` shows that JSON.stringify leaves raw
 * (DEL, C1, bidi and invisible formatting) written as `\u` escapes: the same value, and nothing in
 * it a terminal obeys when it is printed on one (`--json`, logs, events as another writer sent them,
 * whose whitespace may hold a carriage return).
 */
export function jsonVisible(json: string): string {
  return json.replace(/[\t\n\r]/g, "").replace(RAW_IN_JSON, (unit) =>
    unit
      .split("")
      .map((half) => `\\u${half.charCodeAt(0).toString(16).padStart(4, "0")}`)
      .join(""),
  );
}

/**
 * `text` as one quoted string whose every character is seen: a backslash and a quote are escaped as
 * well, and every carriage return is shown, so what is shown reads back as exactly the text
 * (newlines stay line breaks). What a person approves is shown this way: where it ends, and every
 * character in it.
 */
export function quoted(text: string): string {
  return `"${spacesSeen(visible(text.replace(/[\\"]/g, "\\$&")).replace(/\r/g, "\\r"))}"`;
}

/** Eight spaces or more in a row: shown counted. */
const SPACE_RUN = / {8,}/g;

/** A blank that is not the ASCII space (no-break, ideographic, the typographic widths). */
const OTHER_BLANK = /(?! )\p{Zs}/gu;

/**
 * Blank space as a person deciding on a text must see it: a tab as `\t`, a blank other than the
 * ASCII space escaped (`\u3000`), and a run of eight spaces or more counted (`␠×300`, a literal `␠`
 * escaped as `\u2420`), so no run of blanks pushes the rest of a command past the edge of a
 * terminal, a panel or a page, and none passes for another.
 */
export function spacesSeen(text: string): string {
  return text
    .replace(/\u2420/g, "\\u2420")
    .replace(/\t/g, "\\t")
    .replace(OTHER_BLANK, (blank) => `\\u${(blank.codePointAt(0) ?? 0).toString(16).padStart(4, "0")}`)
    .replace(SPACE_RUN, (run) => `␠×${run.length}`);
}

/**
 * A path or name given as bytes that may not be UTF-8, for a person: every byte outside ASCII as
 * `\xNN`, and the rest as `visible` shows it.
 */
export function visibleBytes(bytes: Buffer): string {
  let ascii = "";
  for (const byte of bytes) ascii += byte < 0x80 ? String.fromCharCode(byte) : `\\x${byte.toString(16)}`;
  return visible(ascii);
}
