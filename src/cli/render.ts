import { progressLabel } from "../actors/run-tree.js";
import type { LoggedEvent } from "../bus/bus.js";
import { type AgentEventMap, isAgentEvent } from "../events/agent-events.js";
import { jsonVisible, visible, visibleLine } from "../util/visible.js";
import type { Output } from "./input-block.js";
import { contextBar } from "./tree-view.js";

const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

export interface Renderer {
  event(event: Pick<LoggedEvent, "envelope">): void;
  close(): void;
}

/** `--json`: every event as one line on stdout, nothing else there; raw C1 and bidi characters escaped. */
export function jsonRenderer(out: NodeJS.WritableStream = process.stdout): Renderer {
  return {
    event: ({ envelope }) => void out.write(`${jsonVisible(JSON.stringify(envelope))}\n`),
    close: () => {},
  };
}

/**
 * For people: the root agent's answer as it streams (stdout), one line per tool call; its reasoning
 * as it streams and a spinner while the model works (stderr: the reasoning dimmed when colours are
 * on, else each stretch of it begun with `thinking: `; the spinner only on a terminal; a model call's
 * retries, one line each). stdout stays what the agent said and did. Every string from the run is shown through `visible`: a model, a tool
 * or a task writes text on the terminal, never escape sequences (each piece of a stream on its own,
 * and none can make one with the next, since each control character is shown by itself).
 */
export function humanRenderer(
  rootAgentId: () => string | undefined,
  out: Output = process.stdout,
  err: Output = process.stderr,
  colour = err.isTTY === true && !process.env.NO_COLOR,
  /** Where the spinner's frames go instead of a line of stderr (a chat's block under its output). */
  status?: (text: string | undefined) => void,
): Renderer {
  const tty = err.isTTY === true;
  // A stretch of reasoning is being shown, and whether it left a line open on stderr: what comes
  // next ends the stretch and starts a line of its own.
  let thinking = false;
  let thoughtOpen = false;
  const endThought = () => {
    if (thoughtOpen) err.write("\n");
    thinking = false;
    thoughtOpen = false;
  };
  let spinner: NodeJS.Timeout | undefined;
  let frame = 0;
  let atLineStart = true;
  // What the root's last request filled of its window: shown while it thinks.
  let context: AgentEventMap["context.usage"] | undefined;
  const thinkingLabel = () => `thinking…${context ? ` · ${contextBar(context.percent, false)}` : ""}`;
  // The subagents at work, by id: what the spinner says while the root waits on them.
  const children = new Map<string, { name: string; state: string; since: number }>();
  // The root's calls that said how far they have come, by call id: what the spinner says meanwhile.
  const progress = new Map<string, string>();
  const working = () =>
    [
      ...progress.values(),
      ...[...children.values()].map(
        (c) => `${c.name} ${c.state} ${((Date.now() - c.since) / 1000).toFixed(1)} s`,
      ),
    ].join(" · ");
  const busy = () => children.size > 0 || progress.size > 0;
  const stopSpinner = () => {
    if (!spinner) return;
    clearInterval(spinner);
    spinner = undefined;
    if (status) status(undefined);
    else err.write("\r\x1b[K");
  };
  const startSpinner = (label: string | (() => string)) => {
    if (!tty || spinner) return;
    endThought();
    const text = typeof label === "string" ? () => label : label;
    const columns = err.columns || 100;
    spinner = setInterval(() => {
      const shown = `${SPINNER[frame++ % SPINNER.length]} ${text()}`.slice(0, columns - 1);
      if (status) status(shown);
      else err.write(`\r\x1b[K${shown}`);
    }, 80);
    spinner.unref();
  };
  const line = (text: string) => {
    stopSpinner();
    endThought();
    if (!atLineStart) out.write("\n");
    out.write(`${text}\n`);
    atLineStart = true;
    if (busy()) startSpinner(working);
  };
  // A status of the run, not what the agent said or did: one line on stderr, stdout's line ended first.
  const note = (text: string) => {
    stopSpinner();
    endThought();
    if (!atLineStart) out.write("\n");
    atLineStart = true;
    err.write(`${text}\n`);
    if (busy()) startSpinner(working);
  };
  return {
    event({ envelope }) {
      if (!isAgentEvent(envelope)) return; // a newer build's event
      const root = envelope.agentId === rootAgentId();
      const prefix = root ? "" : `[${visibleLine(envelope.agentId)}] `;
      switch (envelope.type) {
        case "state.changed": {
          const { to } = envelope.data;
          const child = children.get(envelope.agentId);
          if (child) child.state = visibleLine(to);
          if (!root) break;
          stopSpinner();
          if (to === "callingModel" || to === "compacting")
            startSpinner(to === "compacting" ? "compacting context…" : thinkingLabel);
          else if (to === "executingTools" && busy()) startSpinner(working);
          break;
        }
        case "subagent.spawned": {
          const { childId, name } = envelope.data;
          children.set(childId, { name: visibleLine(name), state: "starting", since: envelope.ts });
          if (root) {
            stopSpinner();
            startSpinner(working);
          }
          break;
        }
        case "model.reasoning": {
          if (!root) break;
          stopSpinner();
          const text = visible(envelope.data.text);
          if (!atLineStart) out.write("\n");
          atLineStart = true;
          err.write(colour ? `\x1b[2m${text}\x1b[22m` : `${thinking ? "" : "thinking: "}${text}`);
          thinking = true;
          thoughtOpen = !text.endsWith("\n");
          break;
        }
        case "model.delta": {
          if (!root) break;
          stopSpinner();
          endThought();
          const text = visible(envelope.data.text);
          out.write(text);
          atLineStart = text.endsWith("\n");
          break;
        }
        case "tool.requested": {
          const { name, arguments: args, error } = envelope.data;
          line(`${prefix}▸ ${visibleLine(name)} ${short(args)}${error ? `  ✗ ${visible(error)}` : ""}`);
          break;
        }
        case "tool.progress": {
          if (!root) break;
          const { callId, name } = envelope.data;
          progress.set(callId, `${visibleLine(name)} ${progressLabel(envelope.data)}`);
          startSpinner(working);
          break;
        }
        case "tool.finished": {
          const { callId, name, ok, error } = envelope.data;
          if (progress.delete(callId) && !busy()) stopSpinner();
          if (!ok) line(`${prefix}  ✗ ${visibleLine(name)}: ${visible(error ?? "failed")}`);
          break;
        }
        case "approval.requested":
          // The terminal's question follows; end the line the answer was streaming on.
          stopSpinner();
          endThought();
          if (!atLineStart) out.write("\n");
          atLineStart = true;
          break;
        case "approval.decided": {
          const { approved, by, reason } = envelope.data;
          line(
            `${prefix}  ${approved ? "✓ allowed" : "✗ denied"} by ${visibleLine(by)}${reason ? `: ${visible(reason)}` : ""}`,
          );
          break;
        }
        case "approval.closed":
          line(`${prefix}  ✗ closed without an answer: ${visible(envelope.data.why)}`);
          break;
        case "approval.rejected": {
          const { why, by } = envelope.data;
          line(
            `${prefix}  ! an answer${by ? ` claiming to be ${visibleLine(by)}'s` : ""} was refused: ${visible(why)}`,
          );
          break;
        }
        case "model.retrying": {
          const { attempt, maxRetries, delayMs, error } = envelope.data;
          note(
            `${prefix}· ${visibleLine(error)}; retrying (${attempt}/${maxRetries}) in ${(delayMs / 1000).toFixed(1)} s`,
          );
          if (root) startSpinner(thinkingLabel);
          break;
        }
        case "model.completed": {
          const { truncatedToolCalls } = envelope.data;
          if (truncatedToolCalls)
            line(
              `${prefix}· the answer was cut off by the output length limit: its tool call was not run (the model is told)`,
            );
          break;
        }
        case "sampling.finished": {
          const { server, usage, refused } = envelope.data;
          if (refused) {
            line(
              `${prefix}· ${visibleLine(server)} asked for a completion (sampling): refused, ${visible(refused)}`,
            );
            break;
          }
          const tokens = usage ? usage.inputTokens + usage.outputTokens : 0;
          const cost = usage && usage.costUsd > 0 ? `, $${usage.costUsd.toFixed(4)}` : "";
          line(
            `${prefix}· ${visibleLine(server)} asked for a completion (sampling): ${plural(tokens, "token")}${cost}`,
          );
          break;
        }
        case "output.retried":
          line(
            `${prefix}· the answer does not fit the output schema (${visible(envelope.data.problem)}): asked again`,
          );
          break;
        case "elicitation.finished": {
          const { server, action, why } = envelope.data;
          const how = action === "accept" ? "answered" : action === "decline" ? "declined" : "cancelled";
          line(`${prefix}· ${visibleLine(server)}'s question ${how}${why ? `: ${visible(why)}` : ""}`);
          break;
        }
        case "skill.loaded": {
          const { name, by, files, preApproved } = envelope.data;
          const how =
            by === "model" ? "loaded" : by === "user" ? "loaded as asked" : "loaded to match the task";
          const approved = preApproved?.length
            ? ` · pre-approves ${visibleLine(preApproved.join(", "))}`
            : "";
          line(`${prefix}· skill ${visibleLine(name)} ${how} · ${plural(files, "file")}${approved}`);
          break;
        }
        case "context.usage":
          if (root) context = envelope.data;
          break;
        case "context.warning": {
          const { level, percent, tokens, contextWindow } = envelope.data;
          line(
            `${prefix}· context ${level}: ${contextBar(percent, false)} (${tokens} of ${contextWindow} tokens)`,
          );
          if (root) startSpinner(thinkingLabel);
          break;
        }
        case "context.compacted": {
          const { tokensBefore, tokensAfter, usage } = envelope.data;
          const tokens = usage ? usage.inputTokens + usage.outputTokens : 0;
          const cost = usage && usage.costUsd > 0 ? `, $${usage.costUsd.toFixed(4)}` : "";
          const summary = tokens > 0 ? ` (the summary took ${plural(tokens, "token")}${cost})` : "";
          line(`${prefix}· context compacted: ${tokensBefore} → ${tokensAfter} tokens${summary}`);
          break;
        }
        case "subagent.finished": {
          const data = envelope.data;
          children.delete(data.childId);
          if (!busy()) stopSpinner();
          const tokens = data.usage.inputTokens + data.usage.outputTokens;
          line(
            `${prefix}◂ ${visibleLine(data.childId)} ${data.reason} · ${plural(tokens, "token")} · ${plural(data.toolCalls, "tool call")}`,
          );
          break;
        }
        case "agent.stopped": {
          if (!root) break;
          stopSpinner();
          const data = envelope.data;
          endThought();
          if (!atLineStart) out.write("\n");
          // A refusal never streams as text: it is the answer, on stdout like one.
          if (data.reason === "refused" && data.result) out.write(`${visible(data.result)}\n`);
          atLineStart = true;
          // The run's spend: this agent and every subagent under it.
          const { usage, toolCalls } = data.total;
          const tokens = usage.inputTokens + usage.outputTokens;
          const cost = usage.costUsd > 0 ? ` · $${usage.costUsd.toFixed(4)}` : "";
          const why = data.limit ? ` (${visibleLine(data.limit)} reached)` : "";
          err.write(
            `${data.reason === "done" ? "✓" : "■"} ${data.reason}${why} · ${plural(data.turns, "turn")} · ${plural(toolCalls, "tool call")} · ${plural(tokens, "token")}${cost}\n`,
          );
          if (data.error) err.write(`troupe: ${visible(data.error)}\n`);
          break;
        }
      }
    },
    close: stopSpinner,
  };
}

/** `humanRenderer`'s arguments after the root for a turn shown on `screen`, or on stdout and stderr. */
export function screenOf(options: {
  screen?: { out: Output; err: Output; status: (text: string | undefined) => void } | undefined;
}): [Output?, Output?, boolean?, ((text: string | undefined) => void)?] {
  const { screen } = options;
  return screen ? [screen.out, screen.err, undefined, screen.status] : [];
}

function short(json: string, max = 100): string {
  const flat = visibleLine(json.replace(/\s+/g, " "));
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;
