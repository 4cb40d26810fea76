/** The most characters of a server's error body kept in a failure's one line. */
const MAX_SAID = 300;

const HTML = /<(!doctype\s+html|html|head|body)\b/i;
const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " " };

/**
 * What a server's error said, as one line: an HTML page (a proxy's or load balancer's 503) cut to
 * the words of its body, any body's line breaks and runs of spaces made one space, and the whole
 * kept to `MAX_SAID` characters. A failure is shown once per retry: seven lines of a page each time
 * buried what the notices said.
 */
export function bodyText(said: string): string {
  const text = HTML.test(said) ? htmlText(said) : said;
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > MAX_SAID ? `${line.slice(0, MAX_SAID - 1)}…` : line;
}

function htmlText(html: string): string {
  return html
    .replace(/<(head|script|style)\b[\s\S]*?<\/\1\s*>/gi, " ")
    .replace(/<!--[\s\S]*?-->/g, " ")
    .replace(/<[^>]*>/g, " ")
    .replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (entity, name: string) => {
      if (name.startsWith("#")) {
        const code =
          name[1] === "x" || name[1] === "X" ? Number.parseInt(name.slice(2), 16) : Number(name.slice(1));
        return Number.isFinite(code) && code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : entity;
      }
      return ENTITIES[name.toLowerCase()] ?? entity;
    });
}
