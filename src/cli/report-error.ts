/* How `troupe` says what went wrong: one line on stderr, and the exit code that tells the kind. */
import { CommanderError } from "commander";
import { UnreachableError, UserError } from "../errors.js";
import { visible } from "../util/visible.js";
import { EXIT } from "./exit-codes.js";

/**
 * An error as one line on stderr. Its message may carry what a run, a model, a config file or the
 * daemon said: it is shown through `visible`, never obeyed.
 */
export async function reportError(error: unknown): Promise<number> {
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
