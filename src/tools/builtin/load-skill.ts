import { z } from "zod";
import { builtin } from "../../config/tool-catalog.js";
import { loadSkill, type Skill } from "../../skills/skills.js";
import { didYouMean } from "../../util/did-you-mean.js";
import { defineTool, type Tool, toolError } from "../tool.js";

/**
 * Brings a skill's body into the conversation when the model asks, followed by the list of its other
 * files (read with read_file as `skill:NAME/PATH`); only skills this agent may see. The host is told
 * (`context.skillLoaded`): it publishes `skill.loaded` and grants the skill's `allowed-tools`.
 */
export function loadSkillTool(skills: ReadonlyMap<string, Skill>): Tool {
  return defineTool({
    ...builtin("load_skill"),
    description: "Load the full instructions of a skill listed in your system prompt.",
    parameters: z.object({ name: z.string().min(1) }),
    execute({ name }, { skills: allowed, skillLoaded }) {
      const visible = [...skills.keys()].filter((skill) => allowed === undefined || allowed.includes(skill));
      const skill = visible.includes(name) ? skills.get(name) : undefined;
      if (!skill) {
        return toolError(
          `no skill "${name}"${didYouMean(name, visible)}`,
          `load one of: ${visible.join(", ") || "(none)"}`,
        );
      }
      const loaded = loadSkill(skill, "model");
      skillLoaded?.(loaded);
      return { ok: true, output: loaded.body, summary: `skill ${name}` };
    },
  }) as Tool;
}
