/** Exit codes every command keeps. */
export const EXIT = {
  ok: 0,
  failed: 1,
  usage: 2,
  budget: 3,
  unreachable: 4,
  refused: 5,
  aborted: 130,
} as const;
