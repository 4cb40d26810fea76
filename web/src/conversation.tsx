import { useState } from "preact/hooks";
import type { Item } from "./run-model.js";

const FOLDED_LINES = 6;

/** Items drawn at once; earlier ones on request, so a long run's page stays small. */
const WINDOW = 200;

/**
 * An agent's conversation: the task, streamed text, reasoning (dimmed), tool calls and results. Only
 * the latest items are drawn (a window that grows on request): the page's size stays bounded
 * however long the run.
 */
export function Conversation(props: { items: Item[] }) {
  const [window, setWindow] = useState(WINDOW);
  const hidden = Math.max(0, props.items.length - window);
  return (
    <ol class="conversation" data-testid="conversation">
      {hidden > 0 && (
        <li class="item earlier">
          <button type="button" class="link" onClick={() => setWindow(window + WINDOW)}>
            {hidden} earlier items
          </button>
        </li>
      )}
      {props.items.slice(hidden).map((item) => (
        <li class={`item ${item.kind}`}>
          <ItemBody item={item} />
        </li>
      ))}
    </ol>
  );
}

function ItemBody(props: { item: Item }) {
  const { item } = props;
  switch (item.kind) {
    case "task":
      return <p class="task">{item.text}</p>;
    case "text":
    case "reasoning":
      return <p class={item.open ? "streaming" : ""}>{item.text}</p>;
    case "tool":
      return (
        <div class={`tool ${item.status}`} data-testid="tool-call">
          <div class="call">
            <span class="tool-name">{item.name}</span> <code>{item.args}</code>{" "}
            <span class="tool-status">{item.status}</span>
            {item.progress && <span class="quiet"> {item.progress}</span>}
            {item.durationMs !== undefined && <span class="quiet"> {item.durationMs} ms</span>}
          </div>
          {item.error && <p class="error">{item.error}</p>}
          {item.preview && <Folded text={item.preview} />}
        </div>
      );
    case "approval":
      return (
        <p class="decision">
          {item.approved ? "Allowed" : "Denied"} by {item.by}
          {item.reason ? `: ${item.reason}` : ""}
        </p>
      );
    case "closed":
      return <p class="decision">Closed without an answer: {item.why}</p>;
    case "stopped":
      return (
        <div class="stopped">
          <strong>{item.reason}</strong>
          <p>{item.result}</p>
        </div>
      );
  }
}

/** Text past a few lines is folded, and opens on a click. */
export function Folded(props: { text: string }) {
  const [open, setOpen] = useState(false);
  const lines = props.text.split("\n");
  const long = lines.length > FOLDED_LINES;
  return (
    <div class="folded">
      <pre>{open || !long ? props.text : lines.slice(0, FOLDED_LINES).join("\n")}</pre>
      {long && (
        <button type="button" class="link" onClick={() => setOpen(!open)}>
          {open ? "fold" : `${lines.length - FOLDED_LINES} more lines`}
        </button>
      )}
    </div>
  );
}
