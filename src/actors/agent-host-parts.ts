import type { Approver } from "../approvals/approver.js";
import { decideCall } from "../approvals/decide-call.js";
import { type PermissionRules, permissionRules } from "../approvals/permissions.js";
import type { Envelope } from "../events/envelope.js";
import type { Logger } from "../log.js";
import type { ApprovalDecision } from "../machines/agent-types.js";
import type { ActiveSkills } from "../skills/active-skills.js";
import { planCalls } from "../tools/plan.js";
import type { ToolRegistry } from "../tools/tool.js";
import type { AgentActorsSetup } from "./agent-actors.js";
import type { AgentDeps, StartAgentOptions } from "./agent-deps.js";
import { toolGate } from "./agent-hooks.js";
import type { ResolvedAgentSettings } from "./agent-settings.js";
import type { RecordFacts } from "./agent-snapshots.js";
import { askEach, askOne, type toolView } from "./agent-tools.js";
import type { ApprovalWaits } from "./approval-waits.js";
import { Clearance } from "./clearance.js";
import { elicitorFor, type QuestionSetup } from "./elicitation.js";
import type { EventPublisher } from "./event-publisher.js";
import { type SamplingSetup, samplerFor } from "./sampling.js";

/*
 * The parts an agent's host (`AgentHost`, agent-host.ts) makes from what its process shares, each
 * from the few fields it needs: what clears its calls, its tool-call journal and hooks gate, the
 * facts its record keeps, and the closing of its approval requests when it stops.
 */

/** troupe.yaml's permission rules, parsed once for every agent of a config rather than for each. */
const parsedRules = new WeakMap<object, PermissionRules | undefined>();
function permissionsOf(deps: AgentDeps): PermissionRules | undefined {
  const stated = deps.config.permissions;
  if (!parsedRules.has(stated)) parsedRules.set(stated, permissionRules(stated, "troupe.yaml"));
  return parsedRules.get(stated);
}

/** What clears an agent's calls: the policy plans each batch, a person is asked where it says so. */
export function clearanceOf(
  deps: AgentDeps,
  settings: ResolvedAgentSettings,
  agent: {
    runId: string;
    agentId: string;
    events: EventPublisher;
    registry: ToolRegistry;
    tools: ReturnType<typeof toolView>;
    skills: ActiveSkills;
    waits: ApprovalWaits;
  },
): Clearance {
  const { runId, agentId, events, registry, tools, skills, waits } = agent;
  const permissions = permissionsOf(deps);
  return new Clearance(
    (calls, withTools) =>
      planCalls(calls, registry, withTools ? tools().allowed : new Set(), settings.policy, {
        workspace: deps.workspace,
        readOnlyBecause: settings.readOnlyBecause,
        sandbox: settings.sandbox,
        preApproved: skills.preApproved,
        permissions,
        ...(withTools ? {} : { noToolsBecause: "this turn is for the final answer" }),
      }),
    (calls, signal) => askEach(deps, events, { runId, agentId }, calls, signal, waits),
  );
}

/**
 * How the agent answers an MCP server's sampling requests, by the tool call that runs: decided as a
 * call of `SERVER__sampling` under the agent's policy and the user's permissions, asked as its calls are.
 */
export function samplingOf(
  deps: AgentDeps,
  settings: ResolvedAgentSettings,
  agent: {
    runId: string;
    agentId: string;
    events: EventPublisher;
    skills: ActiveSkills;
    waits: ApprovalWaits;
  } & Pick<SamplingSetup, "charge" | "left">,
): NonNullable<AgentActorsSetup["sampler"]> {
  const { runId, agentId, events, skills, waits } = agent;
  const permissions = permissionsOf(deps);
  const setup: SamplingSetup = {
    models: deps.models,
    chain: settings.chain,
    events,
    decide: (tool, autoApproved) =>
      decideCall(
        { tool, effect: "execute", sandboxed: false },
        {
          policy: settings.policy,
          sandbox: { ...settings.sandbox, readOnly: settings.readOnlyBecause !== undefined },
          autoApproved: () => autoApproved,
          permissions,
          skillAllowed: skills.preApproved,
        },
      ),
    ask: async (call, signal) =>
      (await askEach(deps, events, { runId, agentId }, [call], signal, waits))[0] as ApprovalDecision,
    charge: agent.charge,
    left: agent.left,
  };
  return (call) => samplerFor(setup, call);
}

/**
 * How the agent puts an MCP server's questions to the user, by the tool call that runs: asked as its
 * calls are, whatever its policy, but `never-ask`, which asks nobody.
 */
export function questionsOf(
  deps: AgentDeps,
  settings: ResolvedAgentSettings,
  agent: { runId: string; agentId: string; events: EventPublisher; waits: ApprovalWaits },
): NonNullable<AgentActorsSetup["elicitor"]> {
  const { runId, agentId, events, waits } = agent;
  const setup: QuestionSetup = {
    events,
    ...(settings.policy === "never-ask" ? { unasked: 'the "never-ask" policy asks nobody' } : {}),
    ask: (call, preview, signal) => askOne(deps, events, { runId, agentId }, call, preview, signal, waits),
  };
  return (call) => elicitorFor(setup, call);
}

/**
 * The agent's tool-call journal. A call that writes or executes starts only once the snapshot
 * holding it is stored: a host that dies while it runs comes back to the call (journaled as started:
 * its outcome is unknown), not to the model call before it, which would ask the model again and
 * might run the same thing twice.
 */
export function journalOf(
  deps: AgentDeps,
  runId: string,
  agentId: string,
  restore: StartAgentOptions["restore"],
): { journal?: NonNullable<AgentActorsSetup["journal"]> } {
  const journal = deps.persistence?.journal.forAgent(runId, agentId, {
    fresh: !restore,
    beforeStart: () => deps.persistence?.agents.settled(runId, agentId) ?? Promise.resolve(),
  });
  return journal ? { journal } : {};
}

export function gateOf(
  deps: AgentDeps,
  runId: string,
  agentId: string,
  agent: string,
): { gate: NonNullable<AgentActorsSetup["gate"]> } | undefined {
  const gate = toolGate(deps.commandHooks, deps.agentHooks, { runId, agentId, agent });
  return gate ? { gate } : undefined;
}

/** What the agent's record says of it besides its snapshot: who it is, and the rights it runs with. */
export function recordFacts(
  options: StartAgentOptions,
  settings: ResolvedAgentSettings,
  agentId: string,
): RecordFacts {
  return {
    runId: options.runId,
    agentId,
    ...(options.parentId ? { parentId: options.parentId } : {}),
    name: options.definition.name,
    depth: settings.depth,
    task: options.restore?.task ?? options.task,
    budget: settings.budget,
    mode: settings.mode,
    ...(options.approval ? { approval: options.approval } : {}),
    ...(settings.sandboxMode ? { sandbox: settings.sandboxMode } : {}),
  };
}

/** Requests nobody answered are closed when the agent stops (not when it is let go: another host resumes it). */
export async function closeApprovals(
  approver: Approver,
  log: Logger,
  agent: { runId: string; agentId: string },
  why: string,
): Promise<void> {
  await approver
    .close?.({ runId: agent.runId, agentId: agent.agentId }, why)
    .catch((error: Error) => log.warn({ err: error.message }, "could not close its approvals"));
}

/**
 * A resumed agent's telemetry: its events so far, read back from the log, before what it does here
 * (the spans open when its last host stopped are open again, with the same ids).
 */
export function resumeTelemetry(
  deps: AgentDeps,
  options: StartAgentOptions,
  agentId: string,
  model: string,
): void {
  const telemetry = deps.telemetry;
  if (!telemetry) return;
  const { runId } = options;
  // What this host publishes from now on reaches the telemetry as it is published: the history is
  // what came before (the log, read to its end, may already hold the first of those).
  const before = options.restore?.nextSeq ?? Number.POSITIVE_INFINITY;
  const history = (async () => {
    const events: Envelope[] = [];
    for await (const { envelope } of deps.bus.eventLog.read({ runId }))
      if (envelope.agentId === agentId && envelope.seq < before) events.push(envelope);
    return events;
  })();
  telemetry.resuming({ runId, agentId, name: options.definition.name, model }, history);
}
