/** `text` with every letter moved 13 places, as `tr a-zA-Z n-za-mN-ZA-M` does. */
export function rot13(text: string): string {
  return text.replace(/[a-z]/gi, (c) => {
    const base = c <= "Z" ? 65 : 97;
    return String.fromCharCode(((c.charCodeAt(0) - base + 13) % 26) + base);
  });
}

/**
 * Every 10-character piece of a canary as it is, rot13'd and reversed: what is left of it after
 * `cut`, `tail`, `tr` or `rev`. A text holding none of them holds no part of the canary worth having.
 */
export function canaryPieces(canary: string): string[] {
  const forms = [canary, rot13(canary), [...canary].reverse().join("")];
  return forms.flatMap((form) => Array.from({ length: form.length - 9 }, (_, i) => form.slice(i, i + 10)));
}
