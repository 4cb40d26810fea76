/* What a machine and a config dir give troupe: `troupe trust | permissions | doctor | demo`. */
import type { Command } from "commander";
import type { CommandContext } from "./command-context.js";

/** Adds `troupe trust`, `troupe permissions`, `troupe doctor` and `troupe demo` to `program`. */
export function setupCommands(program: Command, context: CommandContext): void {
  program
    .command("trust")
    .description(
      "trust a config dir found in the working directory (default ./config): troupe loads it only once trusted, and asks again when it changes",
    )
    .argument("[dir]", "the config dir (default: ./config)")
    .option("--list", "the trusted config dirs, and whether each is still what was trusted")
    .option("--forget <dir>", "trust DIR no more")
    .action(async (dir: string | undefined, flags: { list?: boolean; forget?: string }) => {
      const { runTrust, runTrustForget, runTrustList } = await import("../trust.js");
      if (flags.list) context.exit(runTrustList());
      else if (flags.forget) context.exit(runTrustForget(flags.forget));
      else context.exit(runTrust(dir));
    });
  program
    .command("permissions")
    .description(
      "the allow and deny rules in effect (troupe.yaml's permissions), one a line: where, allow or deny, the pattern",
    )
    .option("--json", "print them as one JSON list")
    .action(async (flags: { json?: boolean }) => {
      const { loadConfig } = await import("../../config/load.js");
      const { runPermissions } = await import("../permissions.js");
      context.exit(runPermissions(loadConfig(context.where()), flags.json));
    });
  program
    .command("doctor")
    .description(
      "check what this machine gives troupe: the command sandbox, NATS, the config, the MCP servers",
    )
    .action(async () => {
      const { loadConfig } = await import("../../config/load.js");
      const { runDoctor } = await import("../doctor.js");
      context.exit(await runDoctor(loadConfig(context.where())));
    });
  program
    .command("demo")
    .description("a canned multi-step run on a built-in scripted model: no API key or server needed")
    .option("--json", "print every event as one JSON line on stdout")
    .action(async (flags: { json?: boolean }) => {
      const { runDemo } = await import("../demo.js");
      context.exit(await runDemo(flags, context.log("demo")));
    });
}
