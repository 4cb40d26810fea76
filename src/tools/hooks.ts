import { spawn } from "node:child_process";
import type { HookConfig, HookEvent, TroupeConfig } from "../config/schema.js";
import type { Logger } from "../log.js";
import type { Redactor } from "../safety/redact.js";
import { commandEnv } from "./builtin/shell.js";
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
export class Hooks {
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

  #run(hook: HookConfig, payload: Record<string, unknown>): Promise<HookOutcome> {
    return new Promise((resolve) => {
      const child = spawn("bash", ["-c", hook.command], {
        cwd: this.workspace,
        env: commandEnv(process.env, this.env),
        detached: true,
        stdio: ["pipe", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      let timedOut = false;
      child.stdout.on("data", (chunk) => (stdout += chunk));
      child.stderr.on("data", (chunk) => (stderr += chunk));
      const timer = setTimeout(() => {
        timedOut = true;
        try {
          if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
        } catch {}
      }, hook.timeoutMs);
      child.once("error", (error) => {
        clearTimeout(timer);
        this.log.error({ hook: hook.command, err: error.message }, "a hook could not start");
        resolve({ code: null, stdout: "", stderr: error.message, timedOut: false });
      });
      child.once("close", (code) => {
        clearTimeout(timer);
        const outcome = {
          code: timedOut ? null : code,
          stdout,
          stderr: this.redactor.redact(stderr),
          timedOut,
        };
        if (timedOut || (code !== 0 && code !== 2))
          this.log.warn({ hook: hook.command, outcome: describe(outcome) }, "a hook failed");
        resolve(outcome);
      });
      child.stdin.on("error", () => {});
      child.stdin.end(JSON.stringify(this.redactor.redactDeep(payload)));
    });
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
