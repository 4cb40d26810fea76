/* What a runtime refuses: an agent or a skill it does not have, a workspace it may not use, a run before `open()`. */
import { TroupeError, UserError } from "../errors.js";

export class UnknownAgentError extends UserError {
  override name = "UnknownAgentError";
}

export class UnknownModelError extends UserError {
  override name = "UnknownModelError";
}

export class UnknownSkillError extends UserError {
  override name = "UnknownSkillError";
}

export class WorkspaceError extends UserError {
  override name = "WorkspaceError";
}

/** A runtime asked to run something before `open()`. */
export class RuntimeNotOpenError extends TroupeError {
  override name = "RuntimeNotOpenError";
}
