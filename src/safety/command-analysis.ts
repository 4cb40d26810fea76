/**
 * The shell-command judge: parses a command line, finds every simple command in it and its
 * redirections, and says whether it only reads inside the workspace and whether it is destructive.
 */

import { createRequire } from "node:module";
import type { ShNode, ShSyntax } from "mvdan-sh";

import { argumentProblem } from "./command-arguments.js";
import { dangerOf } from "./command-danger.js";
import { HARMLESS_DEVICES, NETWORK_PATH, READ_ONLY, TAKES_NO_PATHS } from "./command-lists.js";
import { cdProblem, outsidePath, pathProblem } from "./command-paths.js";
import type { CommandSegment, Redirects } from "./command-segment.js";

export type { CommandSegment, Redirects } from "./command-segment.js";

/** The parser (Go compiled to JavaScript, a few hundred ms to load) is loaded when first needed. */
const require = createRequire(import.meta.url);
let loaded: ShSyntax | undefined;
const shSyntax = (): ShSyntax => {
  loaded ??= (require("mvdan-sh") as { syntax: ShSyntax }).syntax;
  return loaded;
};

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
