import { createRequire } from "node:module";
import { basename } from "node:path";
import type { ShNode, ShSyntax } from "mvdan-sh";

import {
  DOWNLOADERS,
  FIND_NEVER,
  GIT_NEVER,
  GIT_READ,
  INTERPRETERS,
  READ_ONLY,
  SHELLS,
  WRAPPERS,
} from "./command-lists.js";

/** The parser (Go compiled to JavaScript, a few hundred ms to load) is loaded when first needed. */
const require = createRequire(import.meta.url);
let loaded: ShSyntax | undefined;
const shSyntax = (): ShSyntax => {
  loaded ??= (require("mvdan-sh") as { syntax: ShSyntax }).syntax;
  return loaded;
};

/** One simple command found anywhere in a command line: pipelines, lists, subshells, `$(...)`, backticks. */
export interface CommandSegment {
  /** The words as written; null for a word whose value is only known at run time. */
  argv: Array<string | null>;
  /** Output redirections to files (not /dev/null). */
  writes: string[];
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

/**
 * Parses a shell command with a real shell parser and judges every segment. Anything it cannot be
 * sure of is not safe; a command that does not parse is not safe either.
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
      if (cmd && syntax.NodeType(cmd) === "CallExpr") {
        const where = pipelineOf.get(key(node)) ?? { id: 0, index: 0 };
        const redirs = (node.Redirs as ShNode[]) ?? [];
        const writes = redirs
          .flatMap((r) => redirectTarget(command, r))
          .filter((t) => t !== "/dev/null" && t !== "/dev/stdout" && t !== "/dev/stderr");
        segments.push({
          argv: ((cmd.Args as ShNode[]) ?? []).map((word) => literal(command, word)),
          writes,
          assigns: ((cmd.Assigns as unknown[]) ?? []).length,
          pipeline: where.id,
          pipelineIndex: where.index,
        });
      } else if (
        cmd &&
        [
          "FuncDecl",
          "CoprocClause",
          "TimeClause",
          "TestClause",
          "ArithmCmd",
          "LetClause",
          "DeclClause",
        ].includes(syntax.NodeType(cmd))
      ) {
        unknown ??= `it uses ${syntax.NodeType(cmd)}`;
      }
    }
    return true;
  });

  const paths = [
    ...new Set(
      segments.flatMap((s) => [
        ...s.argv.slice(1).filter((a): a is string => a !== null && looksLikePath(a)),
        ...s.writes,
      ]),
    ),
  ];
  const dangerous = segments.map((s) => dangerOf(s, segments, workspace)).find(Boolean);
  const unsafe = unknown ?? segments.map(unsafeReason).find(Boolean);
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
function unsafeReason(segment: CommandSegment): string | undefined {
  const [name, ...args] = segment.argv;
  if (name === null || name === undefined) return "the command name is computed at run time";
  if (segment.writes.length > 0) return `it writes to ${segment.writes.join(", ")}`;
  if (segment.assigns > 0) return "it sets environment variables for a command";
  if (name.includes("/")) return `it runs a program by path (${name})`;
  if (args.some((a) => a === null)) {
    // Expansions are fine as plain arguments of a read-only command, but not where they pick behaviour.
    if (name === "git" || name === "find") return `${name} with arguments computed at run time`;
  }
  const words = args.filter((a): a is string => a !== null);
  if (!READ_ONLY.has(name)) return `${name} is not known to be read-only`;
  if (name === "find" && words.some((a) => FIND_NEVER.test(a))) return "find with -exec, -delete or -fprint";
  if (name === "git") {
    if (words.some((a) => GIT_NEVER.some((flag) => a === flag || a.startsWith(`${flag}=`))))
      return "git with -c, -p, --output, --ext-diff or --textconv";
    const sub = words.find((a) => !a.startsWith("-"));
    if (!sub || !GIT_READ.has(sub)) return `git ${sub ?? ""} is not known to be read-only`.trim();
    if (sub === "branch" && words.some((a) => /^-(d|D|m|M|c|C)$|^--(delete|move|copy|set-upstream)/.test(a)))
      return "git branch that changes branches";
    if (sub === "tag" && words.some((a) => /^-(d|a|s|f)$|^--(delete|annotate|sign|force)/.test(a)))
      return "git tag that changes tags";
    if (
      sub === "remote" &&
      words.some((a) => ["add", "remove", "rm", "rename", "set-url", "prune"].includes(a))
    )
      return "git remote that changes remotes";
  }
  if (
    (name === "sort" && words.some((a) => a === "-o" || a.startsWith("--output"))) ||
    (name === "tree" && words.includes("-o"))
  ) {
    return `${name} writing to a file`;
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

function redirectTarget(source: string, redirect: ShNode): string[] {
  const word = redirect.Word as ShNode | null;
  if (!word) return [];
  const op = source.slice((redirect.OpPos as { Offset(): number }).Offset(), word.Pos().Offset()).trim();
  if (!/^(>|>>|>\||&>|&>>|<>)$/.test(op)) return [];
  return [literal(source, word) ?? "(computed path)"];
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
