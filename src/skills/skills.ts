import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { parse } from "yaml";
import { z } from "zod";
import type { Logger } from "../log.js";
import { isRefusal, readConfinedSync } from "../safety/confined-read.js";
import { skillFiles } from "./skill-files.js";
import { SKILL_PATH_PREFIX } from "./skill-path.js";
import type { LoadedSkill } from "./skill-types.js";

export type { LoadedSkill };

export interface Skill {
  name: string;
  description: string;
  /** The SKILL.md file: its real path when it was found, read there (in its real dir) or not at all. */
  path: string;
  /**
   * The skill's own directory (`<dir>/<skill>/SKILL.md`), whose other files it may disclose; none for
   * `<dir>/<skill>.md`. Its real path when it was found: a link on the way to it that changes later
   * (a command can swap a workspace directory for a link out of it) does not move the skill.
   */
  dir?: string;
  /**
   * `allowed-tools` of its frontmatter: tools pre-approved while the skill is loaded (the Agent Skills
   * format's experimental field). Empty for a skill from a dir that may not pre-approve (the workspace's).
   */
  allowedTools: string[];
}

/** Where skills are found; `preApprove: false` ignores their `allowed-tools` (a workspace's own skills). */
export type SkillDir = string | { dir: string; preApprove: boolean };

const frontmatterSchema = z.object({
  name: z.string().regex(/^[a-z0-9][a-z0-9_-]*$/),
  description: z.string().min(1),
  // A space-delimited string or a list of strings, as the format allows.
  "allowed-tools": z
    .union([z.string(), z.array(z.string())])
    .optional()
    .transform((tools) =>
      (typeof tools === "string" ? tools.split(/\s+/) : (tools ?? [])).map((t) => t.trim()).filter(Boolean),
    ),
});

/**
 * Skills in the Agent Skills layout: `<dir>/<skill>/SKILL.md` (or `<dir>/<skill>.md`), each with YAML
 * frontmatter (`name`, `description`, optional `allowed-tools`) and a body. Later dirs override
 * earlier ones by name, so a workspace's `.troupe/skills` can replace a shipped skill. A file without
 * valid frontmatter is skipped with a warning.
 */
export function discoverSkills(dirs: readonly SkillDir[], log?: Logger): Map<string, Skill> {
  const skills = new Map<string, Skill>();
  for (const given of dirs) {
    const { dir, preApprove } = typeof given === "string" ? { dir: given, preApprove: true } : given;
    if (!existsSync(dir) || !statSync(dir).isDirectory()) continue;
    for (const entry of readdirSync(dir).sort()) {
      const full = join(dir, entry);
      const isDir = statSync(full).isDirectory();
      const path = isDir ? join(full, "SKILL.md") : entry.endsWith(".md") ? full : undefined;
      if (!path || !existsSync(path)) continue;
      const skill = readSkill(path);
      if (typeof skill === "string") {
        log?.warn({ path, problem: skill }, "skipped a skill");
        continue;
      }
      if (!preApprove && skill.allowedTools.length > 0) {
        log?.warn(
          { path, allowedTools: skill.allowedTools },
          "ignored allowed-tools of a workspace skill: only skills in the config's skills dir pre-approve tools",
        );
        skill.allowedTools = [];
      }
      const found = { ...skill, path: realpathSync(path) };
      skills.set(skill.name, isDir ? { ...found, dir: realpathSync(full) } : found);
    }
  }
  return skills;
}

/** The body of a skill (the text after its frontmatter). */
export function skillBody(skill: Skill): string {
  // Where it was found: a directory on the way swapped for a link since (a command can do that in a
  // workspace) leads elsewhere, and is refused. A SKILL.md with other hard links was read when found.
  const text = readConfinedSync(dirname(skill.path), skill.path, { readHardLinks: true });
  if (isRefusal(text)) return "";
  return splitFrontmatter(text.toString("utf8"))?.body.trim() ?? "";
}

/** The catalogue for a system prompt: names and descriptions only. */
export function skillCatalogue(skills: Iterable<Skill>): string | undefined {
  const lines = [...skills].map((skill) => `- ${skill.name}: ${skill.description}`);
  if (lines.length === 0) return undefined;
  return `Skills you can load with the load_skill tool when a task calls for one (only their descriptions are shown here):\n${lines.join("\n")}`;
}

function readSkill(path: string): Skill | string {
  const parts = splitFrontmatter(readFileSync(path, "utf8"));
  if (!parts) return "no frontmatter (--- name: … description: … ---)";
  let data: unknown;
  try {
    data = parse(parts.frontmatter);
  } catch {
    // Skill files are often written by hand as `key: value` lines, colons in the value and all.
    data = Object.fromEntries(
      parts.frontmatter
        .split(/\r?\n/)
        .map((line) => /^(\w+):\s*(.*)$/.exec(line))
        .filter((match): match is RegExpExecArray => match !== null)
        .map((match) => [match[1], match[2]?.trim()]),
    );
  }
  const parsed = frontmatterSchema.safeParse(data);
  if (!parsed.success)
    return `frontmatter needs a lowercase name and a description: ${parsed.error.issues[0]?.message}`;
  const { name, description, "allowed-tools": allowedTools } = parsed.data;
  return { name, description, path, allowedTools };
}

function splitFrontmatter(text: string): { frontmatter: string; body: string } | undefined {
  const match = /^---\r?\n([\s\S]*?)\r?\n---\r?\n?([\s\S]*)$/.exec(text);
  return match ? { frontmatter: match[1] ?? "", body: match[2] ?? "" } : undefined;
}

const STOPWORDS = new Set([
  "the",
  "and",
  "for",
  "with",
  "that",
  "this",
  "from",
  "into",
  "your",
  "you",
  "are",
  "how",
  "what",
  "when",
  "use",
  "using",
  "about",
  "its",
  "not",
  "can",
  "all",
]);

function words(text: string): Set<string> {
  return new Set(
    (text.toLowerCase().match(/[a-z0-9]+/g) ?? []).filter((word) => word.length >= 3 && !STOPWORDS.has(word)),
  );
}

/**
 * The skill whose description best matches a task: the share of the description's words the task
 * contains, when it reaches `threshold`.
 */
export function matchSkill<S extends Pick<Skill, "description">>(
  task: string,
  skills: Iterable<S>,
  threshold: number,
): { skill: S; score: number } | undefined {
  const wanted = words(task);
  let best: { skill: S; score: number } | undefined;
  for (const skill of skills) {
    const described = words(skill.description);
    if (described.size === 0) continue;
    let shared = 0;
    for (const word of described) if (wanted.has(word)) shared++;
    const score = shared / described.size;
    if (score >= threshold && (!best || score > best.score)) best = { skill, score };
  }
  return best;
}

/** `/skill:NAME rest of the task` → the skill name and the task without it. */
export function skillCommand(task: string): { name: string; task: string } | undefined {
  const match = /^\/skill:([a-z0-9][a-z0-9_-]*)\s*([\s\S]*)$/.exec(task.trim());
  return match ? { name: match[1] as string, task: (match[2] ?? "").trim() } : undefined;
}

/** The skill loaded: its body followed by its files, each readable as `skill:NAME/PATH`. */
export function loadSkill(skill: Skill, by: LoadedSkill["by"], score?: number): LoadedSkill {
  const files = skillFiles(skill);
  const listing = files.map((file) => `- ${SKILL_PATH_PREFIX}${skill.name}/${file}`);
  const body = [
    skillBody(skill),
    ...(files.length > 0
      ? [`Files of this skill (read one with read_file and the path as shown):\n${listing.join("\n")}`]
      : []),
  ].join("\n\n");
  return {
    name: skill.name,
    body,
    by,
    ...(score !== undefined ? { score } : {}),
    files: files.length,
    allowedTools: skill.allowedTools,
  };
}

/** The `skill.loaded` event for a loaded skill (its body stays out of the log). */
export function skillLoaded(skill: LoadedSkill, preApproved: readonly string[] = []) {
  return {
    name: skill.name,
    by: skill.by,
    ...(skill.score !== undefined ? { score: skill.score } : {}),
    files: skill.files,
    ...(preApproved.length > 0 ? { preApproved: [...preApproved] } : {}),
  };
}

/** The first task of a run that loaded a skill: the skill's instructions, then the task. */
export function withSkill(skill: LoadedSkill, task: string): string {
  return `Follow this skill (${skill.name}) for the task below.\n\n${skill.body}\n\nTask: ${task}`;
}
