import { type LoadedSkill, skillLoaded } from "./skills.js";

/**
 * The skills one agent has loaded, and the tools their `allowed-tools` pre-approve from then until the
 * agent stops (a resumed agent starts with none: it asks again). A pre-approval only spares the
 * asking: it gives no tool the agent lacks, never leaves the sandbox, and denies stay denies (see
 * `planCalls`).
 */
export class ActiveSkills {
  readonly #granted = new Map<string, string>();

  constructor(
    /** Whether the agent has this tool now. */
    private readonly has: (tool: string) => boolean,
    /** Publishes the `skill.loaded` event. */
    private readonly report: (data: ReturnType<typeof skillLoaded>) => void,
  ) {}

  loaded(skill: LoadedSkill): void {
    const granted = skill.allowedTools.filter((tool) => this.has(tool));
    for (const tool of granted) if (!this.#granted.has(tool)) this.#granted.set(tool, skill.name);
    this.report(skillLoaded(skill, granted));
  }

  /** The skill that pre-approved this tool, if one did. */
  readonly preApproved = (tool: string): string | undefined => this.#granted.get(tool);
}
