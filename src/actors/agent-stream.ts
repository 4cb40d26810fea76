import { type Bus, RequestRefusedError, type Subscription } from "../bus/bus.js";
import { WORKER_MARK } from "../bus/subjects.js";
import { type AgentEvent, isAgentEvent } from "../events/agent-events.js";
import { type Envelope, makeEnvelope } from "../events/envelope.js";
import { MAX_TEXT } from "../limits.js";
import type { AgentCommand } from "../machines/agent-types.js";

/** The run's events from its start, ending with this agent's `agent.stopped`; types this build does not know are left out. */
export async function* eventsUntilStopped(
  bus: Bus,
  runId: string,
  agentId: string,
): AsyncIterable<AgentEvent> {
  for await (const { envelope } of bus.eventLog.read({ runId, follow: true })) {
    if (isAgentEvent(envelope)) yield envelope;
    if (envelope.type === "agent.stopped" && envelope.agentId === agentId) return;
  }
}

/** What the system prompt of an agent in plan mode adds. */
export const PLAN_NOTE =
  "You are in plan mode: investigate with the read tools you have and answer with a plan (the steps, the files to change, the risks, how to check the result). Do not try to change anything: write and execute tools are not available in plan mode.";

/**
 * Answers the commands sent to the agents hosted here, on `<p>.ctl.<runId>.<agentId>.<command>`
 * (abort, steer, followUp): one subscription for all of them, made when the first is hosted. A
 * worker's (marked, `WORKER_MARK`: a subagent it hosts aborting its own) is an abort of a subagent
 * or nothing: a worker's seed neither steers nor stops a run's first agent. A
 * command to an agent hosted elsewhere gets no answer from here, so its own host answers it. A
 * subscription per agent cost two writes to the server per agent and an interest on the server for
 * each one waiting.
 */
export class AgentControls {
  readonly #agents = new Map<string, { send: (command: AgentCommand) => void; first: boolean }>();
  #subscription: Subscription | undefined;

  constructor(private readonly bus: Bus) {}

  /**
   * Routes one agent's commands to `send` until the returned subscription is ended. `first`: the
   * run's first agent (no parent), which takes no command from a worker.
   */
  serve(runId: string, agentId: string, send: (command: AgentCommand) => void, first: boolean): Subscription {
    this.#subscription ??= this.bus.reply(this.bus.subjects.allControls(), (request, subject) =>
      this.#answer(request, subject),
    );
    const key = `${runId}.${agentId}`;
    const served = { send, first };
    this.#agents.set(key, served);
    return {
      unsubscribe: () => {
        if (this.#agents.get(key) === served) this.#agents.delete(key);
      },
    };
  }

  close(): void {
    this.#subscription?.unsubscribe();
    this.#subscription = undefined;
  }

  #answer(request: Envelope, subject: string): Envelope | undefined {
    const byWorker = subject.endsWith(`.${WORKER_MARK}`);
    const [runId = "", agentId = "", command] = subject.split(".").slice(byWorker ? -4 : -3);
    const served = this.#agents.get(`${runId}.${agentId}`);
    if (!served) return undefined;
    const { send } = served;
    if (byWorker && (command !== "abort" || served.first))
      throw new RequestRefusedError(`${command}: a worker may abort a subagent, and do nothing else`);
    const data = (request.data ?? {}) as { text?: unknown; reason?: unknown };
    // Whoever may publish here (a host) is held to what the API holds a client to.
    if (String(data.text ?? "").length > MAX_TEXT || String(data.reason ?? "").length > MAX_TEXT)
      throw new RequestRefusedError(`${command}: at most ${MAX_TEXT} characters`);
    if (command === "abort") send({ type: "ABORT", reason: String(data.reason ?? "") });
    else if (command === "steer") send({ type: "STEER", text: String(data.text ?? "") });
    else if (command === "followUp") send({ type: "FOLLOW_UP", text: String(data.text ?? "") });
    else throw new Error(`unknown command "${command}"`);
    return makeEnvelope({ runId, agentId, seq: 0, type: "ack", data: { command } });
  }
}
