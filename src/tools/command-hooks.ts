import type { HookConfig, HookEvent, TroupeConfig } from "../config/schema.js";
import type { Logger } from "../log.js";
import type { Redactor } from "../safety/redact.js";
import { commandEnv } from "../sandbox/env.js";
import { runCommand } from "../sandbox/run-command.js";
import type { PlannedCall } from "./plan.js";
import { type ToolResult, toolError } from "./tool.js";

/** What a hook command did. */
interface HookOutcome {
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

/**
 * Runs the hooks of troupe.yaml: each a shell command in the workspace, with the filtered
 * environment, given the event as JSON on stdin (redacted). A `beforeTool` hook that exits 2 blocks
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
    const outcome = await runCommand({
      // The user's own command, outside the sandbox, but hermetic: no rc file, a built environment.
      file: "bash",
      args: ["--noprofile", "--norc", "-c", hook.command],
      cwd: this.workspace,
      env: commandEnv(process.env, this.env),
      timeoutMs: hook.timeoutMs,
      stdin: JSON.stringify(this.redactor.redactDeep(payload)),
    });
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
}

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
