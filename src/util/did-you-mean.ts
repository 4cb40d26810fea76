/** The closest candidate to `word`, if one is close enough to be a likely typo. */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of candidates) {
    const distance = editDistance(word.toLowerCase(), candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  const allowed = Math.max(2, Math.floor(word.length / 3));
  return bestDistance <= allowed ? best : undefined;
}

/**
 * Names other tools use for what Troupe calls otherwise: what a user brings from Claude Code,
 * Codex or a shell, and no spelling distance finds.
 */
const SYNONYMS: Record<string, string[]> = {
  shell: ["bash", "sh", "exec", "run", "terminal", "command"],
  read_file: ["read", "cat", "view"],
  write_file: ["write", "create_file"],
  edit_file: ["edit", "str_replace", "multiedit", "multi_edit"],
  list_dir: ["ls", "list", "dir", "list_files"],
  apply_patch: ["patch"],
  grep: ["search", "rg", "ripgrep"],
  glob: ["find"],
};

/** ` (did you mean "x"?)`, or nothing. */
export function didYouMean(word: string, candidates: Iterable<string>): string {
  const list = [...candidates];
  const synonym = Object.entries(SYNONYMS).find(
    ([name, others]) => list.includes(name) && others.includes(word.toLowerCase()),
  )?.[0];
  if (synonym) return ` (did you mean "${synonym}"? Troupe calls it so)`;
  const match = closest(word, list);
  return match === undefined ? "" : ` (did you mean "${match}"?)`;
}

/** Levenshtein distance with transpositions counted as one edit. */
export function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[] = new Array(rows * cols).fill(0);
  const at = (i: number, j: number) => d[i * cols + j] as number;
  for (let i = 0; i < rows; i++) d[i * cols] = i;
  for (let j = 0; j < cols; j++) d[j] = j;
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let value = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        value = Math.min(value, at(i - 2, j - 2) + 1);
      d[i * cols + j] = value;
    }
  }
  return at(a.length, b.length);
}
