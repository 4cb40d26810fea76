/* The commands that serve: `troupe daemon` and its web console's login (`web`), and `troupe worker`. */
import type { Command } from "commander";
import type { CommandContext } from "./command-context.js";

/** Adds `troupe daemon` and `troupe web` to `program`. */
export function daemonCommands(program: Command, context: CommandContext): void {
  program
    .command("daemon")
    .description("serve the API and host runs on NATS (starts a nats-server child when none answers)")
    .option(
      "--web [host:port]",
      "serve the web console (default: troupe.yaml's web.listen, else 127.0.0.1 and a free port)",
    )
    .action(async (flags: { web?: string | true }) => {
      const { runDaemon } = await import("../daemon.js");
      const { reportUnhandledRejections } = await import("../unhandled.js");
      reportUnhandledRejections(context.log("daemon"));
      context.exit(await runDaemon(context.where(), context.log("daemon"), flags.web));
    });
  program
    .command("web")
    .description("print a login URL for the web console of the running daemon (each is good once)")
    .action(async () => {
      const { printWebLogin } = await import("../web.js");
      context.exit(printWebLogin(context.where()));
    });
}

/** Adds `troupe worker` to `program`. */
export function workerCommand(program: Command, context: CommandContext): void {
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
      const { runWorker } = await import("../worker.js");
      const { reportUnhandledRejections } = await import("../unhandled.js");
      reportUnhandledRejections(context.log("worker"));
      context.exit(
        await runWorker(
          context.where(),
          { heartbeatMs: Number(flags.heartbeatMs), deadAfterMs: Number(flags.deadAfterMs) },
          context.log("worker"),
        ),
      );
    });
}
