import { ulid } from "../util/ulid.js";

/** A run's id: `run-` and a ULID, so that ids sort by when they were made. */
export function newRunId(): string {
  return `run-${ulid().toLowerCase()}`;
}

/** An agent's id: its name and a random suffix. */
export function newAgentId(name: string): string {
  return `${name}-${ulid().slice(-8).toLowerCase()}`;
}
