import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/log.js";

const ESC = "\x1b";
const HOSTILE = `tool ${ESC}]0;owned\x07 failed \x9b2J \u202eexe.txt`;

/** Logs one warning carrying `HOSTILE` in its message and a field, and gives what was written. */
function logged(pretty: boolean): string {
  const out = new PassThrough();
  let written = "";
  out.on("data", (chunk) => (written += chunk));
  const log = createLogger({ pretty, destination: out });
  log.warn({ tool: HOSTILE, err: new Error(HOSTILE) }, HOSTILE);
  log.info("after");
  return written;
}

describe("logs for people", () => {
  it("pino-pretty shows every string of a record, message, fields and error alike, never obeys it", () => {
    const written = logged(true);
    expect(written).not.toMatch(new RegExp(`${ESC}\\]|\\x07|\\x9b|\\u202e`));
    expect(written).toContain("tool \\e]0;owned\\x07 failed \\u009b2J \\u202eexe.txt");
  });

  it("a JSON line escapes what JSON.stringify leaves raw, and reads back as what was logged", () => {
    const written = logged(false);
    expect(written).not.toMatch(/\x9b|\u202e/);
    const lines = written.split("\n");
    expect(lines).toHaveLength(3);
    expect(JSON.parse(lines[0] as string).msg).toBe(HOSTILE);
    expect(JSON.parse(lines[1] as string).msg).toBe("after");
  });
});
