import { join } from "node:path";
import type { AgentHandle } from "../actors/agent-deps.js";
import type { RuntimeOptions } from "../actors/runtime-options.js";
import { denyingApprover } from "../approvals/approver.js";
import { FileStore } from "../bus/file-store.js";
import { LocalBus } from "../bus/local-bus.js";
import { openRuntime } from "../compose/runtime.js";
import { processTelemetry } from "../compose/telemetry.js";
import type { LoadedConfig } from "../config/load.js";
import { dataDir } from "../config/paths.js";
import type { ApprovalPolicy } from "../config/policy-schemas.js";
import { isEvent } from "../events/agent-events.js";
import type { Logger } from "../log.js";
import type { AgentOutput } from "../machines/agent-types.js";
import type { SandboxMode } from "../sandbox/plan.js";
import { projectRules } from "./project-rules.js";
import { humanRenderer, jsonRenderer } from "./render.js";
import { ttyApprover } from "./tty-approver.js";

export interface RunFlags {
  local?: boolean;
  agent?: string;
  workspace?: string;
  approval?: ApprovalPolicy;
  mode?: "act" | "plan";
  sandbox?: SandboxMode;
  skill?: string;
  json?: boolean;
  /** Seconds to wait for NATS and a daemon to take the run (`--wait-daemon`). */
  waitDaemon?: string;
  /** An idempotency key: the same key submitted again follows the run it made (`--id`). */
  id?: string;
  /** Leave the run to the daemon once it has taken it (`--detach`). */
  detach?: boolean;
}

/**
 * On a person's terminal, after a run stopped short of done: its id and how to go on, so nobody has
 * to find the id in the scrollback. Nothing for a script (--json, or stderr not a terminal).
 */
export function sayHowToGoOn(runId: string, reason: AgentOutput["reason"], json: boolean | undefined): void {
  if (json || !process.stderr.isTTY || reason === "done") return;
  process.stderr.write(
    `troupe: run ${runId} stopped (${reason}): troupe resume ${runId} goes on from there\n`,
  );
}

/** Exit codes of `troupe run`, by why the agent stopped. */
export const RUN_EXIT: Record<AgentOutput["reason"], number> = {
  done: 0,
  refused: 5,
  failed: 1,
  budget_exhausted: 3,
  loop_detected: 3,
  output_invalid: 1,
  aborted: 130,
};

/**
 * Runs one task on one agent in this process and shows it as it happens; returns the exit code.
 * Ctrl-C aborts the run (a second one leaves at once).
 */
export async function runTask(
  config: LoadedConfig,
  task: string,
  flags: RunFlags,
  log: Logger,
  extra: Partial<RuntimeOptions> = {},
): Promise<number> {
  const interactive = process.stdin.isTTY === true && process.stderr.isTTY === true;
  const displayed = new Signals();
  // A local run keeps its event log and snapshots in the data dir: `troupe runs`, `resume`, `replay`.
  const bus = extra.bus ?? localBus(config, log);
  const telemetry = extra.telemetry ?? (await processTelemetry(config, "local", log));
  const runtime = await openRuntime(
    {
      config,
      log,
      bus,
      ...(telemetry ? { telemetry } : {}),
      ...(flags.workspace ? { workspace: flags.workspace } : {}),
      approver: interactive
        ? ttyApprover((callId) => displayed.wait(callId), process.stdin, process.stderr, projectRules(config))
        : denyingApprover(
            "no terminal to ask for approval: run from a terminal, or choose a looser --approval policy",
          ),
      ...extra,
    },
    // The agent and its model are checked before any MCP server starts.
    (made) => made.assertReady(made.agent(flags.agent)),
  );
  const definition = runtime.agent(flags.agent);

  let handle: AgentHandle | undefined;
  const renderer = flags.json ? jsonRenderer() : humanRenderer(() => handle?.agentId);
  let interrupts = 0;
  const onSigint = () => {
    interrupts++;
    if (interrupts > 1) process.exit(RUN_EXIT.aborted);
    process.stderr.write("\naborting… (Ctrl-C again to leave at once)\n");
    handle?.abort("interrupted by the user");
  };
  process.on("SIGINT", onSigint);
  try {
    handle = runtime.start({
      task,
      agent: definition.name,
      approval: flags.approval,
      mode: flags.mode,
      sandbox: flags.sandbox,
      ...(flags.skill ? { skill: flags.skill } : {}),
      // A run started inside a traced job (TRACEPARENT, as CI tools set it) is a part of its trace.
      ...(telemetry && process.env.TRACEPARENT ? { traceparent: process.env.TRACEPARENT } : {}),
    });
    const reading = new AbortController();
    const shown = (async () => {
      for await (const event of runtime.bus.eventLog.read({
        runId: handle.runId,
        follow: true,
        signal: reading.signal,
      })) {
        renderer.event(event);
        if (isEvent(event.envelope, "approval.requested")) displayed.fire(event.envelope.data.callId);
        if (event.envelope.type === "agent.stopped" && event.envelope.agentId === handle.agentId) break;
      }
    })();
    const output = await handle.done;
    await Promise.race([shown, new Promise((resolve) => setTimeout(resolve, 2000))]);
    reading.abort();
    renderer.close();
    sayHowToGoOn(handle.runId, output.reason, flags.json);
    return RUN_EXIT[output.reason];
  } finally {
    renderer.close();
    process.off("SIGINT", onSigint);
    await runtime.close();
    if (!extra.telemetry) await telemetry?.shutdown();
    if (!extra.bus) await bus.close();
  }
}

/** One-shot signals by key: `wait` resolves once `fire` was called for the key, before or after. */
export class Signals {
  #fired = new Set<string>();
  #waiting = new Map<string, () => void>();

  fire(key: string): void {
    this.#fired.add(key);
    this.#waiting.get(key)?.();
  }

  wait(key: string): Promise<void> {
    if (this.#fired.has(key)) return Promise.resolve();
    return new Promise((resolve) => this.#waiting.set(key, resolve));
  }
}

/** The in-process bus of local runs, kept on disk under `<data dir>/local/<prefix>`. */
export function localBus(config: LoadedConfig, log: Logger): LocalBus {
  const prefix = config.troupe.nats.prefix;
  return new LocalBus({
    prefix,
    log,
    store: new FileStore(join(dataDir(config.troupe.dataDir), "local", prefix)),
  });
}
