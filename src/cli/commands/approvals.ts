/* Approvals and who may give them: `troupe approve | approvals | keys | credentials`. */
import type { Command } from "commander";
import type { CommandContext } from "./command-context.js";

/** Adds the commands of approvals, keys and credentials to `program`. */
export function approvalCommands(program: Command, context: CommandContext): void {
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
    .option(
      "--field <name=value>",
      "an MCP server's question: the answer to one of its fields (with --allow; again for each)",
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option("--run <runId>", "the run, when the call id waits in more than one")
    .action(
      async (
        callId: string | undefined,
        flags: { allow?: boolean; deny?: boolean; reason?: string; field?: string[]; run?: string },
      ) => {
        const { runApprove } = await import("../approve.js");
        context.exit(await runApprove(context.where(), callId, flags, context.log("approve")));
      },
    );
  program
    .command("approvals")
    .description("the approvals waiting for an answer: call id, run, agent, tool, age, what it would do")
    .argument("[runId]", "only this run's")
    .option("--json", "as JSON")
    .action(async (runId: string | undefined, flags: { json?: boolean }) => {
      const { runApprovals } = await import("../approve.js");
      context.exit(await runApprovals(context.where(), runId, flags, context.log("approvals")));
    });
  const keys = program
    .command("keys")
    .description("approver keys: who may answer approvals, checked by signature");
  keys
    .command("create")
    .description("make a key pair in the data dir and print its public key for a daemon's approvers")
    .argument("<name>", "the approver's name, as approvals will show it")
    .action(async (name: string) => {
      const { runKeysCreate } = await import("../keys.js");
      context.exit(runKeysCreate(context.where(), name));
    });
  keys
    .command("list")
    .description("this user's key and the approvers troupe.yaml trusts")
    .action(async () => {
      const { runKeysList } = await import("../keys.js");
      context.exit(runKeysList(context.where()));
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
      const { runCredentials } = await import("../keys.js");
      context.exit(runCredentials(context.where(), role, flags));
    });
}
