import { createHash } from "node:crypto";
import { resolve as resolvePath } from "node:path";
import { newRunId } from "../actors/run-ids.js";
import { RemoteError, RequestTimeoutError } from "../bus/bus.js";
import { followRun } from "../bus/follow-run.js";
import { BusUnavailableError, ServerNotOursError } from "../bus/nats-connect.js";
import type { LoadedConfig } from "../config/load.js";
import type { ApiRequest } from "../daemon/api.js";
import { UnreachableError } from "../errors.js";
import type { Logger } from "../log.js";
import type { AgentOutput } from "../machines/agent-types.js";
import { parseTraceparent } from "../telemetry/span-ids.js";
import { callApi, connectClient, NoDaemonError } from "./client.js";
import { followDaemonTurn } from "./daemon-turn.js";
import { humanRenderer, jsonRenderer } from "./render.js";
import { RUN_EXIT, type RunFlags, sayHowToGoOn } from "./run.js";
import { ttyApprover } from "./tty-approver.js";

/**
 * `troupe run` against a daemon: asks it to start the run, then follows the run's events on the bus
 * (from its first event) until its first agent stops. Ctrl-C once asks; twice aborts the run.
 */
export async function runViaDaemon(
  config: LoadedConfig,
  task: string,
  flags: RunFlags,
  log: Logger,
): Promise<number> {
  const waitMs = Math.max(0, Number(flags.waitDaemon ?? 30)) * 1000;
  const deadline = Date.now() + waitMs;
  const bus = await connectClient(config, "troupe-run", log, Math.max(1000, waitMs)).catch((error) => {
    throw error instanceof BusUnavailableError && !(error instanceof ServerNotOursError)
      ? new DaemonUnreachableError(`${error.message} (waited ${waitMs / 1000} s)`, { cause: error })
      : error;
  });
  const reading = new AbortController();
  try {
    // The run's id is chosen here, so following its events starts before the daemon starts it; with
    // --id it is that key's, so the same submission made again attaches to the run it made (the
    // daemon refuses one that asks something else of a run under that id).
    const runId = flags.id ? runIdFor(flags.id, config.troupe.nats.prefix) : newRunId();
    if (!flags.json && process.stderr.isTTY)
      process.stderr.write(
        `troupe: run ${runId} (troupe run --id ${flags.id ?? runId} … follows it again)\n`,
      );
    // Status lines: through the approver once there is one, so none glues onto an open question.
    let status = (line: string): void => void process.stderr.write(`${line}\n`);
    let reconnecting = false;
    const events = followRun(bus, runId, {
      signal: reading.signal,
      onRetry: () => {
        if (reconnecting) return;
        reconnecting = true;
        status("troupe: reconnecting to NATS…");
      },
    })[Symbol.asyncIterator]();
    const first = events.next();
    first.catch(() => {}); // awaited below, once the daemon has answered
    const started = await submit(bus, config, deadline, {
      task,
      runId,
      ...(flags.agent ? { agent: flags.agent } : {}),
      approval: flags.approval,
      mode: flags.mode,
      sandbox: flags.sandbox,
      ...(flags.skill ? { skill: flags.skill } : {}),
      // The daemon takes it only inside its workspaces, and says so otherwise.
      ...(flags.workspace ? { workspace: resolvePath(flags.workspace) } : {}),
      // Asked inside a traced job (TRACEPARENT, as CI tools set it): the run is a part of its trace.
      ...(parseTraceparent(process.env.TRACEPARENT) ? { traceparent: process.env.TRACEPARENT } : {}),
    });
    if (flags.detach) {
      // The id on stdout, for a script; how to come back, for a person.
      process.stdout.write(flags.json ? `${JSON.stringify(started)}\n` : `${started.runId}\n`);
      process.stderr.write(
        `troupe: run ${started.runId} goes on in the daemon: troupe run --id ${started.runId} with the same task and options follows it again (and answers its approvals), troupe observe ${started.runId} watches\n`,
      );
      return 0;
    }
    const renderer = flags.json ? jsonRenderer() : humanRenderer(() => started.agentId);
    let pressed = 0;
    const onSigint = () => {
      pressed++;
      if (pressed === 1) {
        process.stderr.write(
          "\npress Ctrl-C again to abort the run (otherwise the daemon carries on with it)\n",
        );
        return;
      }
      void callApi(bus, config, "runs.abort", { runId: started.runId }).catch(() => reading.abort());
    };
    process.on("SIGINT", onSigint);
    // On a terminal, this client is one of the places an approval can be answered; the first answer wins.
    const asker = process.stdin.isTTY && process.stderr.isTTY ? ttyApprover() : undefined;
    if (asker) status = (line) => asker.say(line);
    let output: AgentOutput | undefined;
    try {
      output = await followDaemonTurn(
        bus,
        config,
        {
          runId: started.runId,
          agentId: started.agentId,
          events,
          first,
          renderer,
          reading,
          asker,
          status: (line) => status(line),
          via: "troupe run",
          seen: () => {
            reconnecting = false;
          },
        },
        log,
      );
    } finally {
      process.off("SIGINT", onSigint);
      renderer.close();
      reading.abort();
      await events.return?.();
    }
    sayHowToGoOn(runId, output?.reason ?? "aborted", flags.json);
    return output ? RUN_EXIT[output.reason] : RUN_EXIT.aborted;
  } finally {
    reading.abort();
    await bus.close();
  }
}

export class DaemonUnreachableError extends UnreachableError {
  override name = "DaemonUnreachableError";
}

/**
 * Asks the daemon to start the run, and asks again while no daemon answers (one restarting, NATS
 * away) until `deadline`. The run's id is chosen here, so asking again is safe: a daemon that took
 * an earlier ask says the run exists, and this client follows it. The daemon says so only when that
 * run was started with this same request; a run under the id that asked anything else is refused.
 */
export async function submit(
  bus: Awaited<ReturnType<typeof connectClient>>,
  config: LoadedConfig,
  deadline: number,
  request: ApiRequest<"runs.start"> & { runId: string },
): Promise<{ runId: string; agentId: string }> {
  let told = false;
  for (;;) {
    try {
      return (await callApi(bus, config, "runs.start", request)) as { runId: string; agentId: string };
    } catch (error) {
      if (error instanceof RemoteError && error.message.includes(`run ${request.runId} exists`)) {
        const record = (await callApi(bus, config, "runs.get", { runId: request.runId })) as {
          agentId: string;
        };
        return { runId: request.runId, agentId: record.agentId };
      }
      const away = error instanceof NoDaemonError || error instanceof RequestTimeoutError;
      if (!away) throw error;
      if (Date.now() >= deadline) throw new DaemonUnreachableError(error.message, { cause: error });
      if (!told) {
        told = true;
        const { url, prefix } = config.troupe.nats;
        const left = Math.round((deadline - Date.now()) / 1000);
        process.stderr.write(
          `troupe: no daemon answers on ${url} (prefix ${prefix}); waiting up to ${left} s (start one with "troupe daemon", or run with --local)\n`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

/**
 * The run id of an idempotency key: the key itself when it is a run id, else a run id made from its
 * hash (and the prefix, so two Troupes on one server do not share it). The same key, the same run.
 */
export function runIdFor(key: string, prefix: string): string {
  if (/^run-[0-9a-z]{26}$/.test(key)) return key;
  const digest = createHash("sha256").update(`${prefix}\0${key}`).digest();
  const alphabet = "0123456789abcdefghjkmnpqrstvwxyz";
  let id = "";
  for (let i = 0; i < 26; i++) id += alphabet[(digest[i] ?? 0) % 32];
  return `run-${id}`;
}
