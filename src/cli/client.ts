import { NoRespondersError, RequestTimeoutError } from "../bus/bus.js";
import { NatsBus } from "../bus/nats-bus.js";
import { acceptsAnonymous, BusUnavailableError } from "../bus/nats-connect.js";
import { natsOptionsFromConfig } from "../compose/nats-options.js";
import type { LoadedConfig } from "../config/load.js";
import { dataDir } from "../config/paths.js";
import type { Role } from "../config/roles.js";
import { API_REQUEST_TIMEOUT_MS, type ApiRequest, type ApiVerb } from "../daemon/api.js";
import { UserError } from "../errors.js";
import { makeEnvelope } from "../events/envelope.js";
import type { Logger } from "../log.js";

export class NoDaemonError extends UserError {
  override name = "NoDaemonError";
}

/** Commands that start and command runs; they also read, and answer on a terminal. */
export const CLIENT_ROLES: readonly Role[] = ["client", "approver", "observer"];
/** Commands that answer approvals: `troupe approve`, and `troupe observe` (which can also only watch). */
export const APPROVER_ROLES: readonly Role[] = ["approver", "client", "observer"];

/**
 * A connection to the daemon's NATS for one CLI command, as the first of `roles` whose
 * credentials this machine has (when troupe.yaml names none).
 */
export async function connectClient(
  config: LoadedConfig,
  name: string,
  log: Logger,
  connectTimeoutMs = 3000,
  roles: readonly Role[] = CLIENT_ROLES,
): Promise<NatsBus> {
  const data = dataDir(config.troupe.dataDir);
  const options = natsOptionsFromConfig(config.troupe.nats, config.dir, process.env, {
    dataDir: data,
    roles,
  });
  // Nothing chosen and nothing to show for it: no seed, no CA of a daemon of this data dir. An open
  // server at the default address is then one any local user could have started first, to read
  // the task and answer for the daemon; the daemon refuses to share its address with one too.
  const unproven =
    !options.nkeySeedFile && !options.credsFile && !options.user && !options.token && !options.tls;
  if (unproven && config.natsUrlChosen !== true && (await acceptsAnonymous(options.url)))
    throw new NoDaemonError(
      `no daemon of data dir ${data} answers on ${options.url}, and a nats-server there asks no credentials (anyone on this machine can start one): start "troupe daemon", set TROUPE_DATA_DIR to the daemon's, or set NATS_URL (or nats.url in troupe.yaml) to use that server on purpose`,
    );
  return NatsBus.connect({ ...options, name, log, connectTimeoutMs });
}

/** One API call; no daemon listening becomes a one-line `NoDaemonError`. */
export async function callApi<V extends ApiVerb>(
  bus: NatsBus,
  config: LoadedConfig,
  verb: V,
  data: ApiRequest<V>,
  timeoutMs = API_REQUEST_TIMEOUT_MS,
): Promise<unknown> {
  const envelope = makeEnvelope({
    runId: "runId" in data ? String(data.runId) : "new",
    agentId: "cli",
    seq: 0,
    type: verb,
    data,
  });
  try {
    return (await bus.request(bus.subjects.api(verb), envelope, { timeoutMs })).data;
  } catch (error) {
    if (error instanceof NoRespondersError) {
      const { url, prefix } = config.troupe.nats;
      throw new NoDaemonError(
        `no daemon answers on ${url} (prefix ${prefix}): start one with "troupe daemon", or run with --local`,
      );
    }
    throw error;
  }
}

/** What runs.list left out, as a line for a person, or undefined when it gave every run. */
export function leftOutLine(list: {
  more?: number;
  skipped?: number;
  partial?: boolean;
}): string | undefined {
  const parts = [
    ...(list.more ? [`${list.more} older runs not listed`] : []),
    ...(list.skipped ? [`${list.skipped} records not of this daemon's skipped`] : []),
    ...(list.partial ? ["the runs bucket was not read whole in time"] : []),
  ];
  return parts.length ? `(${parts.join("; ")})` : undefined;
}

/** Why a list from the daemon is missing, said as what happened: no daemon, no reply, no NATS. */
export function whyNoList(error: unknown): string {
  if (error instanceof NoDaemonError) return "no daemon answers";
  if (error instanceof RequestTimeoutError) return "the daemon did not reply in time";
  if (error instanceof BusUnavailableError) return "cannot reach NATS";
  return error instanceof Error ? error.message : String(error);
}
