import { realpathSync } from "node:fs";
import { z } from "zod";
import { builtin } from "../../config/tool-catalog.js";
import { analyzeCommand } from "../../safety/command-analysis.js";
import { workspaceRelative } from "../../safety/workspace-guard.js";
import { commandEnv, sandboxEnv } from "../../sandbox/env.js";
import type { HostPlanRequest } from "../../sandbox/host-plan.js";
import { beyond, STRICTEST } from "../../sandbox/plan.js";
import { WALK_BOUND } from "../../sandbox/protected-entries.js";
import { type CommandSpec, runCommand } from "../../sandbox/run-command.js";
import type { Sandbox } from "../../sandbox/sandbox.js";
import { workspaceLock } from "../../sandbox/workspace-lock.js";
import { defineTool, type Tool, type ToolResult, toolError } from "../tool.js";

/** Raw output kept while a command runs; the pipeline then caps what the model sees. */
const RAW_CAP = 1024 * 1024;
/** bash without any rc file: a user's slow or noisy ~/.bashrc has no part in what a command does. */
const BASH_FLAGS = ["--noprofile", "--norc", "-c"];

export interface ShellToolOptions {
  /** Variable names passed on besides the defaults. */
  env?: readonly string[];
  parentEnv?: NodeJS.ProcessEnv;
  /** Where commands are confined; without one (or when it is unavailable) only `off` runs. */
  sandbox?: Sandbox;
  /** Directories no command may change even in workspace-write (the config dir). */
  protectedDirs?: readonly string[];
  /** Directories no command may see (the data dir). */
  hiddenDirs?: readonly string[];
  /** More paths mounted read-only in the sandbox. */
  readPaths?: readonly string[];
}

const ESCALATIONS = ["network", "unsandboxed"] as const;

export function shellTool(options: ShellToolOptions = {}): Tool {
  const parentEnv = () => options.parentEnv ?? process.env;
  const scope = {
    protectedDirs: options.protectedDirs ?? [],
    hiddenDirs: options.hiddenDirs ?? [],
    readPaths: options.readPaths ?? [],
  };
  return defineTool({
    ...builtin("shell"),
    description:
      'Run a bash command in the workspace directory and return its output (stdout and stderr) and exit code. Commands run in a sandbox: no network, nothing outside the workspace, a private HOME and /tmp, and the workspace read-only or writable as the approval policy says (never .git or .troupe). If a command fails only because of that, call it again with escalate set to "network" or "unsandboxed": the user is asked first. Prefer the file tools for reading and editing files.',
    sandboxed: true,
    parameters: z.object({
      command: z.string().min(1),
      timeout_ms: z.number().int().min(100).max(600_000).default(120_000),
      escalate: z
        .enum(ESCALATIONS)
        .optional()
        .describe("Ask to run with network access, or outside the sandbox; the user is always asked"),
    }),
    timeoutMs: 610_000,
    readMore: "redirect the output to a file and read it with read_file, or narrow the command",
    judge({ command, escalate }, workspace) {
      const analysis = analyzeCommand(command, workspace);
      return {
        safe: analysis.safe,
        understood: analysis.parsed,
        ...(analysis.dangerous ? { dangerous: analysis.dangerous } : {}),
        ...(analysis.unsafeBecause ? { reason: analysis.unsafeBecause } : {}),
        ...(escalate ? { escalate } : {}),
      };
    },
    preview({ command }, { workspace }) {
      return { detail: command, paths: analyzeCommand(command, workspace).paths };
    },
    async execute(
      { command, timeout_ms },
      { workspace, signal, sandbox: confinement = STRICTEST, sandboxLimit },
    ) {
      // Checked here, where the command starts, not only where the call was planned and approved.
      const over = sandboxLimit && beyond(confinement, sandboxLimit);
      if (over)
        return toolError(
          `the command was not run: this agent's commands run only in the read-only sandbox, and it was to have ${over}`,
          "run the command again without escalate, or report back what it needs",
        );
      const run = (spec: Pick<CommandSpec, "file" | "args" | "env" | "inputs">) =>
        runCommand({ ...spec, cwd: workspace, timeoutMs: timeout_ms, signal, outputCap: RAW_CAP });
      if (confinement.mode === "off") {
        const outcome = await run({
          file: "bash",
          args: [...BASH_FLAGS, command],
          env: commandEnv(parentEnv(), options.env),
        });
        return shellResult(outcome, timeout_ms);
      }
      const sandbox = options.sandbox;
      if (!sandbox || sandbox.unavailable)
        return toolError(
          `the command was not run: it must run in the sandbox, and ${sandbox?.unavailable ?? "there is none"}`,
          "tell the user; the sandbox must be installed for this command to run",
        );
      const writes = confinement.mode === "workspace-write";
      return workspaceLock(realpathSync(workspace)).hold(writes, async () => {
        const confined = sandbox.wrap(
          {
            ...scope,
            mode: confinement.mode as HostPlanRequest["mode"],
            network: confinement.network,
            workspace,
          },
          ["bash", ...BASH_FLAGS, command],
        );
        const outcome = await run({ ...confined, env: sandboxEnv(parentEnv(), options.env, workspace) });
        const result = withMoved(shellResult(outcome, timeout_ms), confined.settle(), workspace);
        return withHidden(result, confined.hidden(), workspace);
      });
    },
  }) as Tool;
}

function shellResult(outcome: Awaited<ReturnType<typeof runCommand>>, timeoutMs: number): ToolResult {
  if (outcome.startError)
    return toolError(
      `could not start the command: ${outcome.startError.message}`,
      "check that bash is installed",
    );
  const more = outcome.dropped > 0 ? `\n[${outcome.dropped} more bytes of output were dropped]` : "";
  const output = `${outcome.output}${more}`;
  if (outcome.ended === "timeout")
    return {
      ...toolError(
        `the command timed out after ${timeoutMs} ms and was killed`,
        "run it with a larger timeout_ms, or make it faster",
      ),
      output,
    };
  if (outcome.ended === "aborted")
    return { ...toolError("the command was cancelled", "run it again if it is still needed"), output };
  if (outcome.code === 0) return { ok: true, output: output || "(no output)" };
  const status = outcome.code === null ? `killed by ${outcome.killedBy}` : `exit code ${outcome.code}`;
  return {
    ...toolError(`the command failed (${status})`, "read the output above, fix the cause and try again"),
    output,
  };
}

/** The result, saying which directories too deep to look into commands do not see (`WALK_BOUND`). */
function withHidden(result: ToolResult, hidden: readonly string[], workspace: string): ToolResult {
  if (hidden.length === 0) return result;
  const path = workspaceRelative(workspace, hidden[0] as string);
  const first = path.length > 160 ? `${path.slice(0, 100)}…${path.slice(-50)}` : path;
  const more = hidden.length > 1 ? ` and ${hidden.length - 1} more` : "";
  return {
    ...result,
    output: `${result.output}\n[the workspace is deeper than commands are shown: ${first}${more} (beyond ${WALK_BOUND.depth} levels or ${WALK_BOUND.pathBytes}-byte paths) is hidden from commands, empty and read-only; move what is there nearer the top to use it]`,
  };
}

/** The result, saying what of the command's work was moved aside after it (see `HostPlanner.settle`). */
function withMoved(
  result: ToolResult,
  moved: Array<{ from: string; to: string }>,
  workspace: string,
): ToolResult {
  if (moved.length === 0) return result;
  const where = moved
    .map(
      ({ from, to }) =>
        `${workspaceRelative(workspace, from)} → ${to === "(removed)" ? to : workspaceRelative(workspace, to)}`,
    )
    .join(", ");
  return {
    ...result,
    output: `${result.output}\n[the command made what could run code the next time git or troupe runs here, outside the sandbox; moved aside: ${where}]`,
  };
}
