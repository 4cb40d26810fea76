import dagre from "@dagrejs/dagre";
import { useMemo } from "preact/hooks";
import type { MachineGraph } from "../../src/machines/diagram.js";

const NODE_W = 128;
const NODE_H = 34;

interface Layout {
  width: number;
  height: number;
  nodes: Map<string, { x: number; y: number }>;
  edges: Array<{ from: string; to: string; label: string; points: Array<{ x: number; y: number }> }>;
}

/** Lays the machine out once (dagre, top to bottom); self-transitions are left out of the drawing. */
function layout(graph: MachineGraph): Layout {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "TB", nodesep: 20, ranksep: 36, marginx: 8, marginy: 8 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const state of graph.states) g.setNode(state.key, { width: NODE_W, height: NODE_H });
  for (const edge of graph.edges)
    if (edge.from !== edge.to) g.setEdge(edge.from, edge.to, { label: edge.labels.join(", ") });
  dagre.layout(g);
  const nodes = new Map<string, { x: number; y: number }>();
  for (const key of g.nodes()) {
    const node = g.node(key);
    nodes.set(key, { x: node.x, y: node.y });
  }
  const edges = g.edges().map((e) => ({
    from: e.v,
    to: e.w,
    label: (g.edge(e) as { label?: string }).label ?? "",
    points: g.edge(e).points ?? [],
  }));
  const { width = 0, height = 0 } = g.graph();
  return { width, height, nodes, edges };
}

/**
 * The agent machine's statechart, drawn from the machine's own definition: the current state lit,
 * the states and transitions the selected agent went through marked.
 */
export function Statechart(props: {
  graph: MachineGraph;
  current: string | undefined;
  path: Array<{ from: string; to: string }>;
}) {
  const drawn = useMemo(() => layout(props.graph), [props.graph]);
  const visited = new Set(props.path.flatMap((step) => [step.from, step.to]));
  const taken = new Set(props.path.map((step) => `${step.from}>${step.to}`));
  return (
    <svg
      class="statechart"
      viewBox={`0 0 ${drawn.width} ${drawn.height}`}
      data-testid="statechart"
      role="img"
      aria-label="The agent machine's statechart"
    >
      <defs>
        <marker
          id="arrow"
          viewBox="0 0 10 10"
          refX="9"
          refY="5"
          markerWidth="6"
          markerHeight="6"
          orient="auto-start-reverse"
        >
          <path d="M 0 0 L 10 5 L 0 10 z" />
        </marker>
      </defs>
      {drawn.edges.map((edge) => (
        <g class={`edge${taken.has(`${edge.from}>${edge.to}`) ? " taken" : ""}`}>
          <polyline points={edge.points.map((p) => `${p.x},${p.y}`).join(" ")} marker-end="url(#arrow)" />
          <title>{edge.label}</title>
        </g>
      ))}
      {[...drawn.nodes].map(([key, { x, y }]) => (
        <g
          class={`state${key === props.current ? " current" : ""}${visited.has(key) ? " visited" : ""}`}
          data-state={key}
          data-current={key === props.current ? "true" : undefined}
        >
          <rect x={x - NODE_W / 2} y={y - NODE_H / 2} width={NODE_W} height={NODE_H} rx="8" />
          <text x={x} y={y + 4} text-anchor="middle">
            {key}
          </text>
        </g>
      ))}
    </svg>
  );
}
