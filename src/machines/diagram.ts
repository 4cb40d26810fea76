import type { AnyStateMachine } from "xstate";

/** A machine's states and transitions, read from the machine itself (so it cannot drift from the code). */
export interface MachineGraph {
  initial: string;
  states: Array<{ key: string; final: boolean }>;
  /** One edge per pair of states, its events merged; invoke results as done / error, delays as after. */
  edges: Array<{ from: string; to: string; labels: string[] }>;
  /** Events any state takes to a target (the root's own transitions). */
  global: Array<{ to: string; label: string }>;
}

type Transitions = Map<string, Array<{ target?: Array<{ key: string }> }>>;

export function machineGraph(machine: AnyStateMachine): MachineGraph {
  const edges = new Map<string, { from: string; to: string; labels: string[] }>();
  const add = (from: string, to: string, label: string) => {
    const key = `${from} --> ${to}`;
    const edge = edges.get(key) ?? { from, to, labels: [] };
    if (!edge.labels.includes(label)) edge.labels.push(label);
    edges.set(key, edge);
  };
  const label = (event: string) =>
    event
      .replace(/^xstate\.done\.actor\..*/, "done")
      .replace(/^xstate\.error\.actor\..*/, "error")
      .replace(/^xstate\.after\.([^.]+)\..*/, "after $1");
  const states = machine.root.states as Record<
    string,
    {
      key: string;
      transitions: Transitions;
      always?: Array<{ target?: Array<{ key: string }> }>;
      type: string;
    }
  >;
  for (const [key, node] of Object.entries(states)) {
    for (const [event, definitions] of node.transitions)
      for (const d of definitions) for (const t of d.target ?? []) add(key, t.key, label(event));
    for (const d of node.always ?? []) for (const t of d.target ?? []) add(key, t.key, "always");
  }
  const global: MachineGraph["global"] = [];
  for (const [event, definitions] of machine.root.transitions as Transitions)
    for (const d of definitions)
      for (const t of d.target ?? []) global.push({ to: t.key, label: label(event) });
  return {
    initial: machine.root.initial?.target?.[0]?.key ?? "idle",
    states: Object.values(states).map((node) => ({ key: node.key, final: node.type === "final" })),
    edges: [...edges.values()],
    global,
  };
}

/** A Mermaid state diagram of a machine (`troupe inspect --diagram`), with `current` marked. */
export function mermaidDiagram(machine: AnyStateMachine, current?: string): string {
  const graph = machineGraph(machine);
  const lines = ["stateDiagram-v2", `  [*] --> ${graph.initial}`];
  for (const edge of graph.edges) lines.push(`  ${edge.from} --> ${edge.to}: ${edge.labels.join(", ")}`);
  for (const { to, label } of graph.global) lines.push(`  note right of ${to}: from any state on ${label}`);
  for (const state of graph.states) if (state.final) lines.push(`  ${state.key} --> [*]`);
  if (current)
    lines.push("  classDef current fill:#f96,stroke:#333,stroke-width:3px", `  class ${current} current`);
  return lines.join("\n");
}
