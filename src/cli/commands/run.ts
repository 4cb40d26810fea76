/* `troupe run`: a task on an agent, here (`--local`) or on the daemon. */
import { type Command, Option } from "commander";
import { APPROVAL_POLICIES, SANDBOX_MODES } from "../../config/policies.js";
import { UserError } from "../../errors.js";
import type { RunFlags } from "../run.js";
import type { CommandContext } from "./command-context.js";

/** Adds `troupe run` to `program`. */
export function runCommand(program: Command, context: CommandContext): void {
  program
    .command("run")
    .description("run a task on an agent and show it as it happens")
    .argument("[task]", 'what the agent should do; "-" reads it from stdin')
    .option("-f, --file <path>", "read the task from this file")
    .option("--local", "run in this process on the in-process bus (no daemon)")
    .option("-a, --agent <name>", "the agent to run (default: the config's defaultAgent)")
    .option("-w, --workspace <dir>", "the directory the agent works in (default: the config's workspace)")
    .addOption(new Option("--approval <policy>", "approval policy for this run").choices(APPROVAL_POLICIES))
    .addOption(
      new Option(
        "--sandbox <mode>",
        "where commands run: read-only, workspace-write, or off (off asks for every command unless yolo)",
      ).choices(SANDBOX_MODES),
    )
    .addOption(
      new Option("--mode <mode>", "plan: read tools only, a few turns, answer with a plan").choices([
        "act",
        "plan",
      ]),
    )
    .option(
      "--skill <name>",
      "load this skill before the first model call (or start the task with /skill:NAME)",
    )
    .option("--json", "print every event as one JSON line on stdout, and nothing else there")
    .option(
      "--id <key>",
      "run once per key: the same key, task and options again follow the run it started (or a run id)",
    )
    .option("--detach", "leave the run to the daemon once it has taken it; print its id")
    .option(
      "--continue [runId]",
      "go on with this run (default: the newest of this config), the task its next message",
    )
    .option(
      "--wait-daemon <seconds>",
      "how long to wait for NATS and a daemon to take the run, through a restart (exit 4 after)",
      "30",
    )
    .action(
      async (given: string | undefined, flags: RunFlags & { file?: string; continue?: string | true }) => {
        const { loadConfig } = await import("../../config/load.js");
        if (flags.continue !== undefined) {
          // `--continue "TASK"`: the option took the task for its run id.
          const [runId, task] =
            typeof flags.continue === "string" && (given !== undefined || flags.continue.startsWith("run-"))
              ? [flags.continue, given]
              : [undefined, typeof flags.continue === "string" ? flags.continue : given];
          const refused = ignoredByContinue(flags, runId !== undefined);
          if (refused) throw new UsageError(refused);
          const { readTask } = await import("../task-input.js");
          const text = await readTask(task, flags.file);
          const config = loadConfig(context.where());
          const { followUp, newestRun } = await import("../follow-up.js");
          const log = context.log("run");
          const id =
            runId ?? (await newestRun(config, { local: flags.local, workspace: flags.workspace }, log));
          context.exit(await followUp(config, id, text, flags, log));
          return;
        }
        const { readTask } = await import("../task-input.js");
        const task = await readTask(given, flags.file);
        const config = loadConfig(context.where());
        if (flags.local && flags.detach)
          throw new UsageError("--detach leaves a run to the daemon: a --local run ends with this process");
        if (flags.local) {
          const { runTask } = await import("../run.js");
          context.exit(await runTask(config, task, flags, context.log("run")));
        } else {
          const { runViaDaemon } = await import("../run-client.js");
          context.exit(await runViaDaemon(config, task, flags, context.log("run")));
        }
      },
    );
}

/** What `--continue` would not use, as its option, with the word for what the run keeps instead. */
const KEPT_BY_THE_RUN: ReadonlyArray<[keyof RunFlags, string]> = [
  ["agent", "--agent"],
  ["sandbox", "--sandbox"],
  ["mode", "--mode"],
  ["skill", "--skill"],
  ["id", "--id"],
  ["detach", "--detach"],
];

/**
 * Why `troupe run --continue` refuses these flags, or undefined: a run goes on with its own agent,
 * sandbox, mode and skill, in its own workspace (`-w` only picks whose newest run, with no RUN), and
 * a turn is followed here, never detached or keyed.
 */
function ignoredByContinue(flags: RunFlags, runGiven: boolean): string | undefined {
  const given = KEPT_BY_THE_RUN.filter(([key]) => flags[key] !== undefined).map(([, option]) => option);
  if (runGiven && flags.workspace !== undefined) given.push("--workspace");
  if (given.length === 0) return undefined;
  return `troupe run --continue goes on with a run as it was started, so it does not take ${given.join(", ")}: drop ${given.length === 1 ? "it" : "them"}, or leave out --continue to start a new run with ${given.length === 1 ? "it" : "them"}`;
}

/** A command called the wrong way: one line, exit 2. */
class UsageError extends UserError {
  override name = "UsageError";
}
