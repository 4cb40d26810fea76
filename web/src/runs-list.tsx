import { useEffect, useState } from "preact/hooks";
import type { RunSummary } from "../../src/web/runs-feed.js";
import { follow, formatAge, formatTokens } from "./api.js";
import { Permissions } from "./permissions.js";

const STATUSES = [
  "all",
  "running",
  "done",
  "refused",
  "failed",
  "aborted",
  "budget_exhausted",
  "loop_detected",
  "output_invalid",
];

/** Every run, newest first, live; filtered by status. */
export function RunsList() {
  const [runs, setRuns] = useState<RunSummary[] | undefined>(undefined);
  const [status, setStatus] = useState("all");
  const [now, setNow] = useState(Date.now());
  useEffect(() => follow<RunSummary[]>("/api/runs/live", "runs", (lists) => setRuns(lists.at(-1))), []);
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, []);
  const shown = (runs ?? []).filter((run) => status === "all" || run.status === status);
  return (
    <main class="runs">
      <header class="bar">
        <h1>Runs</h1>
        <label>
          Status{" "}
          <select
            data-testid="status-filter"
            value={status}
            onChange={(e) => setStatus((e.target as HTMLSelectElement).value)}
          >
            {STATUSES.map((s) => (
              <option value={s}>{s}</option>
            ))}
          </select>
        </label>
      </header>
      {runs === undefined ? (
        <p class="quiet">Loading…</p>
      ) : shown.length === 0 ? (
        <p class="quiet">No runs{status === "all" ? " yet: start one with troupe run" : ` ${status}`}.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>Status</th>
              <th>Task</th>
              <th>Agent</th>
              <th>Age</th>
              <th>Tokens</th>
              <th>Cost</th>
              <th>Approvals</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((run) => (
              <tr data-testid="run-row" data-run={run.runId} data-status={run.status}>
                <td>
                  <span class={`status ${run.status}`}>{run.status}</span>
                </td>
                <td class="task">
                  <a href={`#/runs/${run.runId}`}>{run.task}</a>
                </td>
                <td>{run.agent}</td>
                <td data-testid="age" title={new Date(run.startedAt).toLocaleString()}>
                  {formatAge(now - run.startedAt)}
                </td>
                <td data-testid="tokens">
                  {run.usage ? formatTokens(run.usage.inputTokens + run.usage.outputTokens) : "–"}
                </td>
                <td data-testid="cost">{run.usage ? `$${run.usage.costUsd.toFixed(4)}` : "–"}</td>
                <td>
                  {run.pendingApprovals > 0 ? (
                    <span class="badge" data-testid="pending-approvals">
                      {run.pendingApprovals}
                    </span>
                  ) : (
                    ""
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Permissions />
    </main>
  );
}
