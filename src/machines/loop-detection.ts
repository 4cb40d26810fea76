/**
 * Signs of an agent going round in circles, over the calls since its last write or execute: the
 * same call (tool + arguments) three times, or a cycle of 2 to 4 different calls repeated back to back.
 */
export function detectLoop(history: readonly string[]): string | undefined {
  const counts = new Map<string, number>();
  for (const signature of history) {
    const count = (counts.get(signature) ?? 0) + 1;
    counts.set(signature, count);
    if (count >= 3) return `the same call three times: ${signature}`;
  }
  for (let k = 2; k <= 4; k++) {
    if (history.length < 2 * k) continue;
    const tail = history.slice(-2 * k);
    const pattern = tail.slice(0, k);
    if (new Set(pattern).size < 2) continue;
    if (pattern.every((signature, i) => tail[k + i] === signature)) {
      return `a cycle of ${k} calls repeated: ${pattern.join(" → ")}`;
    }
  }
  return undefined;
}

/** A call's identity for loop detection: its tool and its arguments with keys in a fixed order. */
export function callSignature(name: string, rawArguments: string): string {
  try {
    return `${name}(${stableJson(JSON.parse(rawArguments || "{}"))})`;
  } catch {
    return `${name}(${rawArguments})`;
  }
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stableJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}
