import { UserError } from "../errors.js";
import { countTextTokens } from "../model/tokens.js";

/** A task the agent's model could not take in at all: refused before anything starts. */
export class TaskTooLargeError extends UserError {
  override name = "TaskTooLargeError";
}

/**
 * A task that by itself fills more than half the model's window leaves no room to work: refused
 * with its size and the window, rather than compacted upward and then summarised away.
 */
export function assertTaskFits(task: string, model: { id: string; contextWindow: number }): void {
  // Counting is costly for a long text; one of fewer characters than that has fewer tokens.
  if (task.length <= model.contextWindow / 2) return;
  const tokens = countTextTokens(task);
  if (tokens > model.contextWindow / 2)
    throw new TaskTooLargeError(
      `the task is ${tokens} tokens and ${model.id} takes ${model.contextWindow} in all: put the text in a file in the workspace and name the file in the task`,
    );
}
