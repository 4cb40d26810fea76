import type { Logger } from "../log.js";
import type { ActiveSkills } from "../skills/active-skills.js";
import { withSkill } from "../skills/skills.js";
import { parseTraceparent } from "../telemetry/span-ids.js";
import type { StartAgentOptions } from "./agent-deps.js";
import type { ResolvedAgentSettings } from "./agent-settings.js";
import type { AgentActor } from "./agent-snapshots.js";
import type { EventPublisher } from "./event-publisher.js";
import { REBUILT_NOTE } from "./log-history.js";

/**
 * Starts the actor: a new agent announces itself and takes its task (after the skill it starts
 * with); a resumed one goes on from its state.
 */
export function begin(
  actor: AgentActor,
  options: StartAgentOptions,
  parts: {
    settings: ResolvedAgentSettings;
    events: EventPublisher;
    log: Logger;
    skills: ActiveSkills;
    workspace: string;
  },
): void {
  const { restore, definition } = options;
  const { settings, events, log } = parts;
  if (restore) {
    actor.start();
    const state = String(actor.getSnapshot().value);
    log.info({ state }, "agent resumed from its snapshot");
    // Taken over from a worker that went silent: readers learn the new epoch before anything that
    // worker still sends when its link comes back, and drop that.
    if (options.epoch || options.rebuilt)
      events.emit("agent.resumed", { state, ...(options.rebuilt ? { rebuilt: true as const } : {}) });
    // Rebuilt from the log: it is told so, and goes on.
    if (options.rebuilt) actor.send({ type: "START", task: REBUILT_NOTE });
    // A reopened agent waits in idle: its follow-up is the task it starts again with.
    if (options.followUp !== undefined) actor.send({ type: "START", task: options.followUp });
    // Reopened to compact: it compacts, and stops again.
    else if (options.compact) actor.send({ type: "COMPACT" });
    return;
  }
  events.emit(
    "agent.started",
    {
      name: definition.name,
      model: settings.model.id,
      task: options.task,
      budget: settings.budget,
      depth: settings.depth,
      ...(options.parentId ? { parentId: options.parentId } : {}),
      workspace: parts.workspace,
      ...(settings.sandboxMode ? { sandbox: settings.sandboxMode } : {}),
    },
    // Only a well-formed one goes on the envelope: a reader would drop an envelope with another.
    parseTraceparent(options.traceparent) ? options.traceparent : undefined,
  );
  actor.start();
  if (options.skill) parts.skills.loaded(options.skill);
  actor.send({ type: "START", task: options.skill ? withSkill(options.skill, options.task) : options.task });
}
