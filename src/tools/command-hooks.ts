import { realpathSync } from "node:fs";
import { delimiter, isAbsolute } from "node:path";
import type { HookConfig, HookEvent } from "../config/hook-schema.js";
import type { TroupeConfig } from "../config/schema.js";
import type { Logger } from "../log.js";
import type { Redactor } from "../safety/redact.js";
import { commandEnv, sandboxEnv } from "../sandbox/env.js";
import { findProgram, realPathSoFar } from "../sandbox/launch-paths.js";
import { type CommandSpec, runCommand } from "../sandbox/run-command.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import type { SandboxScope } from "../sandbox/scope.js";
import { workspaceLock } from "../sandbox/workspace-lock.js";
import { isInside } from "../util/paths.js";
import type { PlannedCall } from "./plan.js";
import { type ToolResult, toolError } from "./tool.js";

/** What a hook command did. */
interface HookOutcome {
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /** Set when Troupe would not start it: why. */
  refused?: string;
}

/** Where hooks run: the sandbox for most, and what a hook outside it may not come from. */
export interface HookPlace {
  sandbox?: Sandbox;
  /** The sandbox's scope: what no hook in it may change or see. */
  scope?: Omit<SandboxScope, "workspace">;
  /** Where a hook with `sandbox: none` starts: the config dir, never the workspace. */
  configDir?: string;
  /** Every directory an agent of this process may write: nothing a hook outside the sandbox runs may be there. */
  writable?: readonly string[];
}

const BASH = ["bash", "--noprofile", "--norc", "-c"];

/**
 * Runs the hooks of troupe.yaml: each a shell command in the workspace, in the command sandbox
 * (workspace-write unless the hook says read-only; its files are an agent's to change, so what they
 * hold runs confined), with the filtered environment, given the event as JSON on stdin (redacted).
 * A hook with `sandbox: none` runs as the user, from the config dir, with no workspace directory on
 * its PATH, and is refused when its program lies where an agent may write. A `beforeTool` hook that exits 2 blocks
 * the call and its stderr is the reason the model reads; an `afterTool` hook may replace the result by
 * printing JSON. A hook that crashes or times out is logged and, unless `failClosed`, blocks nothing.
 */
export class CommandHooks {
  constructor(
    private readonly hooks: TroupeConfig["hooks"],
    private readonly workspace: string,
    private readonly redactor: Redactor,
    private readonly log: Logger,
    private readonly env: readonly string[] = [],
    private readonly place: HookPlace = {},
  ) {}

  get empty(): boolean {
    return Object.values(this.hooks).every((list) => list.length === 0);
  }

  /** The result that replaces the call when a hook blocks it; undefined to go on. */
  async beforeTool(
    call: PlannedCall,
    context: { runId: string; agentId: string },
  ): Promise<ToolResult | undefined> {
    for (const hook of this.#matching("beforeTool", call.name)) {
      const outcome = await this.#run(hook, {
        event: "beforeTool",
        ...context,
        tool: call.name,
        callId: call.id,
        arguments: call.arguments,
      });
      if (outcome.refused)
        return toolError(
          `a hook could not run (${outcome.refused}), so ${call.name} was not run`,
          "tell the user the hook is refused",
        );
      if (outcome.code === 2) {
        return toolError(
          outcome.stderr.trim() || `blocked by a hook (${hook.command})`,
          "do not retry this call as it is; find another way",
        );
      }
      if (outcome.code !== 0 && hook.failClosed) {
        return toolError(
          `a required hook failed (${describe(outcome)}), so ${call.name} was not run`,
          "tell the user the hook is failing",
        );
      }
    }
    return undefined;
  }

  /** The result, or what an afterTool hook printed in its place. */
  async afterTool(
    call: PlannedCall,
    result: ToolResult,
    context: { runId: string; agentId: string },
  ): Promise<ToolResult> {
    let current = result;
    for (const hook of this.#matching("afterTool", call.name)) {
      const outcome = await this.#run(hook, {
        event: "afterTool",
        ...context,
        tool: call.name,
        callId: call.id,
        arguments: call.arguments,
        result: current,
      });
      if (outcome.code !== 0) {
        if (hook.failClosed)
          current = toolError(
            `a required hook failed after ${call.name} (${describe(outcome)})`,
            "tell the user the hook is failing",
          );
        continue;
      }
      const printed = outcome.stdout.trim();
      if (!printed) continue;
      try {
        const replacement = JSON.parse(printed) as Partial<ToolResult>;
        current = {
          ...current,
          ...replacement,
          ok: replacement.ok ?? current.ok,
          output: String(replacement.output ?? current.output),
        };
      } catch {
        this.log.warn(
          { hook: hook.command },
          "an afterTool hook printed something that is not JSON; ignored",
        );
      }
    }
    return current;
  }

  /** Runs the notification hooks of an event whose name matches (agent or subagent names). */
  async notify(
    event: Exclude<HookEvent, "beforeTool" | "afterTool">,
    name: string,
    data: Record<string, unknown>,
  ): Promise<void> {
    for (const hook of this.#matching(event, name)) await this.#run(hook, { event, name, ...data });
  }

  #matching(event: HookEvent, name: string): HookConfig[] {
    return this.hooks[event].filter((hook) => globMatches(hook.match, name));
  }

  async #run(hook: HookConfig, payload: Record<string, unknown>): Promise<HookOutcome> {
    const writes = hook.sandbox === "workspace-write";
    return workspaceLock(realpathSync(this.workspace)).hold(writes, () => this.#runNow(hook, payload));
  }

  async #runNow(hook: HookConfig, payload: Record<string, unknown>): Promise<HookOutcome> {
    const start = hook.sandbox === "none" ? this.#outside(hook) : this.#confined(hook);
    if ("refused" in start) {
      this.log.error({ hook: hook.command, why: start.refused }, "a hook was not started");
      return { code: null, stdout: "", stderr: start.refused, timedOut: false, refused: start.refused };
    }
    const outcome = await runCommand({
      ...start.spec,
      timeoutMs: hook.timeoutMs,
      stdin: JSON.stringify(this.redactor.redactDeep(payload)),
    });
    try {
      start.settle?.();
    } catch (error) {
      this.log.error(
        { hook: hook.command, err: (error as Error).message },
        "a hook left what could run code",
      );
    }
    if (outcome.startError) {
      this.log.error({ hook: hook.command, err: outcome.startError.message }, "a hook could not start");
      return { code: null, stdout: "", stderr: outcome.startError.message, timedOut: false };
    }
    const timedOut = outcome.ended === "timeout";
    const result = {
      code: timedOut ? null : outcome.code,
      stdout: outcome.stdout,
      stderr: this.redactor.redact(outcome.stderr),
      timedOut,
    };
    if (timedOut || (outcome.code !== 0 && outcome.code !== 2))
      this.log.warn({ hook: hook.command, outcome: describe(result) }, "a hook failed");
    return result;
  }

  /** In the command sandbox, as a shell command of the agent's would run. */
  #confined(hook: HookConfig): Start {
    const { sandbox, scope } = this.place;
    if (!sandbox || sandbox.unavailable)
      return {
        refused: `it runs in the command sandbox, and ${sandbox?.unavailable ?? "there is none"}; install bubblewrap, or give it sandbox: none`,
      };
    let confined: ReturnType<Sandbox["wrap"]>;
    try {
      confined = sandbox.wrap(
        {
          protectedDirs: scope?.protectedDirs ?? [],
          hiddenDirs: scope?.hiddenDirs ?? [],
          readPaths: scope?.readPaths ?? [],
          mode: hook.sandbox === "read-only" ? "read-only" : "workspace-write",
          network: false,
          workspace: this.workspace,
        },
        [...BASH, hook.command],
      );
    } catch (error) {
      // The workspace held (something a command left could not be moved aside), or not to be looked at.
      return { refused: (error as Error).message };
    }
    return {
      spec: {
        file: confined.file,
        args: confined.args,
        inputs: confined.inputs,
        cwd: this.workspace,
        env: sandboxEnv(process.env, this.env, this.workspace),
      },
      settle: () => confined.settle(),
    };
  }

  /**
   * As the user (`sandbox: none`): from the config dir, with no PATH entry an agent may write, and
   * refused when the program (the command's first word, as bash would find it) lies in one.
   */
  #outside(hook: HookConfig): Start {
    const writable = [this.workspace, ...(this.place.writable ?? [])].map(realPathSoFar);
    const holding = (path: string) => writable.find((root) => isInside(root, realPathSoFar(path)));
    const env = commandEnv(process.env, this.env);
    env.PATH = (env.PATH ?? "")
      .split(delimiter)
      .filter((dir) => isAbsolute(dir) && holding(dir) === undefined)
      .join(delimiter);
    const cwd = this.place.configDir ?? process.cwd();
    const program = hook.command.trim().split(/\s+/)[0] ?? "";
    const found = findProgram(program, cwd, (env.PATH ?? "").split(delimiter));
    const root = found && holding(found);
    if (root || holding(cwd))
      return {
        refused: `it runs outside the sandbox, and ${root ? `its program ${realPathSoFar(found as string)}` : `its directory ${cwd}`} is inside ${root ?? holding(cwd)}, which agents may change; install it elsewhere, or run the hook in the sandbox`,
      };
    return { spec: { file: BASH[0] as string, args: [...BASH.slice(1), hook.command], cwd, env } };
  }
}

type Start =
  | { spec: Pick<CommandSpec, "file" | "args" | "cwd" | "env" | "inputs">; settle?: () => unknown }
  | { refused: string };

function describe(outcome: HookOutcome): string {
  return outcome.timedOut ? "timed out" : `exit code ${outcome.code}`;
}

/** `*` matches any run of characters; everything else is literal. */
export function globMatches(glob: string, name: string): boolean {
  const pattern = glob
    .split("*")
    .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
    .join(".*");
  return new RegExp(`^${pattern}$`).test(name);
}
