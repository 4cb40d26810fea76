/* The commands on runs that are going or have been: steer, abort, status, observe, inspect, runs, resume, replay, export-trace. */
import { type Command, Option } from "commander";
import type { ExportTraceFlags } from "../export-trace.js";
import type { CommandContext } from "./command-context.js";

/** Adds the commands on runs to `program`. */
export function runsCommands(program: Command, context: CommandContext): void {
  program
    .command("steer")
    .description("send a running run a message; it reaches the agent after its current tool batch")
    .argument("<runId>")
    .argument("<text>")
    .action(async (runId: string, text: string) => {
      const { runControl } = await import("../control.js");
      context.exit(await runControl(context.where(), "runs.steer", { runId, text }, context.log("steer")));
    });
  program
    .command("abort")
    .description("abort a running run and all its subagents")
    .argument("<runId>")
    .action(async (runId: string) => {
      const { runControl } = await import("../control.js");
      context.exit(await runControl(context.where(), "runs.abort", { runId }, context.log("abort")));
    });
  program
    .command("status")
    .description("the daemon's runs and the attached workers")
    .option("--json", "as JSON")
    .action(async (flags: { json?: boolean }) => {
      const { runStatus } = await import("../control.js");
      context.exit(await runStatus(context.where(), flags, context.log("status")));
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
      const { runObserve } = await import("../observe.js");
      context.exit(await runObserve(context.where(), runId, flags, context.log("observe")));
    });
  program
    .command("inspect")
    .description(
      "an agent's machine as a Mermaid state diagram with its current state marked, and its transitions with times",
    )
    .argument("<runId>")
    .argument("[agentId]", "default: the run's first agent")
    .action(async (runId: string, agentId: string | undefined) => {
      const { runInspect } = await import("../inspect.js");
      context.exit(await runInspect(context.where(), runId, agentId, context.log("inspect")));
    });
  program
    .command("runs")
    .description("local runs (kept in the data dir) and the daemon's, with state, agent, spend and age")
    .option("--json", "as JSON")
    .action(async (flags: { json?: boolean }) => {
      const { runRuns } = await import("../history.js");
      context.exit(await runRuns(context.where(), flags, context.log("runs")));
    });
  program
    .command("resume")
    .description("continue an unfinished or aborted run from its snapshot (local, else on the daemon)")
    .argument("<runId>")
    .option("--json", "print every event as one JSON line")
    .action(async (runId: string, flags: { json?: boolean }) => {
      const { runResume } = await import("../history.js");
      context.exit(await runResume(context.where(), runId, flags, context.log("resume")));
    });
  program
    .command("replay")
    .description("print a run's events as observe does")
    .argument("<runId>")
    .option("--json", "one event per line (also the default without a terminal)")
    .action(async (runId: string, flags: { json?: boolean }) => {
      const { runReplay } = await import("../history.js");
      context.exit(await runReplay(context.where(), runId, flags, context.log("replay")));
    });
  program
    .command("export-trace")
    .description(
      "send a stored run's events as OpenTelemetry spans to an OTLP endpoint, or write them as OTLP/JSON",
    )
    .argument("<runId>")
    .option(
      "--endpoint <url>",
      "the collector's base URL (default: telemetry.endpoint, else OTEL_EXPORTER_OTLP_ENDPOINT)",
    )
    .addOption(
      new Option(
        "--protocol <protocol>",
        "how to send (default: telemetry.protocol, else OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)",
      ).choices(["http/protobuf", "grpc"]),
    )
    .option("--file <path>", "write OTLP/JSON to this file instead of sending")
    .option(
      "--content",
      "put prompts, completions and tool output on the spans (redacted, as the events hold them)",
    )
    .action(async (runId: string, flags: ExportTraceFlags) => {
      const { runExportTrace } = await import("../export-trace.js");
      context.exit(await runExportTrace(context.where(), runId, flags, context.log("export-trace")));
    });
}
