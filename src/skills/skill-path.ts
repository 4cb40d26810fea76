/** How a read tool names a skill's own file: `skill:NAME/PATH`, PATH relative to the skill's dir. */
export const SKILL_PATH_PREFIX = "skill:";

export function isSkillPath(path: string): boolean {
  return path.startsWith(SKILL_PATH_PREFIX);
}
