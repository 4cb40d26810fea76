import { readFileSync } from "node:fs";
import { Command, Option } from "commander";
import type { ConfigChoice } from "../config/load.js";
import { createLogger, LOG_LEVELS, type Logger } from "../log.js";
import { Redactor } from "../safety/redact.js";
import { agentsCommands } from "./commands/agents.js";
import { approvalCommands } from "./commands/approvals.js";
import { chatCommands } from "./commands/chat.js";
import type { CommandContext, GlobalOptions } from "./commands/command-context.js";
import { runCommand } from "./commands/run.js";
import { runsCommands } from "./commands/runs.js";
import { daemonCommands, workerCommand } from "./commands/serve.js";
import { setupCommands } from "./commands/setup.js";
import { EXIT } from "./exit-codes.js";
import { reportError } from "./report-error.js";

/**
 * The `troupe` command. Heavy modules load inside each action, so `--help` stays fast. Returns the
 * exit code; a user's mistake is one line on stderr, never a stack trace.
 */
export async function main(argv: string[]): Promise<number> {
  // Whoever reads the output may stop (`troupe demo --json | head`): then there is nothing more to
  // say, and troupe leaves quietly (what it holds is cleaned up on exit).
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code === "EPIPE") process.exit(EXIT.ok);
    throw error;
  });
  const program = new Command("troupe")
    .description("An actor-model orchestrator for LLM agents: XState machines as actors over NATS.")
    .option(
      "-c, --config <dir>",
      "the config directory (default: TROUPE_CONFIG, else ./config when it holds troupe.yaml (used once you trust it: troupe trust), else the one shipped with troupe)",
    )
    .option("--nats <url>", "the NATS server (overrides NATS_URL and troupe.yaml's nats.url)")
    .addOption(new Option("--log-level <level>", "log verbosity").choices(LOG_LEVELS).default("warn"))
    .version(troupeVersion(), "-V, --version", "the version of troupe")
    .exitOverride()
    .configureOutput({ writeErr: (text) => process.stderr.write(text) })
    .showSuggestionAfterError();

  program.hook("preAction", (_program, action) => {
    // A task or a message given as an argument is not for other users' `ps`: the process shows
    // its command alone (`troupe run`), its arguments overwritten.
    process.title = commandLine(action);
  });
  let exitCode: number = EXIT.ok;
  const globals = () => program.opts<GlobalOptions>();
  /** The config every command runs on: `--config`, and `--nats` over NATS_URL and troupe.yaml's. */
  const where = (): ConfigChoice => ({ config: globals().config, natsUrl: globals().nats });
  let logger: Logger | undefined;
  const redactor = Redactor.fromEnv(process.env);
  const log = (component: string) => {
    // Secrets of the environment never reach a log line.
    logger ??= createLogger({ level: globals().logLevel, redact: (line) => redactor.redact(line) });
    return logger.child({ command: component });
  };
  const context: CommandContext = {
    globals,
    where,
    log,
    exit: (code) => {
      exitCode = code;
    },
  };

  // In the order --help lists them.
  for (const add of [
    agentsCommands,
    runCommand,
    chatCommands,
    daemonCommands,
    runsCommands,
    approvalCommands,
    workerCommand,
    setupCommands,
  ])
    add(program, context);

  try {
    await program.parseAsync(argv);
  } catch (error) {
    exitCode = await reportError(error);
  }
  return exitCode;
}

/** `troupe run` and the like, without their arguments. */
function commandLine(action: Command): string {
  const names: string[] = [];
  for (let command: Command | null = action; command?.parent; command = command.parent)
    names.unshift(command.name());
  return ["troupe", ...names].join(" ");
}

/**
 * Troupe's version, from its package.json: two levels up from dist/cli, three from the bench's build
 * of src/cli.
 */
function troupeVersion(): string {
  for (const up of ["../../package.json", "../../../package.json"]) {
    try {
      const found = JSON.parse(readFileSync(new URL(up, import.meta.url), "utf8")) as Record<string, string>;
      if (found.name === "troupe" && found.version) return found.version;
    } catch {}
  }
  return "unknown";
}
