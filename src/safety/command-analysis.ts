import { createRequire } from "node:module";
import { basename, resolve } from "node:path";
import type { ShNode, ShSyntax } from "mvdan-sh";

import {
  type CommandOptions,
  DOWNLOADERS,
  FIND_NEVER,
  GIT_GREP_OPTIONS,
  GIT_LISTING,
  GIT_NEVER,
  GIT_READ,
  GIT_REMOTE_READ,
  GIT_REMOTE_VERBOSE,
  type GitListing,
  HARMLESS_DEVICES,
  INTERPRETERS,
  NETWORK_PATH,
  OPTION_RULES,
  READ_ONLY,
  SHELLS,
  TAKES_NO_PATHS,
  WRAPPERS,
} from "./command-lists.js";

/** The parser (Go compiled to JavaScript, a few hundred ms to load) is loaded when first needed. */
const require = createRequire(import.meta.url);
let loaded: ShSyntax | undefined;
const shSyntax = (): ShSyntax => {
  loaded ??= (require("mvdan-sh") as { syntax: ShSyntax }).syntax;
  return loaded;
};

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

export interface CommandAnalysis {
  /** Parsed: every segment is known; otherwise the command must be asked about. */
  parsed: boolean;
  segments: CommandSegment[];
  /** Set when every segment is known to only read. */
  safe: boolean;
  /** Why it is not safe (the first reason), for the approval request. */
  unsafeBecause?: string;
  /** Set when the command is destructive enough to deny under every policy but yolo. */
  dangerous?: string;
  /** Paths the command names (arguments that look like paths, and redirect targets). */
  paths: string[];
}

/** Statements the judge does not look into: any of them makes a command not safe. */
const UNJUDGED = [
  "FuncDecl",
  "CoprocClause",
  "TimeClause",
  "TestClause",
  "ArithmCmd",
  "LetClause",
  "DeclClause",
];

/**
 * Parses a shell command with a real shell parser and judges every segment. Anything it cannot be
 * sure of is not safe; a command that does not parse is not safe either. Paths are judged against
 * `workspace` by their text: a read outside it is not safe (the sandbox, not this, is the boundary).
 */
export function analyzeCommand(command: string, workspace?: string): CommandAnalysis {
  const syntax = shSyntax();
  let file: ShNode;
  try {
    file = syntax.NewParser().Parse(command, "command");
  } catch (error) {
    const why = String((error as { Error?: () => string }).Error?.() ?? error);
    return {
      parsed: false,
      segments: [],
      safe: false,
      unsafeBecause: `the command does not parse: ${why}`,
      paths: [],
    };
  }
  const segments: CommandSegment[] = [];
  // Redirections of statements that are not simple commands: `{ ls; } > f`, `while …; done < f`, `> f`.
  const loose: Redirects[] = [];
  let unknown: string | undefined;
  let pipelines = 0;
  // Keyed by position: the parser's JavaScript wrappers are not the same object on every access.
  const pipelineOf = new Map<string, { id: number; index: number }>();
  const key = (node: ShNode) => `${node.Pos().Offset()}:${node.End().Offset()}`;

  syntax.Walk(file, (node) => {
    if (!node) return true;
    const type = syntax.NodeType(node);
    if (type === "BinaryCmd" && isPipe(command, node)) {
      // Number the commands of a pipeline left to right.
      const id = ++pipelines;
      const parts = flattenPipe(command, node);
      parts.forEach((part, index) => {
        pipelineOf.set(key(part), { id, index });
      });
    }
    if (type === "Stmt") {
      const cmd = node.Cmd as ShNode | null;
      const redirects = redirectsOf(command, (node.Redirs as ShNode[]) ?? []);
      if (cmd && syntax.NodeType(cmd) === "CallExpr") {
        const where = pipelineOf.get(key(node)) ?? { id: 0, index: 0 };
        segments.push({
          argv: ((cmd.Args as ShNode[]) ?? []).map((word) => literal(command, word)),
          ...redirects,
          assigns: ((cmd.Assigns as unknown[]) ?? []).length,
          pipeline: where.id,
          pipelineIndex: where.index,
        });
      } else {
        if (redirects.reads.length + redirects.writes.length > 0) loose.push(redirects);
        if (cmd && UNJUDGED.includes(syntax.NodeType(cmd))) unknown ??= `it uses ${syntax.NodeType(cmd)}`;
      }
    }
    return true;
  });

  const paths = [
    ...new Set([
      ...segments.flatMap((s) => [
        ...s.argv.slice(1).filter((a): a is string => a !== null && looksLikePath(a)),
        ...s.writes,
        ...s.reads.filter((r): r is string => r !== null),
      ]),
      ...loose.flatMap((r) => [...r.writes, ...r.reads.filter((t): t is string => t !== null)]),
    ]),
  ];
  const dangerous = segments.map((s) => dangerOf(s, segments, workspace)).find(Boolean);
  const unsafe =
    unknown ??
    segments.map((s) => unsafeReason(s, workspace)).find(Boolean) ??
    loose.map((r) => redirectProblem(r, workspace)).find(Boolean);
  return {
    parsed: true,
    segments,
    safe: unsafe === undefined && segments.length > 0,
    ...(unsafe
      ? { unsafeBecause: unsafe }
      : segments.length === 0
        ? { unsafeBecause: "it runs no command" }
        : {}),
    ...(dangerous ? { dangerous } : {}),
    paths,
  };
}

/** Why one segment is not known to be read-only, or undefined when it is. */
function unsafeReason(segment: CommandSegment, workspace: string | undefined): string | undefined {
  const [name, ...args] = segment.argv;
  if (name === null || name === undefined) return "the command name is computed at run time";
  const redirect = redirectProblem(segment, workspace);
  if (redirect) return redirect;
  if (segment.assigns > 0) return "it sets environment variables for a command";
  if (name.includes("/")) return `it runs a program by path (${name})`;
  if (!READ_ONLY.has(name)) return `${name} is not known to be read-only`;
  if (name === "cd") return cdProblem(args, workspace);
  if (TAKES_NO_PATHS.has(name)) return undefined;
  // An expansion may name any file, or an option (`find . $X` with X=-delete).
  if (args.includes(null)) return `it reads a path computed at run time (${name} with an expansion)`;
  const words = args as string[];
  // tr reads only its input: its operands are sets of characters (`tr / _`), never files.
  return argumentProblem(name, words) ?? (name === "tr" ? undefined : pathProblem(words, workspace));
}

/**
 * cd may only go to a literal directory inside the workspace. Then a relative path that never climbs
 * above where it starts (see leavesWorkspace) stays inside whichever such directory it is read from.
 */
function cdProblem(args: Array<string | null>, workspace: string | undefined): string | undefined {
  const targets = args.filter((a) => a === null || a === "-" || !a.startsWith("-"));
  if (targets.length === 0) return "cd without a directory goes home, outside the workspace";
  for (const target of targets) {
    if (target === null) return "it changes to a directory computed at run time";
    if (target === "-") return "cd - goes back to the previous directory, which may be outside the workspace";
    const outside = outsidePath(target, workspace);
    if (outside !== undefined) return `it changes to ${outside}, outside the workspace`;
  }
  return undefined;
}

/** The first argument that may name a file outside the workspace. */
function pathProblem(words: string[], workspace: string | undefined): string | undefined {
  for (const word of words) {
    const outside = outsidePath(word, workspace);
    if (outside !== undefined) return `it reads ${outside}, outside the workspace`;
  }
  return undefined;
}

/** The options or operands that make a read-only command run a program, write, or change the system. */
function argumentProblem(name: string, words: string[]): string | undefined {
  if (name === "find" && words.some((a) => FIND_NEVER.test(a)))
    return "find with -exec, -delete, -fprint or -files0-from";
  if (name === "git") return gitProblem(words);
  const rules = OPTION_RULES.get(name);
  if (!rules) return undefined;
  return bannedOption(words, rules) ?? operandProblem(name, operandsOf(words, rules));
}

/** uniq writes its second operand; date and hostname set the clock and the host name from theirs. */
function operandProblem(name: string, operands: string[]): string | undefined {
  if (name === "uniq" && operands.length > 1) return `uniq writes its second operand (${operands[1]})`;
  if (name === "date" && operands.some((o) => !o.startsWith("+")))
    return "date with an operand other than +FORMAT sets the system clock";
  if (name === "hostname" && operands.length > 0) return "hostname with an operand sets the host name";
  return undefined;
}

function gitProblem(words: string[]): string | undefined {
  if (words.some((a) => GIT_NEVER.some((flag) => a === flag || a.startsWith(`${flag}=`))))
    return "git with -c, -p, --output, --ext-diff or --textconv";
  const at = words.findIndex((a) => !a.startsWith("-"));
  const sub = words[at];
  if (sub === undefined || !GIT_READ.has(sub)) return `git ${sub ?? ""} is not known to be read-only`.trim();
  const rest = words.slice(at + 1);
  if (sub === "grep") return bannedOption(rest, GIT_GREP_OPTIONS);
  if (sub === "branch" || sub === "tag") return gitListingProblem(sub, rest, GIT_LISTING[sub]);
  if (sub === "remote") return gitRemoteProblem(rest);
  return undefined;
}

/** `git branch` and `git tag` are known to read only in a listing form; a name operand creates one. */
function gitListingProblem(sub: string, words: string[], listing: GitListing): string | undefined {
  const operands: string[] = [];
  let patterns = false;
  for (let i = 0; i < words.length; i++) {
    const word = words[i] as string;
    const option = word.split("=")[0] as string;
    if (word === "--") {
      operands.push(...words.slice(i + 1));
      break;
    }
    if (!word.startsWith("-")) operands.push(word);
    else if (listing.valued.includes(option)) {
      if (!word.includes("=")) i++;
    } else if (listing.flags.includes(option)) patterns ||= option === "--list";
    else if (isLetterBundle(word, listing.letters)) patterns ||= word.includes("l");
    else return `git ${sub} ${word} is not a listing form, the only one known to be read-only`;
  }
  // With -l/--list the operands are patterns to list; otherwise the first names a new branch or tag.
  if (operands.length > 0 && !patterns) return `git ${sub} ${operands[0]} creates or changes a ${sub}`;
  return undefined;
}

/** `-av`, `-vv`, `-n3`: short options all among `letters`, with a count after them. */
function isLetterBundle(word: string, letters: string): boolean {
  const bundle = /^-([A-Za-z]+)\d*$/.exec(word)?.[1];
  return bundle !== undefined && [...bundle].every((letter) => letters.includes(letter));
}

/** `git remote` lists alone or with -v; of its actions only `show` and `get-url` read. */
function gitRemoteProblem(words: string[]): string | undefined {
  const [action, ...rest] = words.filter((w) => !GIT_REMOTE_VERBOSE.includes(w));
  if (action === undefined) return undefined;
  const options = GIT_REMOTE_READ.get(action);
  if (!options) return `git remote ${action} is not known to be read-only`;
  const other = rest.find((w) => w.startsWith("-") && !options.includes(w));
  return other === undefined ? undefined : `git remote ${action} ${other} is not known to be read-only`;
}

/** The first banned option among the words, as the reason it is banned. */
function bannedOption(words: string[], rules: CommandOptions): string | undefined {
  for (const ban of rules.banned) {
    const word = words.find(
      (w) =>
        (ban.short !== undefined && shortFlags(w, rules).includes(ban.short)) ||
        (ban.long !== undefined && abbreviates(w, ban.long)),
    );
    if (word !== undefined) return `${ban.why} (${word})`;
  }
  return undefined;
}

/**
 * The letters of a short-option word (`-uo` → u, o), up to the first that takes a value: the rest of
 * the word is that value (`-o/tmp/x`), not more options.
 */
function shortFlags(word: string, rules: CommandOptions): string[] {
  if (!/^-[^-]/.test(word)) return [];
  const flags: string[] = [];
  for (const letter of word.slice(1)) {
    flags.push(letter);
    if (rules.valued.includes(letter) || rules.attached?.includes(letter)) break;
  }
  return flags;
}

/**
 * Whether a word is the long option or an abbreviation of it (`--outp=x` for `--output`): GNU getopt
 * and git's parse-options take any unambiguous prefix. Every prefix counts here, even an ambiguous one
 * (the command then refuses to run), so a short prefix such as `--o` is caught too.
 */
function abbreviates(word: string, option: string): boolean {
  if (!word.startsWith("--")) return false;
  const name = word.slice(2).split("=")[0] ?? "";
  return name.length > 0 && option.slice(2).startsWith(name);
}

/** The operands of a getopt-style command line: neither options nor the values they take. */
function operandsOf(words: string[], rules: CommandOptions): string[] {
  const operands: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const word = words[i] as string;
    if (word === "--") return [...operands, ...words.slice(i + 1)];
    if (word === "-" || !word.startsWith("-")) operands.push(word);
    else if (takesNextWord(word, rules)) i++;
  }
  return operands;
}

/** `-f 1`, `-cf 1` and `--skip-fields 1` take the next word as their value; `-f1` and `--skip-fields=1` do not. */
function takesNextWord(word: string, rules: CommandOptions): boolean {
  if (word.startsWith("--"))
    return !word.includes("=") && (rules.valuedLong ?? []).some((option) => abbreviates(word, option));
  const flags = shortFlags(word, rules);
  const last = flags.at(-1);
  return last !== undefined && rules.valued.includes(last) && flags.length === word.length - 1;
}

/**
 * The path outside the workspace a literal word may name, or undefined. Braces expand first
 * (`{..,x}/f` names ../f); then the word itself, a value after `=` and a value attached to a short
 * option (`-f/etc/passwd`) are each read as a path.
 */
function outsidePath(word: string, workspace: string | undefined): string | undefined {
  const expanded = braceExpansions(word);
  // Too many words to judge one by one: the word is not known to stay inside.
  if (expanded === undefined) return word;
  return expanded.flatMap(pathCandidates).find((path) => leavesWorkspace(path, workspace));
}

function pathCandidates(word: string): string[] {
  const candidates = [word];
  const equals = word.indexOf("=");
  // bash expands ~ after the = of a word like name=~/x, and after each : of its value.
  if (equals >= 0) candidates.push(...word.slice(equals + 1).split(":"));
  if (/^-[^-]/.test(word)) {
    // `cut -d/` and `sort -t/` take a character: a lone / attached to a short option is not the root.
    for (let i = 2; i < word.length; i++) if (word.slice(i) !== "/") candidates.push(word.slice(i));
  }
  return candidates;
}

/**
 * Whether a path leads outside the workspace, by its text alone: `~` and $HOME are outside, an
 * absolute path must be under the workspace, and a relative one must never climb (`..`) above where it
 * starts, even to come back (`../project/x`). Symbolic links are not seen: the sandbox confines those.
 */
function leavesWorkspace(path: string, workspace: string | undefined): boolean {
  if (HARMLESS_DEVICES.has(path)) return false;
  if (path.startsWith("~") || /^\$\{?HOME\b/.test(path)) return true;
  let rest = path;
  if (path.startsWith("/")) {
    if (workspace === undefined) return true;
    const root = resolve(workspace);
    if (path !== root && !path.startsWith(root === "/" ? "/" : `${root}/`)) return true;
    rest = path.slice(root.length);
  }
  let depth = 0;
  for (const part of rest.split("/")) {
    if (part === "..") depth--;
    else if (part !== "" && part !== ".") depth++;
    if (depth < 0) return true;
  }
  return false;
}

/** Brace expansions beyond this many words are not judged one by one. */
const MAX_EXPANSIONS = 256;

/**
 * The words bash makes of `{a,b}` groups, or undefined when there are too many. Sequences (`{1..3}`,
 * `{a..z}`) make only digits and letters, never `.`, `/` or `~`, so they are left as written. Quoted
 * braces are expanded too: that can only add words to judge.
 */
function braceExpansions(word: string): string[] | undefined {
  const done: string[] = [];
  const pending = [word];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const group = firstBraceGroup(next);
    if (group === undefined) done.push(next);
    else {
      const before = next.slice(0, group.start);
      const after = next.slice(group.end + 1);
      pending.push(...group.alternatives.map((alternative) => before + alternative + after));
    }
    if (done.length + pending.length > MAX_EXPANSIONS) return undefined;
  }
  return done;
}

/** The first `{…,…}` that bash expands: a `{` without a matching `}` and a comma is literal. */
function firstBraceGroup(word: string): { start: number; end: number; alternatives: string[] } | undefined {
  for (let start = word.indexOf("{"); start >= 0; start = word.indexOf("{", start + 1)) {
    let depth = 0;
    const commas: number[] = [];
    for (let i = start; i < word.length; i++) {
      if (word[i] === "{") depth++;
      else if (word[i] === "," && depth === 1) commas.push(i);
      else if (word[i] === "}" && --depth === 0) {
        if (commas.length === 0) break;
        const cuts = [start, ...commas, i];
        const alternatives = cuts.slice(1).map((cut, k) => word.slice((cuts[k] as number) + 1, cut));
        return { start, end: i, alternatives };
      }
    }
  }
  return undefined;
}

/** Why a segment is destructive, or undefined. */
function dangerOf(
  segment: CommandSegment,
  all: CommandSegment[],
  workspace: string | undefined,
): string | undefined {
  const argv = unwrap(segment.argv);
  const [name, ...args] = argv;
  if (name === null || name === undefined) return undefined;
  const base = basename(name);
  const words = args.filter((a): a is string => a !== null);
  if (base === "rm") {
    const flags = words.filter((a) => a.startsWith("-") && a !== "--");
    const recursive = flags.some((f) => /^-[^-]*[rR]/.test(f) || f === "--recursive");
    const roots = new Set([
      "/",
      "/*",
      "~",
      "~/",
      "~/*",
      "$HOME",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the shell's own spelling of $HOME
      "${HOME}",
      "$HOME/",
      ".",
      "./",
      "./*",
      "*",
      "..",
      "../",
    ]);
    if (workspace) roots.add(workspace).add(`${workspace}/`).add(`${workspace}/*`);
    const target = words.filter((a) => !a.startsWith("-")).find((a) => roots.has(a));
    if (recursive && target !== undefined) return `rm -r of ${target}`;
  }
  if (base.startsWith("mkfs")) return "mkfs formats a disk";
  if (base === "dd" && words.some((a) => /^of=\/dev\//.test(a))) return "dd onto a device";
  if (
    base === "chmod" &&
    words.some((a) => a === "-R" || a === "--recursive") &&
    words.some((a) => /^(0?777|a\+rwx|ugo\+rwx)$/.test(a))
  ) {
    return "chmod -R 777";
  }
  if (
    ["shutdown", "reboot", "halt", "poweroff"].includes(base) ||
    (base === "init" && (words[0] === "0" || words[0] === "6"))
  ) {
    return `${base} stops the machine`;
  }
  if ((SHELLS.has(base) || INTERPRETERS.has(base)) && segment.pipelineIndex > 0) {
    const earlier = all.filter(
      (s) => s.pipeline === segment.pipeline && s.pipelineIndex < segment.pipelineIndex,
    );
    if (earlier.some((s) => DOWNLOADERS.has(basename(unwrap(s.argv)[0] ?? ""))))
      return "a download piped into a shell";
  }
  return undefined;
}

/** `sudo -u x rm …` → `rm …`: wrappers that run another command are looked through. */
function unwrap(argv: Array<string | null>): Array<string | null> {
  let rest = argv;
  while (rest.length > 0 && rest[0] !== null && WRAPPERS.has(basename(rest[0] as string))) {
    rest = rest.slice(1);
    while (
      rest.length > 0 &&
      typeof rest[0] === "string" &&
      (rest[0].startsWith("-") || /^\d+[smhd]?$/.test(rest[0]))
    )
      rest = rest.slice(1);
  }
  return rest;
}

function literal(source: string, word: ShNode): string | null {
  const parts = (word.Parts as ShNode[]) ?? [];
  let out = "";
  for (const part of parts) {
    const type = shSyntax().NodeType(part);
    if (type === "Lit") out += String(part.Value).replace(/\\(.)/g, "$1");
    else if (type === "SglQuoted") out += String(part.Value);
    else if (type === "DblQuoted") {
      for (const inner of (part.Parts as ShNode[]) ?? []) {
        if (shSyntax().NodeType(inner) !== "Lit") return null;
        out += String(inner.Value);
      }
    } else if (
      type === "ParamExp" &&
      source.slice(part.Pos().Offset(), part.End().Offset()).match(/^\$\{?HOME\}?$/)
    ) {
      out += source.slice(part.Pos().Offset(), part.End().Offset());
    } else return null;
  }
  return out;
}

/** The files a statement's redirections open. */
function redirectsOf(source: string, redirects: ShNode[]): Redirects {
  const reads: Array<string | null> = [];
  const writes: string[] = [];
  for (const redirect of redirects) {
    const word = redirect.Word as ShNode | null;
    if (!word) continue;
    const op = source.slice((redirect.OpPos as { Offset(): number }).Offset(), word.Pos().Offset()).trim();
    const target = literal(source, word);
    const kind = redirectKind(op, target);
    if (kind === "read") reads.push(target);
    if (kind === "write" && (target === null || !HARMLESS_DEVICES.has(target)))
      writes.push(target ?? "(computed path)");
  }
  return { reads, writes };
}

/**
 * What a redirection does with its word. `>&2` and `<&3` duplicate a descriptor and `<<`, `<<<` feed
 * text, but `>&file` (anything but digits or `-`) writes the file as `&>file` does.
 */
function redirectKind(op: string, target: string | null): "read" | "write" | "none" {
  const descriptor = target !== null && /^(\d+-?|-)$/.test(target);
  if (op === ">&") return descriptor ? "none" : "write";
  if (op === "<&") return descriptor ? "none" : "read";
  if (/^(>|>>|>\||&>|&>>|<>)$/.test(op)) return "write";
  if (op === "<") return "read";
  return "none";
}

/** Why a statement's redirections do more than read inside the workspace. */
function redirectProblem({ reads, writes }: Redirects, workspace: string | undefined): string | undefined {
  const network = [...reads, ...writes].find((t) => t !== null && NETWORK_PATH.test(t));
  if (network) return `it opens a network connection (${network})`;
  if (writes.length > 0) return `it writes to ${writes.join(", ")}`;
  for (const target of reads) {
    if (target === null) return "it reads a path computed at run time";
    const outside = outsidePath(target, workspace);
    if (outside !== undefined) return `it reads ${outside}, outside the workspace`;
  }
  return undefined;
}

function isPipe(source: string, node: ShNode): boolean {
  const op = source.slice(
    (node.OpPos as { Offset(): number }).Offset(),
    (node.OpPos as { Offset(): number }).Offset() + 2,
  );
  return op.startsWith("|") && op !== "||";
}

/** The statements of a pipeline `a | b | c`, left to right. */
function flattenPipe(source: string, node: ShNode): ShNode[] {
  const out: ShNode[] = [];
  const visit = (stmt: ShNode) => {
    const cmd = stmt.Cmd as ShNode | null;
    if (cmd && shSyntax().NodeType(cmd) === "BinaryCmd" && isPipe(source, cmd)) {
      visit(cmd.X as ShNode);
      visit(cmd.Y as ShNode);
    } else out.push(stmt);
  };
  visit(node.X as ShNode);
  visit(node.Y as ShNode);
  return out;
}

function looksLikePath(word: string): boolean {
  return (
    !word.startsWith("-") && (word.includes("/") || word.startsWith(".") || /\.[A-Za-z0-9]{1,6}$/.test(word))
  );
}
