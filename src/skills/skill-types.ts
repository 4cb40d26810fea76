/**
 * A skill as it was loaded: by the user's `/name`, by matching the task, or by the model's load_skill.
 * `body` is what the agent reads: the instructions, then the list of the skill's other files.
 */
export interface LoadedSkill {
  name: string;
  body: string;
  by: "user" | "match" | "model";
  score?: number;
  /** How many other files the skill discloses. */
  files: number;
  /** Its `allowed-tools`. */
  allowedTools: string[];
}
