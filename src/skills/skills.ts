import { readdirSync, realpathSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { parse } from "yaml";
import { z } from "zod";
import type { Logger } from "../log.js";
import { type Note, type NoteRefusal, readNoteSync, skippedNote } from "../safety/note-read.js";
import { isInside, realPathOrUndefined } from "../util/paths.js";
import { SKILL_PATH_PREFIX, skillFiles } from "./skill-files.js";
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
  /** How its files are read: inside what real path, and whether hard-linked ones are. */
  reading: { within?: string | undefined; readHardLinks?: boolean | undefined };
}

/**
 * Where skills are found. `preApprove: false` ignores their `allowed-tools` (a workspace's own
 * skills); `within`: the real path their files must be inside (the workspace), read as project
 * notes; `readHardLinks`: a SKILL.md with other hard links is read (the config's own skills).
 */
export type SkillDir =
  | string
  | { dir: string; preApprove: boolean; within?: string | undefined; readHardLinks?: boolean | undefined };

/** SKILL.md bytes read at most; the rest of a longer one is left out. */
const MAX_SKILL_BYTES = 256 * 1024;

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

/** `findSkills`' skills alone. */
export function discoverSkills(dirs: readonly SkillDir[], log?: Logger): Map<string, Skill> {
  return findSkills(dirs, log).skills;
}

/**
 * Skills in the Agent Skills layout: `<dir>/<skill>/SKILL.md` (or `<dir>/<skill>.md`), each with YAML
 * frontmatter (`name`, `description`, optional `allowed-tools`) and a body. Later dirs override
 * earlier ones by name, so a workspace's `.troupe/skills` can replace a shipped skill. A file without
 * valid frontmatter is skipped with a warning; one that is not a regular file of its dir (a
 * symbolic link, a FIFO, a hard link, a file outside `within`) is skipped with a line in `skipped`
 * for the prompt.
 */
export function findSkills(
  dirs: readonly SkillDir[],
  log?: Logger,
): { skills: Map<string, Skill>; skipped: string[] } {
  const skills = new Map<string, Skill>();
  const skipped: string[] = [];
  for (const given of dirs) {
    const { dir, preApprove, ...reading } =
      typeof given === "string" ? { dir: given, preApprove: true, readHardLinks: true } : given;
    if (!isDirectory(dir)) continue;
    // A workspace's skills dir that leads out of it (a link) is not listed: the names of what is
    // there would reach the model, though not one of its files would be read.
    if (
      reading.within &&
      !isInside(realPathOrUndefined(reading.within) ?? reading.within, realpathSync(dir))
    ) {
      const line = `${relative(reading.within, dir) || dir} skipped: it leads outside the workspace (a link); skills are read only from inside it`;
      log?.warn({ dir }, line);
      skipped.push(line);
      continue;
    }
    for (const entry of readdirSync(dir).sort()) {
      const full = join(dir, entry);
      const isDir = isDirectory(full);
      const path = isDir ? join(full, "SKILL.md") : entry.endsWith(".md") ? full : undefined;
      if (!path) continue;
      const skill = readSkill(path, reading);
      if (skill === undefined) continue;
      if (typeof skill === "string") {
        log?.warn({ path, problem: skill }, "skipped a skill");
        continue;
      }
      if ("refused" in skill) {
        const name = reading.within ? relative(reading.within, path) || path : path;
        const line = skippedNote(name, skill);
        log?.warn({ path }, line);
        skipped.push(line);
        continue;
      }
      if (!preApprove && skill.allowedTools.length > 0) {
        log?.warn(
          { path, allowedTools: skill.allowedTools },
          "ignored allowed-tools of a workspace skill: only skills in the config's skills dir pre-approve tools",
        );
        skill.allowedTools = [];
      }
      skills.set(skill.name, isDir ? { ...skill, dir: realpathSync(full) } : skill);
    }
  }
  return { skills, skipped };
}

/** The body of a skill (the text after its frontmatter). */
export function skillBody(skill: Skill): string {
  // Where it was found: a directory on the way swapped for a link since (a command can do that in a
  // workspace) leads elsewhere, and is refused; so is a SKILL.md swapped for a link or a FIFO.
  const note = readNoteSync(skill.path, {
    within: skill.reading.within ?? dirname(skill.path),
    readHardLinks: skill.reading.readHardLinks,
    cap: MAX_SKILL_BYTES,
  });
  if ("refused" in note) return "";
  return splitFrontmatter(noteText(note))?.body.trim() ?? "";
}

/**
 * What a system prompt says of skills at most: skills listed, characters of a name and of a
 * description, lines on skills skipped. A workspace's skills are an agent's to write: 10,000 of them, or a description of a
 * megabyte, would otherwise fill every later prompt.
 */
export const CATALOGUE_LIMITS = { skills: 100, name: 64, description: 200, skipped: 20 };

/** The catalogue for a system prompt: names and descriptions only, within `CATALOGUE_LIMITS`. */
export function skillCatalogue(skills: Iterable<Skill>): string | undefined {
  const all = [...skills];
  if (all.length === 0) return undefined;
  const cut = (text: string, most: number) => (text.length > most ? `${text.slice(0, most - 1)}…` : text);
  const { skills: most, name, description } = CATALOGUE_LIMITS;
  const lines = all
    .slice(0, most)
    .map((skill) => `- ${cut(skill.name, name)}: ${cut(skill.description, description)}`);
  if (all.length > most) lines.push(`(and ${all.length - most} more skills, not listed)`);
  return `Skills you can load with the load_skill tool when a task calls for one (only their descriptions are shown here):\n${lines.join("\n")}`;
}

/** The lines on skills that were skipped, at most `CATALOGUE_LIMITS.skipped` and one saying how many more. */
export function skippedLines(skipped: readonly string[]): string[] {
  const most = CATALOGUE_LIMITS.skipped;
  return skipped.length > most
    ? [...skipped.slice(0, most), `(and ${skipped.length - most} more skills skipped)`]
    : [...skipped];
}

/** The skill at `path`; undefined when there is none; why it is skipped. */
function readSkill(path: string, reading: Skill["reading"]): Skill | NoteRefusal | string | undefined {
  const note = readNoteSync(path, { ...reading, cap: MAX_SKILL_BYTES });
  if ("refused" in note) return note.refused === "missing" ? undefined : note;
  const parts = splitFrontmatter(noteText(note));
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
  // Its real path: its name is not a link (refused above), so this is its directory's real path.
  return { name, description, path: realpathSync(path), allowedTools, reading };
}

function noteText(note: Note): string {
  const text = note.bytes.toString("utf8");
  return note.cut ? `${text}\n[SKILL.md is longer; the rest was left out]` : text;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
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
    score,
    files: files.length,
    allowedTools: skill.allowedTools,
  };
}

/** The `skill.loaded` event for a loaded skill (its body stays out of the log). */
export function skillLoaded(skill: LoadedSkill, preApproved: readonly string[] = []) {
  return {
    name: skill.name,
    by: skill.by,
    score: skill.score,
    files: skill.files,
    ...(preApproved.length > 0 ? { preApproved: [...preApproved] } : {}),
  };
}

/** The first task of a run that loaded a skill: the skill's instructions, then the task. */
export function withSkill(skill: LoadedSkill, task: string): string {
  return `Follow this skill (${skill.name}) for the task below.\n\n${skill.body}\n\nTask: ${task}`;
}
