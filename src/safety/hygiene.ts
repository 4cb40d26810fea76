/** Terminal escape sequences: CSI, OSC and the two-byte forms. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point here
const ANSI = /\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])/g;
/** Control characters other than tab and newline (a lone \r is dropped too: it rewrites lines on a terminal). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point here
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f]/g;

export const DEFAULT_OUTPUT_CAP = 30_000;

/**
 * Makes tool output safe and small enough to show a model: no escape or control characters, and at
 * most `cap` characters (head and tail kept), with a note saying how to read the rest.
 */
export function cleanOutput(
  text: string,
  cap = DEFAULT_OUTPUT_CAP,
  howToReadMore = "narrow the request to see the rest",
): string {
  const clean = text.replace(/\r\n/g, "\n").replace(ANSI, "").replace(CONTROL, "");
  if (clean.length <= cap) return clean;
  const head = Math.floor(cap * 0.7);
  const tail = cap - head;
  const omitted = clean.length - cap;
  return `${clean.slice(0, head)}\n[… ${omitted} characters omitted of ${clean.length}; ${howToReadMore} …]\n${clean.slice(-tail)}`;
}
