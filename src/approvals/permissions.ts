import { sep } from "node:path";
import {
  normalCommand,
  PATTERN_ARGUMENT,
  type PatternTool,
  type PermissionPattern,
  parsePattern,
} from "../config/permission-pattern.js";
import { analyzeCommand } from "../safety/command-analysis.js";
import { resolveInWorkspace, workspaceRelative } from "../safety/workspace-guard.js";

/** troupe.yaml's `permissions`, parsed: the user's rules for this project, and where they are written. */
export interface PermissionRules {
  allow: readonly PermissionPattern[];
  deny: readonly PermissionPattern[];
  /** Where the rules are written, for the reasons that name one ("troupe.yaml"). */
  source: string;
}

/**
 * What an argument pattern is matched on, worked out before the call is decided. A command: its
 * text (whitespace runs as one space), whether it parsed, and each simple command in it: its words
 * joined (undefined when one is only known at run time) and whether it is plain (no `NAME=value`
 * before it, no file written by redirection). A path: where the call would write or read, relative
 * to the workspace, after `..` and every link; undefined when it leads outside or cannot be resolved.
 */
export type CallSubject =
  | {
      of: "command";
      text: string;
      parsed: boolean;
      simple: Array<{ words: string | undefined; plain: boolean }>;
    }
  | { of: "path"; path: string | undefined };

export function permissionRules(
  permissions: { allow: readonly string[]; deny: readonly string[] },
  source: string,
): PermissionRules | undefined {
  if (permissions.allow.length === 0 && permissions.deny.length === 0) return undefined;
  return { allow: permissions.allow.map(parsePattern), deny: permissions.deny.map(parsePattern), source };
}

/** The subject of a call of `tool` with these (checked) arguments; undefined for a tool no argument pattern is for. */
export function callSubject(tool: string, args: unknown, workspace: string): CallSubject | undefined {
  if (!Object.hasOwn(PATTERN_ARGUMENT, tool)) return undefined;
  const value = (args as Record<string, unknown> | undefined)?.[PATTERN_ARGUMENT[tool as PatternTool]];
  if (typeof value !== "string") return undefined;
  if (PATTERN_ARGUMENT[tool as PatternTool] === "command") return commandSubject(value, workspace);
  try {
    const real = resolveInWorkspace(workspace, value);
    return { of: "path", path: workspaceRelative(workspace, real).split(sep).join("/") };
  } catch {
    return { of: "path", path: undefined };
  }
}

export function commandSubject(command: string, workspace?: string): CallSubject {
  const analysis = analyzeCommand(command, workspace);
  return {
    of: "command",
    text: normalCommand(command),
    parsed: analysis.parsed,
    simple: analysis.segments.map((segment) => ({
      words: segment.argv.includes(null) ? undefined : normalCommand(segment.argv.join(" ")),
      plain: segment.assigns === 0 && segment.writes.length === 0,
    })),
  };
}

/**
 * The deny rule that matches the call, if one does. A command is denied when the pattern matches
 * its whole text or any simple command in it (`ls; rm -rf x` by `shell(rm *)`); a path when it
 * matches where the call leads.
 */
export function deniedBy(
  rules: readonly PermissionPattern[],
  tool: string,
  subject: CallSubject | undefined,
): PermissionPattern | undefined {
  return rules.find((rule) => {
    if (!rule.tool.test(tool)) return false;
    const { argument } = rule;
    if (!argument) return true;
    if (subject?.of === "command")
      return (
        argument.matches.test(subject.text) ||
        subject.simple.some(({ words }) => words !== undefined && argument.matches.test(words))
      );
    return subject?.of === "path" && subject.path !== undefined && argument.matches.test(subject.path);
  });
}

/**
 * The allow rule that covers the call, if one does. A command is covered only when every simple
 * command in it is matched by an allow rule of the tool, and each is known in full: none built at
 * run time, none writing a file by redirection, none with `NAME=value` before it; so `shell(git
 * status *)` never covers `git status; curl … | sh`. A path only when it is known and matched.
 */
export function allowedBy(
  rules: readonly PermissionPattern[],
  tool: string,
  subject: CallSubject | undefined,
): PermissionPattern | undefined {
  const own = rules.filter((rule) => rule.tool.test(tool));
  const whole = own.find((rule) => !rule.argument);
  if (whole) return whole;
  if (subject?.of === "command") {
    if (!subject.parsed || subject.simple.length === 0) return undefined;
    const covering = subject.simple.map(({ words, plain }) =>
      words !== undefined && plain ? own.find((rule) => rule.argument?.matches.test(words)) : undefined,
    );
    return covering.every(Boolean) ? covering[0] : undefined;
  }
  if (subject?.of === "path" && subject.path !== undefined) {
    const { path } = subject;
    return own.find((rule) => rule.argument?.matches.test(path));
  }
  return undefined;
}
