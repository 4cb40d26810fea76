/* The skill a run starts with: the one it names, else (with `skills.autoMatch`) the best match for its task. */
import type { AgentDefinition } from "../config/agent-schema.js";
import type { TroupeConfig } from "../config/schema.js";
import { loadSkill, matchSkill, type Skill, skillCommand } from "../skills/skills.js";
import { didYouMean } from "../util/did-you-mean.js";
import type { StartAgentOptions } from "./agent-deps.js";
import { UnknownSkillError } from "./runtime-errors.js";
import type { RunOptions } from "./runtime-options.js";

/**
 * The skill a run starts with: named with `skill` or a task starting `/skill:NAME`, else (with
 * `skills.autoMatch`) the one whose description best matches the task. Only skills the agent may see.
 */
export function skillFor(
  definition: AgentDefinition,
  options: Pick<RunOptions, "task" | "skill">,
  skills: ReadonlyMap<string, Skill>,
  settings: TroupeConfig["skills"],
): { task: string; skill?: NonNullable<StartAgentOptions["skill"]> } {
  const command = skillCommand(options.task);
  const task = command ? command.task : options.task;
  const name = options.skill ?? command?.name;
  const visible = [...skills.values()].filter(
    (skill) => !definition.skills || definition.skills.includes(skill.name),
  );
  if (name) {
    const found = visible.find((skill) => skill.name === name);
    if (!found) {
      const names = visible.map((skill) => skill.name);
      throw new UnknownSkillError(
        `unknown skill "${name}"${didYouMean(name, names)}; ${definition.name} can load ${names.join(", ") || "none"}`,
      );
    }
    return { task, skill: loadSkill(found, "user") };
  }
  const match = settings.autoMatch ? matchSkill(task, visible, settings.threshold) : undefined;
  if (!match) return { task };
  return { task, skill: loadSkill(match.skill, "match", Math.round(match.score * 100) / 100) };
}
