import type { TreeNode } from "../../src/actors/run-tree.js";
import type { Span } from "./run-model.js";

const ROW = 22;
const LABEL_W = 140;
const WIDTH = 900;

/**
 * The run's timeline: a row per agent, its model calls, tool calls and subagents as bars along one
 * time axis, so work done in parallel shows as parallel.
 */
export function Timeline(props: { agents: TreeNode[]; spans: Span[]; start: number; end: number }) {
  const rows = new Map(props.agents.map((agent, i) => [agent.agentId, i]));
  const span = Math.max(1, props.end - props.start);
  const x = (t: number) => LABEL_W + ((t - props.start) / span) * (WIDTH - LABEL_W - 8);
  const height = props.agents.length * ROW + 20;
  return (
    <svg
      class="timeline"
      viewBox={`0 0 ${WIDTH} ${height}`}
      data-testid="timeline"
      role="img"
      aria-label="Timeline of the run"
    >
      {props.agents.map((agent, i) => (
        <text x="4" y={i * ROW + 15} class="row-label">
          {`${"  ".repeat(agent.depth)}${agent.name}`}
        </text>
      ))}
      {props.spans.map((bar) => {
        const row = rows.get(bar.agentId);
        if (row === undefined) return null;
        const left = x(bar.start);
        const right = x(bar.end ?? props.end);
        const offset = bar.kind === "model" ? 3 : bar.kind === "tool" ? 8 : 13;
        return (
          <rect
            class={`bar ${bar.kind}${bar.end === undefined ? " open" : ""}`}
            x={left}
            y={row * ROW + offset}
            width={Math.max(2, right - left)}
            height={bar.kind === "subagent" ? 4 : 6}
          >
            <title>{`${bar.kind} ${bar.label}: ${((bar.end ?? props.end) - bar.start).toFixed(0)} ms`}</title>
          </rect>
        );
      })}
      <text x={LABEL_W} y={height - 4} class="axis">
        0
      </text>
      <text x={WIDTH - 8} y={height - 4} class="axis" text-anchor="end">
        {`${(span / 1000).toFixed(1)} s`}
      </text>
    </svg>
  );
}
