import { open } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { lineIndexOf, MAX_LINE_BYTES, readLines } from "../../src/tools/builtin/line-index.js";
import { tempTree } from "../support/cli.js";

let dispose = () => {};
afterEach(() => dispose());

/** Lines of every length from empty to past the cap, in no order. */
const lines = Array.from({ length: 1000 }, (_, i) =>
  i % 97 === 0 ? "y".repeat(MAX_LINE_BYTES + i) : `${i}:${"z".repeat((i * 31) % 200)}`,
);

describe("the line index", () => {
  it("stays within its size on a file of many lines, and every line read from it is right", async () => {
    const tree = tempTree({ "many.txt": lines.join("\n") });
    dispose = tree.dispose;
    const path = join(tree.dir, "many.txt");
    const handle = await open(path);
    try {
      const signal = new AbortController().signal;
      const index = await lineIndexOf(handle, path, signal, { stride: 2, maxStarts: 8 });
      expect(index).toMatchObject({ lines: 1000, endsWithNewline: false, binary: false });
      // 500 starts at a stride of 2 are too many: halved until at most 8 are left (999 newlines / 128).
      expect(index.starts.length).toBeLessThanOrEqual(8);
      expect(index.stride).toBe(128);
      for (let from = 1; from <= 1000; from += 7) {
        const read = await readLines(handle, index, from, 3, signal);
        const wanted = lines.slice(from - 1, from + 2);
        expect(read.map((line) => line.bytes)).toEqual(wanted.map((line) => line.length));
        expect(read.map((line) => line.text)).toEqual(wanted.map((line) => line.slice(0, MAX_LINE_BYTES)));
      }
    } finally {
      await handle.close();
    }
  });
});
