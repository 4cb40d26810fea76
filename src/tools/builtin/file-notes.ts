/**
 * The words the read tools (read_file, grep) use for what they note about a file's content, in one
 * place so every tool says the same thing the same way.
 */

/** Bytes of a file's start looked at for a NUL byte, as git does: a text file has none there. */
export const BINARY_SNIFF_BYTES = 8000;

/** The note after a file's last line when the file does not end with a newline. */
export const NO_NEWLINE_NOTE = "[no newline at end of file]";

/** Whether a file is binary, judged from its first bytes (a NUL among the first 8000). */
export function isBinary(head: Uint8Array): boolean {
  const end = Math.min(head.length, BINARY_SNIFF_BYTES);
  for (let i = 0; i < end; i++) if (head[i] === 0) return true;
  return false;
}

/** Why a binary file is not read. */
export function binaryFileError(path: string): string {
  return `${path} is a binary file`;
}

/** A search's note on the binary files it passed over: `[2 binary files not searched]`. */
export function binarySkippedNote(count: number): string {
  return `[${count} binary file${count === 1 ? "" : "s"} not searched]`;
}
