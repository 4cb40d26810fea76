import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import type { TreeNode } from "../../src/actors/run-tree.js";
import type { Envelope } from "../../src/events/envelope.js";
import type { MachineGraph } from "../../src/machines/diagram.js";
import { follow, formatAge, formatTokens, get, post } from "./api.js";
import { Approvals } from "./approvals.js";
import { Conversation } from "./conversation.js";
import { RunModel } from "./run-model.js";
import { Statechart } from "./statechart.js";
import { Timeline } from "./timeline.js";

let machine: Promise<MachineGraph> | undefined;

/** One run: its agent tree, the selected agent's conversation and statechart, approvals, timeline. */
export function RunView(props: { runId: string }) {
  const events = useRef<Envelope[]>([]);
  const live = useRef(new RunModel());
  const [version, setVersion] = useState(0);
  const [selected, setSelected] = useState<string | undefined>(undefined);
  const [graph, setGraph] = useState<MachineGraph | undefined>(undefined);
  /** Where the replay stands (an event count), or undefined to follow the run live. */
  const [position, setPosition] = useState<number | undefined>(undefined);

  useEffect(() => {
    machine ??= get<MachineGraph>("/api/machine");
    void machine.then(setGraph);
  }, []);
  useEffect(() => {
    events.current = [];
    live.current = new RunModel();
    return follow<Envelope[]>(`/api/runs/${props.runId}/events`, "events", (batches) => {
      for (const batch of batches)
        for (const event of batch) {
          events.current.push(event);
          live.current.apply(event);
        }
      setVersion((v) => v + 1);
    });
  }, [props.runId]);

  const model = useMemo(() => {
    if (position === undefined) return live.current;
    const replay = new RunModel();
    for (const event of events.current.slice(0, position)) replay.apply(event);
    return replay;
  }, [position, version]);

  const agents = flatten(model.roots());
  const root = agents[0];
  const agent = agents.find((a) => a.agentId === selected) ?? root;
  // Whether the run is over is the live run's say, whatever point the replay shows.
  const stopped = live.current.roots()[0]?.reason !== undefined;
  return (
    <main class="run">
      <header class="bar">
        <a href="#/">← Runs</a>
        <h1 title={root?.task}>{root?.task ?? props.runId}</h1>
        <span class={`status ${root?.reason ?? "running"}`} data-testid="run-status">
          {root?.reason ?? (root ? "running" : "…")}
        </span>
      </header>
      {root && !stopped && <Controls runId={props.runId} />}
      <section class="layout">
        <aside class="tree" data-testid="agent-tree">
          {agents.map((node) => (
            <AgentRow
              node={node}
              selected={node.agentId === agent?.agentId}
              onSelect={() => setSelected(node.agentId)}
            />
          ))}
        </aside>
        <section class="conversation-pane">
          {agent && <Conversation items={model.conversations.get(agent.agentId) ?? []} />}
        </section>
        <aside class="side">
          <Approvals runId={props.runId} version={live.current.approvalEvents} />
          {graph && agent && (
            <>
              <h2>
                {agent.name}: {agent.state}
              </h2>
              <Statechart graph={graph} current={agent.state} path={agent.transitions} />
            </>
          )}
        </aside>
      </section>
      {model.first !== undefined && (
        <section class="timeline-pane">
          <h2>Timeline</h2>
          <Timeline
            agents={agents}
            spans={model.spans}
            start={model.first}
            end={stopped ? (model.last ?? Date.now()) : Date.now()}
          />
        </section>
      )}
      {stopped && (
        <section class="replay">
          <label>
            Replay{" "}
            <input
              type="range"
              data-testid="replay"
              min={0}
              max={events.current.length}
              value={position ?? events.current.length}
              onInput={(e) => setPosition(Number((e.target as HTMLInputElement).value))}
            />{" "}
            {position ?? events.current.length} / {events.current.length} events
          </label>
        </section>
      )}
    </main>
  );
}

/** Wall time from the agent's first state change to its last (or to now, while it runs). */
function elapsed(node: TreeNode): number {
  const first = node.transitions[0]?.at;
  if (first === undefined) return 0;
  const last = node.state === "stopped" ? (node.transitions.at(-1)?.at ?? first) : Date.now();
  return last - first;
}

function flatten(nodes: TreeNode[]): TreeNode[] {
  return nodes.flatMap((node) => [node, ...flatten(node.children)]);
}

function AgentRow(props: { node: TreeNode; selected: boolean; onSelect: () => void }) {
  const { node } = props;
  const budget = node.budget;
  const tokens = node.usage ? node.usage.inputTokens + node.usage.outputTokens : 0;
  return (
    <button
      type="button"
      class={`agent${props.selected ? " selected" : ""}`}
      style={{ paddingLeft: `${8 + node.depth * 16}px` }}
      onClick={props.onSelect}
      data-testid="agent"
      data-agent={node.name}
      data-state={node.state}
    >
      <span class="name">{node.name}</span>{" "}
      <span class={`state ${node.state}`}>{node.reason ?? node.state}</span>
      <span class="turn">turn {node.turns}</span>
      <Bar label="tokens" used={tokens} limit={budget.maxTokens} format={formatTokens} />
      <Bar
        label="cost"
        used={node.usage?.costUsd ?? 0}
        limit={budget.maxCostUsd}
        format={(n) => `$${n.toFixed(4)}`}
      />
      <Bar label="tools" used={node.toolCalls} limit={budget.maxToolCalls} format={String} />
      <Bar label="turns" used={node.turns} limit={budget.maxTurns} format={String} />
      <Bar label="time" used={elapsed(node)} limit={budget.maxWallMs} format={(ms) => formatAge(ms)} />
      {node.context && (
        <Bar
          label="context"
          used={node.context.tokens}
          limit={node.context.contextWindow}
          format={formatTokens}
        />
      )}
    </button>
  );
}

function Bar(props: {
  label: string;
  used: number;
  limit: number | undefined;
  format: (n: number) => string;
}) {
  const share = props.limit ? Math.min(1, props.used / props.limit) : 0;
  const value = `${props.format(props.used)}${props.limit ? ` / ${props.format(props.limit)}` : ""}`;
  return (
    <span class="budget" data-testid="budget" data-budget={props.label}>
      <span class="budget-label">{props.label}</span>
      <span class="track">
        <span class={`fill${share > 0.8 ? " high" : ""}`} style={{ width: `${share * 100}%` }} />
      </span>
      <span class="budget-value">{value}</span>
    </span>
  );
}

function Controls(props: { runId: string }) {
  const [text, setText] = useState("");
  const [said, setSaid] = useState<string | undefined>(undefined);
  const act = async (verb: "steer" | "followUp" | "abort", body: Record<string, string>) => {
    try {
      await post(`/api/runs/${props.runId}/${verb}`, body);
      setSaid(verb === "abort" ? "aborting…" : "sent");
      setText("");
    } catch (error) {
      setSaid((error as Error).message);
    }
  };
  return (
    <form
      class="controls"
      onSubmit={(e) => {
        e.preventDefault();
        void act("steer", { text });
      }}
    >
      <input
        data-testid="steer-text"
        value={text}
        placeholder="Say something to the agent…"
        onInput={(e) => setText((e.target as HTMLInputElement).value)}
      />
      <button type="submit" disabled={!text}>
        Steer
      </button>
      <button type="button" disabled={!text} onClick={() => void act("followUp", { text })}>
        Follow up
      </button>
      <button
        type="button"
        class="danger"
        data-testid="abort"
        onClick={() => {
          if (confirm("Abort this run? Its agents stop where they are."))
            void act("abort", { reason: "aborted from the web console" });
        }}
      >
        Abort
      </button>
      {said && <span class="quiet">{said}</span>}
    </form>
  );
}
