import { TroupeError, UserError } from "../errors.js";

/** Model faults the loop tells apart. Each keeps the underlying error as `cause`. */
export class ModelError extends TroupeError {
  override name = "ModelError";
  constructor(
    message: string,
    readonly model: string,
    options?: ErrorOptions & { status?: number },
  ) {
    super(message, options);
    this.status = options?.status;
  }
  readonly status: number | undefined;
}

/** The prompt is over the model's context window: compact and try again. */
export class ContextLengthExceededError extends ModelError {
  override name = "ContextLengthExceededError";
}

/** The circuit of this model is open: it failed too often just now. */
export class CircuitOpenError extends ModelError {
  override name = "CircuitOpenError";
}

/**
 * The stream broke after the answer had begun (text, reasoning or a tool call): not retried, since a
 * retry would repeat what was shown, and a server whose script moved on would lose the answer.
 */
export class PartialOutputError extends ModelError {
  override name = "PartialOutputError";
}

/**
 * A reply streamed more than its provider's `maxReplyChars`: the call was stopped there, and is not
 * asked again nor of the next model, as what streamed was shown.
 */
export class ReplyTooLongError extends ModelError {
  override name = "ReplyTooLongError";
}

/** No API key and no local server: says in one line what to set. */
export class ModelNotConfiguredError extends UserError {
  override name = "ModelNotConfiguredError";
}
