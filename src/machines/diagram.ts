import type { AnyStateMachine } from "xstate";

/**
 * A Mermaid state diagram of a machine, read from the machine itself (so it cannot drift from the
 * code), with `current` marked. Transitions of the same pair are merged; invoke results show as
 * done / error, delayed transitions as after.
 */
export function mermaidDiagram(machine: AnyStateMachine, current?: string): string {
  const edges = new Map<string, Set<string>>();
  const add = (from: string, to: string, label: string) => {
    const key = `${from} --> ${to}`;
    const labels = edges.get(key) ?? new Set<string>();
    labels.add(label);
    edges.set(key, labels);
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
      transitions: Map<string, Array<{ target?: Array<{ key: string }> }>>;
      always?: Array<{ target?: Array<{ key: string }> }>;
      type: string;
    }
  >;
  for (const [key, node] of Object.entries(states)) {
    for (const [event, definitions] of node.transitions)
      for (const d of definitions) for (const t of d.target ?? []) add(key, t.key, label(event));
    for (const d of node.always ?? []) for (const t of d.target ?? []) add(key, t.key, "always");
  }
  const lines = ["stateDiagram-v2", `  [*] --> ${machine.root.initial?.target?.[0]?.key ?? "idle"}`];
  for (const [edge, labels] of edges) lines.push(`  ${edge}: ${[...labels].join(", ")}`);
  for (const [event, definitions] of machine.root.transitions as Map<
    string,
    Array<{ target?: Array<{ key: string }> }>
  >) {
    for (const d of definitions)
      for (const t of d.target ?? [])
        lines.push(`  note right of ${t.key}: from any state on ${label(event)}`);
  }
  for (const [key, node] of Object.entries(states)) if (node.type === "final") lines.push(`  ${key} --> [*]`);
  if (current)
    lines.push("  classDef current fill:#f96,stroke:#333,stroke-width:3px", `  class ${current} current`);
  return lines.join("\n");
}
