/**
 * The errors Troupe throws on purpose, in one tree, so a caller can tell them apart by `instanceof`:
 * a `UserError` is the user's to mend (a bad config, an unknown agent, a command called the wrong
 * way) and the CLI says it in one line, exit 2, without a stack trace; anything else is Troupe's or
 * its surroundings' (the bus, the model's provider).
 */
export class TroupeError extends Error {
  override name = "TroupeError";
}

/** A mistake of whoever runs Troupe, said so that they can mend it. */
export class UserError extends TroupeError {
  override name = "UserError";
}

/** Something Troupe waited for and never had (the daemon of a run): the CLI exits 4. */
export class UnreachableError extends TroupeError {
  override name = "UnreachableError";
}
