/* `troupe chat` and `troupe follow-up`: a run as a conversation, on a terminal or from a script. */
import { type Command, Option } from "commander";
import { APPROVAL_POLICIES, SANDBOX_MODES } from "../../config/policies.js";
import type { ChatFlags } from "../chat.js";
import type { RunFlags } from "../run.js";
import type { CommandContext } from "./command-context.js";

/** Adds `troupe chat` and `troupe follow-up` to `program`. */
export function chatCommands(program: Command, context: CommandContext): void {
  program
    .command("chat")
    .description(
      "talk with an agent on this terminal: each line a follow-up of the same run (/help lists the / commands)",
    )
    .option("--local", "run in this process on the in-process bus (no daemon)")
    .option("-a, --agent <name>", "the agent to talk with (default: the config's defaultAgent)")
    .option("-w, --workspace <dir>", "the directory the agent works in (default: the config's workspace)")
    .option("--continue [runId]", "go on with this run (default: the newest) rather than start one")
    .addOption(new Option("--approval <policy>", "approval policy of the run").choices(APPROVAL_POLICIES))
    .addOption(
      new Option("--sandbox <mode>", "where commands run: read-only, workspace-write, or off").choices(
        SANDBOX_MODES,
      ),
    )
    .option("--wait-daemon <seconds>", "how long to wait for NATS and a daemon", "30")
    .action(async (flags: ChatFlags) => {
      const { loadConfig } = await import("../../config/load.js");
      const config = loadConfig(context.where());
      const { runChat } = await import("../chat.js");
      context.exit(await runChat(config, flags, context.log("chat")));
    });
  program
    .command("follow-up")
    .description(
      "go on with a run (finished, aborted or waiting) with your next message, shown as troupe run shows it",
    )
    .argument("<runId>")
    .argument("<text>", 'what to say next; "-" reads it from stdin')
    .option("--local", "only a local run (kept in the data dir), never the daemon's")
    .addOption(
      new Option("--approval <policy>", "approval policy from this turn on").choices(APPROVAL_POLICIES),
    )
    .option("--json", "print every event as one JSON line on stdout, and nothing else there")
    .option("--wait-daemon <seconds>", "how long to wait for NATS and a daemon", "30")
    .action(async (runId: string, given: string, flags: RunFlags) => {
      const { readTask } = await import("../task-input.js");
      const text = await readTask(given, undefined);
      const { loadConfig } = await import("../../config/load.js");
      const config = loadConfig(context.where());
      const { followUp } = await import("../follow-up.js");
      context.exit(await followUp(config, runId, text, flags, context.log("follow-up")));
    });
}
