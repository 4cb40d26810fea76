/* troupe.yaml's `hooks`: commands run on the events of tools and agents. */
import { z } from "zod";
import { positiveInt } from "./units.js";

/** One hook: a shell command run on an event, for the tools (or agents) whose name matches `match`. */
export const hookSchema = z.strictObject({
  /** A name glob: `*` for any run of characters. Default `*`. */
  match: z.string().min(1).default("*"),
  command: z.string().min(1),
  timeoutMs: positiveInt.default(10_000),
  /** When the hook crashes or times out, block the call instead of going on. */
  failClosed: z.boolean().default(false),
  /**
   * Where it runs: in the command sandbox with the workspace writable (default) or read-only, or
   * `none`, as the user, from the config dir (for what the sandbox cannot do, e.g. a desktop notice).
   */
  sandbox: z.enum(["workspace-write", "read-only", "none"]).default("workspace-write"),
});
export type HookConfig = z.infer<typeof hookSchema>;

export const HOOK_EVENTS = ["beforeTool", "afterTool", "subagentStart", "subagentStop", "agentStop"] as const;
export type HookEvent = (typeof HOOK_EVENTS)[number];
