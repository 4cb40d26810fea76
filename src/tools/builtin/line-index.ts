import type { FileHandle } from "node:fs/promises";
import { isBinary } from "./file-notes.js";

/** Bytes of one line that read_file shows; the rest of a longer line is counted, never held. */
export const MAX_LINE_BYTES = 2000;
/**
 * Lines between two remembered line starts at first (a read skips fewer than this many to its
 * first), and the most starts an index keeps: past that the stride doubles and every other start
 * goes, so an index stays small however many lines a file has.
 */
const SHAPE: IndexShape = { stride: 1024, maxStarts: 8192 };
const SCAN_CHUNK = 1 << 20;
const READ_CHUNK = 64 * 1024;
/** Indexes kept, the least recently used dropped first: each is a few numbers per thousand lines. */
const MAX_INDEXES = 64;

/** Where a file's lines start, for one version of it: what its identity says. */
export interface LineIndex {
  /** Device, inode, size, modification and change times (ns) of the file the index is of. */
  identity: string;
  /** Bytes scanned: the file's size when it was indexed. */
  size: number;
  /** Lines between two remembered starts. */
  stride: number;
  /** `starts[k]` is the byte where line `k * stride + 1` starts. */
  starts: number[];
  /** Lines in the file; a last line without a newline counts. */
  lines: number;
  endsWithNewline: boolean;
  binary: boolean;
}

export interface IndexShape {
  stride: number;
  maxStarts: number;
}

/** A line as read: its text (cut at `MAX_LINE_BYTES`, on a character boundary) and its whole length. */
export interface Line {
  text: string;
  bytes: number;
}

const indexes = new Map<string, LineIndex>();

/**
 * The index of the file `handle` holds, at real path `real`: the one kept from an earlier read when
 * the file is the same and unchanged (device, inode, size, mtime and ctime of the open descriptor),
 * else made by one pass over the file. Made from the descriptor, never by opening the path again.
 */
export async function lineIndexOf(
  handle: FileHandle,
  real: string,
  signal: AbortSignal,
  /** Smaller in tests, to see the index halve itself. */
  shape: IndexShape = SHAPE,
): Promise<LineIndex> {
  const info = await handle.stat({ bigint: true });
  const identity = `${info.dev}:${info.ino}:${info.size}:${info.mtimeNs}:${info.ctimeNs}`;
  const kept = indexes.get(real);
  if (kept?.identity === identity) {
    indexes.delete(real);
    indexes.set(real, kept);
    return kept;
  }
  const index = { identity, ...(await scan(handle, Number(info.size), signal, shape)) };
  indexes.delete(real);
  indexes.set(real, index);
  if (indexes.size > MAX_INDEXES) indexes.delete(indexes.keys().next().value as string);
  return index;
}

async function scan(
  handle: FileHandle,
  size: number,
  signal: AbortSignal,
  shape: IndexShape,
): Promise<Omit<LineIndex, "identity">> {
  const buffer = Buffer.allocUnsafe(Math.max(1, Math.min(SCAN_CHUNK, size)));
  let starts = [0];
  let stride = shape.stride;
  let newlines = 0;
  let position = 0;
  let last = 10;
  while (position < size) {
    signal.throwIfAborted();
    const { bytesRead } = await handle.read(buffer, 0, Math.min(buffer.length, size - position), position);
    if (bytesRead === 0) break;
    const chunk = buffer.subarray(0, bytesRead);
    if (position === 0 && isBinary(chunk))
      return { size, stride, starts, lines: 0, endsWithNewline: true, binary: true };
    for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) {
      if (++newlines % stride !== 0) continue;
      starts.push(position + at + 1);
      if (starts.length > shape.maxStarts) {
        starts = starts.filter((_, k) => k % 2 === 0);
        stride *= 2;
      }
    }
    last = chunk[bytesRead - 1] as number;
    position += bytesRead;
  }
  const endsWithNewline = last === 10;
  return {
    size: position,
    stride,
    starts,
    lines: newlines + (endsWithNewline ? 0 : 1),
    endsWithNewline,
    binary: false,
  };
}

/**
 * Lines `from` to `from + count - 1` (1-based) of the file `handle` holds, read from the nearest
 * remembered start on: only what is shown is kept, however long the file or its lines.
 */
export async function readLines(
  handle: FileHandle,
  index: LineIndex,
  from: number,
  count: number,
  signal: AbortSignal,
): Promise<Line[]> {
  const checkpoint = Math.min(Math.floor((from - 1) / index.stride), index.starts.length - 1);
  let position = index.starts[checkpoint] as number;
  let line = checkpoint * index.stride + 1;
  const last = Math.min(index.lines, from + count - 1);
  const out: Line[] = [];
  const buffer = Buffer.allocUnsafe(READ_CHUNK);
  let kept: Buffer[] = [];
  let keptBytes = 0;
  let bytes = 0;
  const take = (part: Buffer) => {
    bytes += part.length;
    const room = MAX_LINE_BYTES - keptBytes;
    if (room <= 0) return;
    const piece = Buffer.from(part.subarray(0, room));
    kept.push(piece);
    keptBytes += piece.length;
  };
  const end = () => {
    out.push({ text: decodeCut(Buffer.concat(kept), bytes > keptBytes), bytes });
    kept = [];
    keptBytes = 0;
    bytes = 0;
  };
  while (line <= last && position < index.size) {
    signal.throwIfAborted();
    const { bytesRead } = await handle.read(
      buffer,
      0,
      Math.min(buffer.length, index.size - position),
      position,
    );
    if (bytesRead === 0) break;
    const chunk = buffer.subarray(0, bytesRead);
    let start = 0;
    while (start < bytesRead && line <= last) {
      const newline = chunk.indexOf(10, start);
      const stop = newline === -1 ? bytesRead : newline;
      if (line >= from) take(chunk.subarray(start, stop));
      if (newline === -1) {
        start = bytesRead;
        break;
      }
      if (line >= from) end();
      line++;
      start = newline + 1;
    }
    position += bytesRead;
  }
  // The last line of a file that does not end with a newline ends at the end of the file.
  if (line === last && line >= from && out.length < last - from + 1) end();
  return out;
}

/** The text of a line's kept bytes; a cut line loses a character the cut split in two. */
function decodeCut(bytes: Buffer, cut: boolean): string {
  let end = bytes.length;
  if (cut) {
    // Back to the start of the last character, then keep it only when it is whole.
    let start = end - 1;
    while (start > 0 && ((bytes[start] as number) & 0xc0) === 0x80) start--;
    const lead = bytes[start] as number;
    const length = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
    if (start + length > end) end = start;
  }
  return bytes.subarray(0, end).toString("utf8");
}
