/* `troupe agents validate | list`: check the agent definitions, or list them. */
import type { Command } from "commander";
import { visible } from "../../util/visible.js";
import { EXIT } from "../exit-codes.js";
import type { CommandContext } from "./command-context.js";

/** Adds the `agents` commands to `program`. */
export function agentsCommands(program: Command, context: CommandContext): void {
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
      const { loadConfig } = await import("../../config/load.js");
      const { existsSync } = await import("node:fs");
      const { join } = await import("node:path");
      // A config dir given alone (it holds troupe.yaml) is checked as the config, not as agent files.
      const asConfig =
        paths.length === 1 && !context.globals().config && existsSync(join(paths[0] ?? "", "troupe.yaml"))
          ? paths[0]
          : undefined;
      // Reading to check starts nothing; starting the servers needs a trusted config. A dir named
      // here is given to be checked, not vouched for as --config is: it too must be trusted.
      if (asConfig && flags.checkServers) (await import("../trust.js")).assertTrustedToStart(asConfig);
      const config = loadConfig({
        ...context.where(),
        config: asConfig ?? context.globals().config,
        extraAgents: asConfig ? [] : paths,
        untrusted: flags.checkServers ? "refuse" : "read",
      });
      const names = [...config.agents.keys()].sort();
      context.log("config").debug({ dir: config.dir, file: config.file, agents: names }, "config loaded");
      process.stdout.write(
        `ok: ${names.length} agent${names.length === 1 ? "" : "s"} (${names.join(", ")}) in ${config.dir}\n`,
      );
      if (!flags.checkServers && !asConfig && !context.globals().config && !process.env.TROUPE_CONFIG) {
        const { untrustedNote } = await import("../trust.js");
        const note = untrustedNote(config.dir);
        if (note) process.stderr.write(`troupe: note: ${note}\n`);
      }
      if (flags.checkServers) {
        const { checkServers } = await import("../doctor.js");
        const probes = await checkServers(config);
        for (const probe of probes)
          process.stdout.write(
            `${probe.ok ? "ok  " : "fail"} mcp ${visible(`${probe.server}: ${probe.says}`)}\n`,
          );
        if (probes.some((probe) => !probe.ok)) context.exit(EXIT.failed);
        const { checkMcpToolEffects } = await import("../../config/check-agents.js");
        const { formatProblem } = await import("../../config/problems.js");
        const offered = new Map(probes.map((probe) => [probe.server, probe.tools ?? []]));
        const problems = checkMcpToolEffects(config.agents, offered);
        for (const problem of problems) process.stderr.write(`${visible(formatProblem(problem))}\n`);
        if (problems.length > 0) context.exit(EXIT.usage);
      }
    });
  agents
    .command("list")
    .description("the agents, with model, tools, subagents and budget")
    .action(async () => {
      const { loadConfig } = await import("../../config/load.js");
      const { agentsTable } = await import("../agents.js");
      process.stdout.write(`${visible(agentsTable(loadConfig(context.where())))}\n`);
    });
}
