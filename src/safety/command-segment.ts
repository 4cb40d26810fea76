/** What the shell-command parser finds: the simple commands of a command line and the files they redirect. */

/** The files a statement's redirections open. */
export interface Redirects {
  /** Input redirections from files (`< f`); null for a path only known at run time. */
  reads: Array<string | null>;
  /** Output redirections to files (not /dev/null and the like). */
  writes: string[];
}

/** One simple command found anywhere in a command line: pipelines, lists, subshells, `$(...)`, backticks. */
export interface CommandSegment extends Redirects {
  /** The words as written; null for a word whose value is only known at run time. */
  argv: Array<string | null>;
  /** `NAME=value` prefixes. */
  assigns: number;
  /** Where it is in the pipeline it belongs to (0 for a command on its own). */
  pipelineIndex: number;
  /** The pipeline's id, to relate `curl … | sh`. */
  pipeline: number;
}
