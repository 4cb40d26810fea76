import { readFileSync } from "node:fs";
import { Command, CommanderError, Option } from "commander";
import type { ConfigChoice } from "../config/load.js";
import { APPROVAL_POLICIES, SANDBOX_MODES } from "../config/policies.js";
import { UnreachableError, UserError } from "../errors.js";
import { createLogger, LOG_LEVELS, type Logger } from "../log.js";
import { Redactor } from "../safety/redact.js";
import { visible } from "../util/visible.js";
import type { RunFlags } from "./run.js";

/** Exit codes every command keeps. */
export const EXIT = { ok: 0, failed: 1, usage: 2, budget: 3, unreachable: 4, aborted: 130 } as const;

interface GlobalOptions {
  config?: string;
  nats?: string;
  logLevel: (typeof LOG_LEVELS)[number];
}

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

  const agents = program.command("agents").description("list and check agent definitions").exitOverride();
  agents
    .command("validate")
    .description("check troupe.yaml and the agents (plus any PATHs given); exit 2 on any problem")
    .argument("[paths...]", "agent YAML files or directories to check with the config's agents")
    .option(
      "--check-servers",
      "also start each MCP server once: its tools, or why not (exit 1 when one fails)",
    )
    .action(async (paths: string[], flags: { checkServers?: boolean }) => {
      const { loadConfig } = await import("../config/load.js");
      const { existsSync } = await import("node:fs");
      const { join } = await import("node:path");
      // A config dir given alone (it holds troupe.yaml) is checked as the config, not as agent files.
      const asConfig =
        paths.length === 1 && !globals().config && existsSync(join(paths[0] ?? "", "troupe.yaml"))
          ? paths[0]
          : undefined;
      // Reading to check starts nothing; starting the servers needs a trusted config. A dir named
      // here is given to be checked, not vouched for as --config is: it too must be trusted.
      if (asConfig && flags.checkServers) (await import("./trust.js")).assertTrustedToStart(asConfig);
      const config = loadConfig({
        ...where(),
        config: asConfig ?? globals().config,
        extraAgents: asConfig ? [] : paths,
        untrusted: flags.checkServers ? "refuse" : "read",
      });
      const names = [...config.agents.keys()].sort();
      log("config").debug({ dir: config.dir, file: config.file, agents: names }, "config loaded");
      process.stdout.write(
        `ok: ${names.length} agent${names.length === 1 ? "" : "s"} (${names.join(", ")}) in ${config.dir}\n`,
      );
      if (!flags.checkServers && !asConfig && !globals().config && !process.env.TROUPE_CONFIG) {
        const { untrustedNote } = await import("./trust.js");
        const note = untrustedNote(config.dir);
        if (note) process.stderr.write(`troupe: note: ${note}\n`);
      }
      if (flags.checkServers) {
        const { checkServers } = await import("./doctor.js");
        const probes = await checkServers(config);
        for (const probe of probes)
          process.stdout.write(
            `${probe.ok ? "ok  " : "fail"} mcp ${visible(`${probe.server}: ${probe.says}`)}\n`,
          );
        if (probes.some((probe) => !probe.ok)) exitCode = EXIT.failed;
        const { checkMcpToolEffects } = await import("../config/check-agents.js");
        const { formatProblem } = await import("../config/problems.js");
        const offered = new Map(probes.map((probe) => [probe.server, probe.tools ?? []]));
        const problems = checkMcpToolEffects(config.agents, offered);
        for (const problem of problems) process.stderr.write(`${visible(formatProblem(problem))}\n`);
        if (problems.length > 0) exitCode = EXIT.usage;
      }
    });
  agents
    .command("list")
    .description("the agents, with model, tools, subagents and budget")
    .action(async () => {
      const { loadConfig } = await import("../config/load.js");
      const { agentsTable } = await import("./agents.js");
      process.stdout.write(`${visible(agentsTable(loadConfig(where())))}\n`);
    });

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
      "--wait-daemon <seconds>",
      "how long to wait for NATS and a daemon to take the run, through a restart (exit 4 after)",
      "30",
    )
    .action(async (given: string | undefined, flags: RunFlags & { file?: string }) => {
      const { readTask } = await import("./task-input.js");
      const task = await readTask(given, flags.file);
      const { loadConfig } = await import("../config/load.js");
      const config = loadConfig(where());
      if (flags.local && flags.detach)
        throw new UsageError("--detach leaves a run to the daemon: a --local run ends with this process");
      if (flags.local) {
        const { runTask } = await import("./run.js");
        exitCode = await runTask(config, task, flags, log("run"));
      } else {
        const { runViaDaemon } = await import("./run-client.js");
        exitCode = await runViaDaemon(config, task, flags, log("run"));
      }
    });
  program
    .command("daemon")
    .description("serve the API and host runs on NATS (starts a nats-server child when none answers)")
    .option(
      "--web [host:port]",
      "serve the web console (default: troupe.yaml's web.listen, else 127.0.0.1 and a free port)",
    )
    .action(async (flags: { web?: string | true }) => {
      const { runDaemon } = await import("./daemon.js");
      const { reportUnhandledRejections } = await import("./unhandled.js");
      reportUnhandledRejections(log("daemon"));
      exitCode = await runDaemon(where(), log("daemon"), flags.web);
    });
  program
    .command("web")
    .description("print a login URL for the web console of the running daemon (each is good once)")
    .action(async () => {
      const { printWebLogin } = await import("./web.js");
      exitCode = printWebLogin(where());
    });
  program
    .command("steer")
    .description("send a running run a message; it reaches the agent after its current tool batch")
    .argument("<runId>")
    .argument("<text>")
    .action(async (runId: string, text: string) => {
      const { runControl } = await import("./control.js");
      exitCode = await runControl(where(), "runs.steer", { runId, text }, log("steer"));
    });
  program
    .command("abort")
    .description("abort a running run and all its subagents")
    .argument("<runId>")
    .action(async (runId: string) => {
      const { runControl } = await import("./control.js");
      exitCode = await runControl(where(), "runs.abort", { runId }, log("abort"));
    });
  program
    .command("status")
    .description("the daemon's runs and the attached workers")
    .option("--json", "as JSON")
    .action(async (flags: { json?: boolean }) => {
      const { runStatus } = await import("./control.js");
      exitCode = await runStatus(where(), flags, log("status"));
    });
  program
    .command("observe")
    .description(
      "follow a run (or every run) live from any terminal: the agent tree, spend, tools, approvals",
    )
    .argument("[runId]", "one run; every run when absent")
    .option("--from-start", "replay from the run's first event, then follow live")
    .option("--json", "one event per line (also the default without a terminal)")
    .action(async (runId: string | undefined, flags: { fromStart?: boolean; json?: boolean }) => {
      const { runObserve } = await import("./observe.js");
      exitCode = await runObserve(where(), runId, flags, log("observe"));
    });
  program
    .command("inspect")
    .description(
      "an agent's machine as a Mermaid state diagram with its current state marked, and its transitions with times",
    )
    .argument("<runId>")
    .argument("[agentId]", "default: the run's first agent")
    .action(async (runId: string, agentId: string | undefined) => {
      const { runInspect } = await import("./inspect.js");
      exitCode = await runInspect(where(), runId, agentId, log("inspect"));
    });
  program
    .command("runs")
    .description("local runs (kept in the data dir) and the daemon's, with state, agent, spend and age")
    .option("--json", "as JSON")
    .action(async (flags: { json?: boolean }) => {
      const { runRuns } = await import("./history.js");
      exitCode = await runRuns(where(), flags, log("runs"));
    });
  program
    .command("resume")
    .description("continue an unfinished or aborted run from its snapshot (local, else on the daemon)")
    .argument("<runId>")
    .option("--json", "print every event as one JSON line")
    .action(async (runId: string, flags: { json?: boolean }) => {
      const { runResume } = await import("./history.js");
      exitCode = await runResume(where(), runId, flags, log("resume"));
    });
  program
    .command("replay")
    .description("print a run's events as observe does")
    .argument("<runId>")
    .option("--json", "one event per line (also the default without a terminal)")
    .action(async (runId: string, flags: { json?: boolean }) => {
      const { runReplay } = await import("./history.js");
      exitCode = await runReplay(where(), runId, flags, log("replay"));
    });
  program
    .command("approve")
    .description("answer a pending approval from any terminal: the first answer wins")
    .argument(
      "[callId]",
      "the tool call's id (troupe approvals lists them); without it, the only one waiting",
    )
    .option("--allow", "allow the call")
    .option("--deny", "deny the call")
    .option("--reason <text>", "why; the model reads it")
    .option("--run <runId>", "the run, when the call id waits in more than one")
    .action(
      async (
        callId: string | undefined,
        flags: { allow?: boolean; deny?: boolean; reason?: string; run?: string },
      ) => {
        const { runApprove } = await import("./approve.js");
        exitCode = await runApprove(where(), callId, flags, log("approve"));
      },
    );
  program
    .command("approvals")
    .description("the approvals waiting for an answer: call id, run, agent, tool, age, what it would do")
    .argument("[runId]", "only this run's")
    .option("--json", "as JSON")
    .action(async (runId: string | undefined, flags: { json?: boolean }) => {
      const { runApprovals } = await import("./approve.js");
      exitCode = await runApprovals(where(), runId, flags, log("approvals"));
    });
  const keys = program
    .command("keys")
    .description("approver keys: who may answer approvals, checked by signature");
  keys
    .command("create")
    .description("make a key pair in the data dir and print its public key for a daemon's approvers")
    .argument("<name>", "the approver's name, as approvals will show it")
    .action(async (name: string) => {
      const { runKeysCreate } = await import("./keys.js");
      exitCode = runKeysCreate(where(), name);
    });
  keys
    .command("list")
    .description("this user's key and the approvers troupe.yaml trusts")
    .action(async () => {
      const { runKeysList } = await import("./keys.js");
      exitCode = runKeysList(where());
    });
  program
    .command("credentials")
    .description(
      "the embedded NATS's credentials per role: list them, print ROLE's seed for another host, or a server config",
    )
    .argument("[role]", "daemon, worker, client, approver or observer")
    .option(
      "--server-config",
      "print the accounts block (users, imports, exports) for a nats-server of your own",
    )
    .option("--ca", "print the path of the CA certificate the embedded server's TLS is checked against")
    .action(async (role: string | undefined, flags: { serverConfig?: boolean; ca?: boolean }) => {
      const { runCredentials } = await import("./keys.js");
      exitCode = runCredentials(where(), role, flags);
    });
  program
    .command("worker")
    .description(
      "host subagents for the daemon and other runs, from the NATS queue group <prefix>.work.spawn",
    )
    .option("--heartbeat-ms <ms>", "how often to say it is alive", "1000")
    .option(
      "--dead-after-ms <ms>",
      "how long another worker may be silent before its actors are taken over",
      "5000",
    )
    .action(async (flags: { heartbeatMs: string; deadAfterMs: string }) => {
      const { runWorker } = await import("./worker.js");
      const { reportUnhandledRejections } = await import("./unhandled.js");
      reportUnhandledRejections(log("worker"));
      exitCode = await runWorker(
        where(),
        { heartbeatMs: Number(flags.heartbeatMs), deadAfterMs: Number(flags.deadAfterMs) },
        log("worker"),
      );
    });
  program
    .command("trust")
    .description(
      "trust a config dir found in the working directory (default ./config): troupe loads it only once trusted, and asks again when it changes",
    )
    .argument("[dir]", "the config dir (default: ./config)")
    .option("--list", "the trusted config dirs, and whether each is still what was trusted")
    .option("--forget <dir>", "trust DIR no more")
    .action(async (dir: string | undefined, flags: { list?: boolean; forget?: string }) => {
      const { runTrust, runTrustForget, runTrustList } = await import("./trust.js");
      if (flags.list) exitCode = runTrustList();
      else if (flags.forget) exitCode = runTrustForget(flags.forget);
      else exitCode = runTrust(dir);
    });
  program
    .command("doctor")
    .description(
      "check what this machine gives troupe: the command sandbox, NATS, the config, the MCP servers",
    )
    .action(async () => {
      const { loadConfig } = await import("../config/load.js");
      const { runDoctor } = await import("./doctor.js");
      exitCode = await runDoctor(loadConfig(where()));
    });
  program
    .command("demo")
    .description("a canned multi-step run on a built-in scripted model: no API key or server needed")
    .option("--json", "print every event as one JSON line on stdout")
    .action(async (flags: { json?: boolean }) => {
      const { runDemo } = await import("./demo.js");
      exitCode = await runDemo(flags, log("demo"));
    });

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

/** A command called the wrong way: one line, exit 2. */
class UsageError extends UserError {
  override name = "UsageError";
}

/**
 * An error as one line on stderr. Its message may carry what a run, a model, a config file or the
 * daemon said: it is shown through `visible`, never obeyed.
 */
async function reportError(error: unknown): Promise<number> {
  const say = (text: string) => process.stderr.write(`${visible(text)}\n`);
  if (error instanceof CommanderError) {
    // Commander has already printed its message; --help and --version end here too.
    return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
  }
  const { ConfigError } = await import("../config/problems.js");
  if (error instanceof ConfigError) {
    say(error.message);
    return EXIT.usage;
  }
  const { BusUnavailableError } = await import("../bus/nats-connect.js");
  if (error instanceof BusUnavailableError) {
    // Nothing listens there: most often no daemon (which starts NATS on this machine) is running.
    const hint = /ECONNREFUSED|connection refused/i.test(error.message)
      ? ": start one with troupe daemon (it starts NATS here), or point --nats (or NATS_URL) at yours"
      : "";
    say(`troupe: ${error.message.replace(/: connect ECONNREFUSED \S+$/, "")}${hint}`);
    // Nothing there (as for no daemon): nothing was done, and trying again later may work. Refused
    // credentials or a server that is not Troupe's will not mend themselves.
    return hint || /timeout|timed out|ENOTFOUND|EHOSTUNREACH|ECONNRESET/i.test(error.message)
      ? EXIT.unreachable
      : EXIT.failed;
  }
  // The daemon turned the request down (a workspace it does not serve, a policy beyond its ceiling):
  // the user's to mend, said as the daemon said it.
  const { RemoteError } = await import("../bus/bus.js");
  if (error instanceof RemoteError && error.remoteName === "RequestRefusedError") {
    say(`troupe: ${error.message.slice(error.subject.length + 2)}`);
    return EXIT.usage;
  }
  // What `troupe run` waited for and never had, or no daemon to ask: exit 4, so a wrapper can tell
  // it from a bad command.
  const { NoDaemonError } = await import("./client.js");
  if (error instanceof UnreachableError || error instanceof NoDaemonError) {
    say(`troupe: ${error.message}`);
    return EXIT.unreachable;
  }
  // Mistakes in how troupe was called or configured: one line, exit 2.
  if (error instanceof UserError) {
    say(`troupe: ${error.message}`);
    return EXIT.usage;
  }
  say(`troupe: ${error instanceof Error ? error.message : String(error)}`);
  if (process.env.TROUPE_DEBUG && error instanceof Error) say(error.stack ?? "");
  return EXIT.failed;
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
