/** The word lists the shell-command judge uses: what is known to read, what never is. */

/** Commands that only read, with no flags that change that (checked below). */
export const READ_ONLY = new Set([
  "ls",
  "cat",
  "head",
  "tail",
  "wc",
  "grep",
  "egrep",
  "fgrep",
  "rg",
  "find",
  "echo",
  "printf",
  "pwd",
  "which",
  "file",
  "stat",
  "du",
  "df",
  "sort",
  "uniq",
  "cut",
  "tr",
  "diff",
  "cmp",
  "tree",
  "basename",
  "dirname",
  "realpath",
  "readlink",
  "date",
  "true",
  "false",
  "test",
  "[",
  "cd",
  "whoami",
  "uname",
  "hostname",
  "id",
  "nl",
  "column",
  "comm",
  "md5sum",
  "sha1sum",
  "sha256sum",
  "jq",
  "less",
  "more",
  "git",
  "seq",
  "expr",
  "sleep",
]);

/** git subcommands that only read. */
export const GIT_READ = new Set([
  "status",
  "log",
  "diff",
  "show",
  "branch",
  "rev-parse",
  "ls-files",
  "blame",
  "describe",
  "shortlog",
  "tag",
  "remote",
  "grep",
  "ls-tree",
  "cat-file",
]);
/**
 * git options that run a program or write, anywhere in the command. Matched exactly (or `--x=value`):
 * git's global options and its diff options take no abbreviations (`git diff --outp=x` is an error).
 */
export const GIT_NEVER = [
  "-c",
  "-p",
  "--paginate",
  "--output",
  "--ext-diff",
  "--textconv",
  "--exec-path",
  "--git-dir",
  "--work-tree",
  "--upload-pack",
  "--config-env",
];
/** find actions that run, delete or write; -files0-from takes its starting points from a file's contents. */
export const FIND_NEVER = /^-(exec|execdir|ok|okdir|delete|fprint|fprint0|fprintf|fls|files0-from)$/;

/**
 * How `git branch` and `git tag` only list. Anything else (an abbreviation too: `--forc` is `--force`
 * to git) is not known to read. A name as an operand creates a branch or tag unless -l/--list makes it
 * a pattern to list.
 */
export interface GitListing {
  /** Short options allowed, alone or bundled (`-av`), with a count after them (`-n3`). */
  letters: string;
  /** Long options allowed, bare or as `--name=value`. */
  flags: readonly string[];
  /** Options that take the next word as their value unless written `--name=value`. */
  valued: readonly string[];
}
export const GIT_LISTING: Record<"branch" | "tag", GitListing> = {
  branch: {
    letters: "arvl",
    // --color and --column take a value only after `=`: in `--color always`, always is a new branch.
    flags: ["--all", "--remotes", "--verbose", "--list", "--show-current", "--color", "--column"],
    valued: ["--contains", "--merged", "--no-merged", "--points-at", "--sort", "--format"],
  },
  tag: {
    letters: "ln",
    flags: ["--list"],
    valued: ["--contains", "--points-at", "--sort", "--format"],
  },
};
/** `git remote` alone or with -v lists; of its actions only these read, with these options. */
export const GIT_REMOTE_VERBOSE = ["-v", "--verbose"];
export const GIT_REMOTE_READ = new Map<string, readonly string[]>([
  ["show", ["-n"]],
  ["get-url", ["--push", "--all"]],
]);

/** Commands whose arguments are never files they open: a computed argument is only text to them. */
export const TAKES_NO_PATHS = new Set([
  "echo",
  "printf",
  "test",
  "[",
  "true",
  "false",
  "expr",
  "seq",
  "sleep",
  "basename",
  "dirname",
]);
/** Paths outside the workspace that any command may open: they hold nothing and reach nothing. */
export const HARMLESS_DEVICES = new Set(["/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr"]);
/** bash itself connects to HOST:PORT when a redirect names /dev/tcp/HOST/PORT or /dev/udp/HOST/PORT. */
export const NETWORK_PATH = /^\/+dev\/+(tcp|udp)\//;

/** An option that makes an otherwise read-only command run a program or change something. */
export interface OptionBan {
  /** The short option letter, alone or in a bundle (`-uo`). */
  short?: string;
  /** The long option, `--` included; any prefix of it counts (getopt takes unambiguous prefixes). */
  long?: string;
  why: string;
}
/** How a command's options are read, to find its banned options and its operands. */
export interface CommandOptions {
  /** Short options that take a value: the rest of the word (`-o/tmp/x`) or else the next word. */
  valued: string;
  /** Short options whose value is optional, so only ever the rest of the word (`-Iseconds`). */
  attached?: string;
  /** Long options that take a value: after `=`, or else the next word. */
  valuedLong?: readonly string[];
  banned: readonly OptionBan[];
}
const WRITES_OUTPUT = "it writes its output to a file";
const FILES0_FROM: OptionBan = {
  long: "--files0-from",
  why: "it reads the names of the files to read from a file",
};
/** Read-only commands whose options can still run a program, write, or change the system. */
export const OPTION_RULES = new Map<string, CommandOptions>(
  Object.entries<CommandOptions>({
    sort: {
      valued: "koStT",
      banned: [
        { short: "o", long: "--output", why: WRITES_OUTPUT },
        { long: "--compress-program", why: "it runs a compression program it names" },
        FILES0_FROM,
      ],
    },
    uniq: { valued: "fsw", valuedLong: ["--skip-fields", "--skip-chars", "--check-chars"], banned: [] },
    tree: { valued: "", banned: [{ short: "o", why: WRITES_OUTPUT }] },
    rg: {
      valued: "",
      banned: [
        { long: "--pre", why: "it runs a preprocessor program on every file" },
        { long: "--hostname-bin", why: "it runs a program to find the host name" },
      ],
    },
    date: {
      valued: "dfrs",
      attached: "I",
      valuedLong: ["--date", "--file", "--reference", "--set", "--rfc-3339"],
      banned: [{ short: "s", long: "--set", why: "it sets the system clock" }],
    },
    hostname: {
      valued: "F",
      valuedLong: ["--file"],
      banned: [
        { short: "F", long: "--file", why: "it sets the host name" },
        { short: "b", long: "--boot", why: "it sets the host name" },
      ],
    },
    file: {
      valued: "mefFP",
      banned: [{ short: "C", long: "--compile", why: "it writes a compiled magic file" }],
    },
    wc: { valued: "", banned: [FILES0_FROM] },
    du: { valued: "BdtX", banned: [FILES0_FROM] },
  }),
);
/** `git grep -O CMD` opens the matching files with CMD. */
export const GIT_GREP_OPTIONS: CommandOptions = {
  valued: "efABCm",
  attached: "O",
  banned: [{ short: "O", long: "--open-files-in-pager", why: "it opens the files with a program it names" }],
};
export const INTERPRETERS = new Set([
  "node",
  "nodejs",
  "python",
  "python3",
  "python2",
  "perl",
  "ruby",
  "php",
  "deno",
  "bun",
  "lua",
  "Rscript",
]);
export const SHELLS = new Set(["sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh"]);
export const WRAPPERS = new Set([
  "sudo",
  "nohup",
  "time",
  "nice",
  "ionice",
  "timeout",
  "stdbuf",
  "doas",
  "command",
  "builtin",
  "exec",
]);
export const DOWNLOADERS = new Set(["curl", "wget", "fetch", "aria2c"]);
