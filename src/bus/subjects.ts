import { createHash } from "node:crypto";
import { TroupeError } from "../errors.js";
import { ulid } from "../util/ulid.js";

/**
 * Every subject and JetStream/KV name Troupe uses is built here, from one prefix (default `troupe`).
 * Tokens that come from data (run ids, agent ids, event types) are checked, so a stray `.`, `*`, `>`
 * or space can never widen a subscription or split a subject.
 */

export const DEFAULT_PREFIX = "troupe";

const PREFIX_PATTERN = /^[A-Za-z][A-Za-z0-9_-]{0,31}$/;
const TOKEN_PATTERN = /^[A-Za-z0-9_-]+$/;
/** Event types are dotted words: `state.changed`, `model.delta`. */
const TYPE_PATTERN = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;
/** The most words an event type has that a worker may send: its permissions list each length. */
const MAX_TYPE_WORDS = 4;

/**
 * The last token of an event's subject when a worker sent it: `<p>.evt.<runId>.<agentId>.<type>._w`.
 * A worker's permissions let it send events only so, and no event type ends in it, so a reader knows
 * which events a worker sent and drops those of an agent no worker hosts (the run's first agent,
 * always the daemon's: `EventFilter`).
 */
export const WORKER_MARK = "_w";

export class InvalidSubjectTokenError extends TroupeError {
  override name = "InvalidSubjectTokenError";
}

/** Whether a value may be one token of a subject (a run id, an agent id): letters, digits, `_`, `-`. */
export function isToken(value: string): boolean {
  return TOKEN_PATTERN.test(value);
}

export function assertToken(what: string, value: string): string {
  if (!isToken(value)) {
    throw new InvalidSubjectTokenError(`${what} "${value}" must be letters, digits, "_" or "-"`);
  }
  return value;
}

export function assertEventType(value: string): string {
  if (!TYPE_PATTERN.test(value) || value.endsWith(`.${WORKER_MARK}`) || value === WORKER_MARK) {
    throw new InvalidSubjectTokenError(
      `event type "${value}" must be dotted words of letters, digits, "_" or "-" (the last not "${WORKER_MARK}")`,
    );
  }
  return value;
}

export function assertPrefix(prefix: string): string {
  if (!PREFIX_PATTERN.test(prefix)) {
    throw new InvalidSubjectTokenError(
      `bus prefix "${prefix}" must start with a letter and hold up to 32 letters, digits, "_" or "-"`,
    );
  }
  return prefix;
}

export type ControlCommand = "steer" | "followUp" | "abort";

export interface Subjects {
  readonly prefix: string;
  /** `<p>.evt.<runId>.<agentId>.<type>`: one event of one agent (a worker's marked, `WORKER_MARK`). */
  event(runId: string, agentId: string, type: string): string;
  /** What a worker may send events on: each length of type, marked (`WORKER_MARK`). */
  workerEvents(): string[];
  /** Every event of one agent: `<p>.evt.<runId>.<agentId>.>`. */
  agentEvents(runId: string, agentId: string): string;
  /** Every event of one run (`runId` given) or of all runs. */
  events(runId?: string): string;
  /** `<p>.ctl.<runId>.<agentId>.<command>`: a command to one actor (a worker's abort marked). */
  control(runId: string, agentId: string, command: ControlCommand): string;
  /** What a worker may send commands on: an abort, marked (`WORKER_MARK`). */
  workerAborts(): string;
  /** Every command to every agent, a worker's too: `<p>.ctl.>`. */
  allControls(): string;
  /** `<p>.api.<verb>`: the daemon's API; verbs are dotted (`runs.start`). */
  api(verb: string): string;
  /** `<p>.approval.<runId>.<callId>`: decisions on one pending call. */
  approval(runId: string, callId: string): string;
  /** `<p>.work.spawn`: the queue group of workers. */
  workSpawn(): string;
  /** `<p>.beat.daemon`: the daemon says it is alive, every second; not kept in any stream. */
  daemonBeat(): string;
  /** The JetStream stream that captures `events()`. */
  readonly eventStream: string;
  /** A KV bucket of this prefix: `<p>_<name>`. */
  bucket(name: string): string;
}

/**
 * The subjects of a prefix. `worker`: of a worker's bus, whose events and aborts are marked as its
 * own (`WORKER_MARK`), the only ones its permissions let it send.
 */
export function subjects(prefix = DEFAULT_PREFIX, options: { worker?: boolean } = {}): Subjects {
  const p = assertPrefix(prefix);
  const mark = options.worker ? `.${WORKER_MARK}` : "";
  return {
    prefix: p,
    event: (runId, agentId, type) =>
      `${p}.evt.${assertToken("run id", runId)}.${assertToken("agent id", agentId)}.${assertEventType(type)}${mark}`,
    workerEvents: () =>
      Array.from({ length: MAX_TYPE_WORDS }, (_, n) => `${p}.evt.*.*.${"*.".repeat(n + 1)}${WORKER_MARK}`),
    agentEvents: (runId, agentId) =>
      `${p}.evt.${assertToken("run id", runId)}.${assertToken("agent id", agentId)}.>`,
    events: (runId) => (runId === undefined ? `${p}.evt.>` : `${p}.evt.${assertToken("run id", runId)}.>`),
    control: (runId, agentId, command) =>
      `${p}.ctl.${assertToken("run id", runId)}.${assertToken("agent id", agentId)}.${command}${command === "abort" ? mark : ""}`,
    workerAborts: () => `${p}.ctl.*.*.abort.${WORKER_MARK}`,
    allControls: () => `${p}.ctl.>`,
    api: (verb) => `${p}.api.${assertEventType(verb)}`,
    approval: (runId, callId) =>
      `${p}.approval.${assertToken("run id", runId)}.${assertToken("call id", callId)}`,
    workSpawn: () => `${p}.work.spawn`,
    daemonBeat: () => `${p}.beat.daemon`,
    eventStream: `${p.toUpperCase().replaceAll("-", "_")}_EVENTS`,
    bucket: (name) => `${p}_${assertToken("bucket", name)}`,
  };
}

/**
 * NATS subject matching: `*` matches one token, `>` one or more trailing tokens.
 * LocalBus routes with this, so both buses agree on what a pattern reaches.
 */
export function subjectMatches(pattern: string, subject: string): boolean {
  return subjectMatcher(pattern)(subject);
}

/**
 * `subjectMatches` for one pattern, split once: a subscription asks it of every message, and
 * the subject is walked in place rather than split into an array each time.
 */
export function subjectMatcher(pattern: string): (subject: string) => boolean {
  const tokens = pattern.split(".");
  return (subject) => {
    let at = 0;
    for (const token of tokens) {
      if (at > subject.length) return false; // the subject has fewer tokens
      if (token === ">") return at < subject.length;
      const dot = subject.indexOf(".", at);
      const end = dot === -1 ? subject.length : dot;
      if (token !== "*" && (end - at !== token.length || !subject.startsWith(token, at))) return false;
      at = end + 1;
    }
    return at > subject.length;
  };
}

/** A fresh, unique prefix: tests and embedded runs that share a broker keep apart with it. */
export function uniquePrefix(base = "t"): string {
  return `${base}${ulid().toLowerCase()}`;
}

/** The longest call id kept as it is in a key; the model chooses call ids, of any length. */
const PLAIN_CALL_ID = /^[-_A-Za-z0-9]{1,64}$/;

/**
 * A call id as one short KV key token: a plain id of up to 64 characters as it is, any other as `=`
 * and the base64url of its SHA-256 (a plain id has no `=`), so two call ids never share a record
 * and no key outgrows a subject the server takes (a longer one dropped the connection).
 */
export const callKey = (callId: string) =>
  PLAIN_CALL_ID.test(callId) ? callId : `=${createHash("sha256").update(callId).digest("base64url")}`;
