import { visibleLine } from "../util/visible.js";

/**
 * Plain text columns, padded to the widest cell; the last column is not padded. Each cell is shown
 * through `visibleLine`: what a run or another user put in one (a task, an agent's name) can neither
 * obey an escape nor start a row of its own.
 */
export function table(header: string[], rows: string[][]): string {
  const cells = rows.map((row) => row.map(visibleLine));
  const widths = header.map((title, i) =>
    Math.max(title.length, ...cells.map((row) => (row[i] ?? "").length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return [line(header), ...cells.map(line)].join("\n");
}
