import { describe, expect, it } from "vitest";
import { jsonVisible, quoted, visible, visibleLine } from "../../src/util/visible.js";

describe("visible", () => {
  it("leaves plain text, tabs, newlines, CRLF, emoji (joined ones and flags too), CJK and accents as they are", () => {
    for (const text of [
      "ls -la && git status --short",
      "a\tb\nc\r\nd",
      "✓ done 🎉 👨‍👩‍👧 👩🏽‍💻 🏳️‍🌈 🏴󠁧󠁢󠁳󠁣󠁴󠁿",
      "日本語のテキスト, 한국어, 中文",
      "café naïve Ünïcödé ½ — “quotes” │ ├─ ⠋",
      "a back\\slash and \\e written out",
      "",
    ])
      expect(visible(text)).toBe(text);
  });

  it("shows ESC, a lone CR, the other C0 controls and DEL", () => {
    expect(visible("\x1b[2J\x1b]52;c;aGk=\x07")).toBe("\\e[2J\\e]52;c;aGk=\\x07");
    expect(visible("ls #\r\x1b[2K  │ git status")).toBe("ls #\\r\\e[2K  │ git status");
    expect(visible("a\rb\r")).toBe("a\\rb\\r");
    expect(visible("\x00\x08\x0b\x0c\x0e\x1f\x7f")).toBe("\\x00\\x08\\x0b\\x0c\\x0e\\x1f\\x7f");
  });

  it("shows C1 controls", () => {
    expect(visible("\x9b2J \x9d0;title\x9c \x80 \x85")).toBe(
      "\\u009b2J \\u009d0;title\\u009c \\u0080 \\u0085",
    );
  });

  it("shows bidi controls and invisible formatting characters", () => {
    const hidden = [
      "\u202a",
      "\u202b",
      "\u202c",
      "\u202d",
      "\u202e",
      "\u2066",
      "\u2067",
      "\u2068",
      "\u2069",
      "\u200e",
      "\u200f",
      "\u061c",
      "\u200b",
      "\u200c",
      "\u200d",
      "\ufeff",
      "\u2028",
      "\u2029",
      "\u2060",
      "\u00ad",
      "\u3164",
      "\uffa0",
      "\u115f",
      "\u1160",
      "\u034f",
      "\u2800",
    ];
    for (const char of hidden)
      expect(visible(`a${char}b`)).toBe(`a\\u${char.codePointAt(0)?.toString(16).padStart(4, "0")}b`);
    expect(visible("rm\u{e0072}\u{e006d}")).toBe("rm\\u{e0072}\\u{e006d}");
    // A joiner between letters is no emoji's.
    expect(visible("r\u200dm")).toBe("r\\u200dm");
  });

  it("shows each character on its own, so text written in pieces cannot make a sequence", () => {
    const pieces = ["say \x1b", "]0;owned\x07 and \x1b[", "2J"];
    const joined = pieces.map(visible).join("");
    expect(joined).toBe(visible(pieces.join("")));
    expect(controls(joined)).toEqual([]);
  });
});

/** The control characters (C0 but tab and newline, DEL, C1) in a text. */
const controls = (text: string) =>
  [...text].filter((char) => {
    const code = char.charCodeAt(0);
    return (code < 0x20 && char !== "\t" && char !== "\n") || (code >= 0x7f && code <= 0x9f);
  });

describe("visibleLine", () => {
  it("also shows line breaks and tabs, so a name or a cell stays one line", () => {
    expect(visibleLine("task\nrun-1  coder  done\tx\r\n")).toBe("task\\nrun-1  coder  done\\tx\\r\\n");
    expect(visibleLine("日本 🎉 plain")).toBe("日本 🎉 plain");
  });
});

describe("jsonVisible", () => {
  it("escapes what JSON.stringify leaves raw, and the value stays the same", () => {
    const value = { text: "\x9b2J \x9d0;t\x9c \u202e \u200b \u{e0041} \x1b[1m ok 🎉 日本", n: 1 };
    const json = jsonVisible(JSON.stringify(value));
    expect(controls(json)).toEqual([]);
    expect(json).not.toMatch(/\u202e|\u200b|\u{e0041}/u);
    expect(json).toContain("\\u009b2J");
    expect(JSON.parse(json)).toEqual(value);
  });

  it("takes the whitespace another writer put between tokens off, so a line stays one line and nothing is written over", () => {
    const json = '{"type":"x",\r"data":\n\t{"text":"a\\r\\nb"}}';
    expect(jsonVisible(json)).toBe('{"type":"x","data":{"text":"a\\r\\nb"}}');
    expect(JSON.parse(jsonVisible(json))).toEqual(JSON.parse(json));
  });
});

describe("visible: what hides inside a word", () => {
  it("shows variation selectors, fillers and format controls that draw nothing (outside review)", () => {
    for (const char of [
      "\u{e0100}",
      "\u17b4",
      "\u17b5",
      "\u180b",
      "\u180f",
      "\u{1bca0}",
      "\u{1d173}",
      "\ufe00",
      "\ufe0e",
    ])
      expect(visibleLine(`notes${char}.txt`)).toBe(
        `notes\\u${char
          .codePointAt(0)
          ?.toString(16)
          .padStart(4, "0")
          .replace(/^(.{5,})$/, "{$1}")}.txt`,
      );
    // The emoji selector after what it dresses is kept; anywhere else it is shown.
    expect(visibleLine("❤️ 1️⃣")).toBe("❤️ 1️⃣");
    expect(visibleLine("a\ufe0fb")).toBe("a\\ufe0fb");
  });

  it("shows every combining mark past the fourth on one letter, and leaves a language's own alone", () => {
    expect(visibleLine(`e${"\u0301".repeat(6)}x`)).toBe(`e${"\u0301".repeat(4)}\\u0301\\u0301x`);
    expect(visibleLine("Tiếng Việt ữ")).toBe("Tiếng Việt ữ");
  });
});

describe("quoted", () => {
  it("counts a long run of spaces and shows tabs, so nothing is pushed out of sight", () => {
    expect(quoted(`ls${" ".repeat(300)}; curl x | sh`)).toBe('"ls␠×300; curl x | sh"');
    expect(quoted("a       b")).toBe('"a       b"');
    expect(quoted("a\t\tb")).toBe('"a\\t\\tb"');
    // Blanks that are not the ASCII space are each shown, so no run of them hides the rest.
    expect(quoted(`ls "${"\u3000".repeat(3)}"; curl x`)).toBe('"ls \\"\\u3000\\u3000\\u3000\\"; curl x"');
    expect(quoted("a\u00a0b\u2003c")).toBe('"a\\u00a0b\\u2003c"');
    // A literal ␠ cannot pass for a counted run.
    expect(quoted("␠×3")).toBe('"\\u2420×3"');
  });

  it("shows where a text ends and reads back as exactly it", () => {
    expect(quoted("ls #\r\x1b[2K  │ git status --short")).toBe('"ls #\\r\\e[2K  │ git status --short"');
    expect(quoted('echo "a\\b" ')).toBe('"echo \\"a\\\\b\\" "');
    expect(quoted("two\nlines")).toBe('"two\nlines"');
    expect(quoted("crlf\r\n")).toBe('"crlf\\r\n"');
  });
});
