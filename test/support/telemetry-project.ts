import { uniquePrefix } from "../../src/bus/subjects.js";
import type { ScriptedModelServer, ScriptRule } from "../../src/testing/scripted-model-server.js";
import { spawnTroupe } from "./cli.js";
import { embeddedDaemon } from "./embedded-daemon.js";
import type { OtlpReceiver, ReceivedSpan } from "./otlp-receiver.js";
import { waitFor } from "./wait.js";

/*
 * A project that exports its telemetry to a receiver, as a user runs one: the daemon on its default
 * embedded (credentialed) server hosting a lead, a `troupe worker` process hosting its two explorers.
 */

/** A secret the explorers read: it must reach no span as it is. */
export const SECRET = "sk-proj-Tq3vX8mZp2Lr7Wn5Ks9Yd4Hb6Jc1Fg0Ae";

const as = (name: string, turn: number) => ({ system: `"${name}"`, turn });

export function leadAndExplorers(explorerDelayMs: number): ScriptRule[] {
  return [
    {
      match: as("lead", 1),
      reply: {
        toolCalls: [
          { name: "subagent_explorer", arguments: { task: "What does notes.txt say?" } },
          { name: "subagent_explorer", arguments: { task: "Is there a key in notes.txt?" } },
        ],
      },
    },
    {
      match: as("explorer", 1),
      reply: {
        toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }],
        delayMs: explorerDelayMs,
      },
      times: 2,
    },
    { match: as("explorer", 2), reply: { text: "It says the answer is 42." }, times: 2 },
    { match: as("lead", 2), reply: { text: "The answer is 42." } },
  ];
}

export async function tracedProject(
  model: ScriptedModelServer,
  receiver: OtlpReceiver,
  cleanups: Array<() => unknown>,
) {
  const prefix = uniquePrefix();
  const d = await embeddedDaemon(
    {
      "config/troupe.yaml": [
        `nats:\n  prefix: ${prefix}`,
        "defaultAgent: lead\ndefaultModel: scripted",
        `telemetry:\n  enabled: true\n  endpoint: ${receiver.url}\n  captureContent: true`,
        "daemon:\n  maxApproval: yolo\n",
      ].join("\n"),
      "config/agents/lead.yaml":
        "name: lead\ndescription: Leads.\ntools: [read_file]\nsubagents: [explorer]\n",
      "config/agents/explorer.yaml":
        "name: explorer\ndescription: Reads.\nreadOnly: true\ntools: [read_file]\n",
      "notes.txt": `the answer is 42\nOPENAI_API_KEY=${SECRET}\n`,
    },
    model.baseURL,
    cleanups,
  );
  // Spans leave every 200 ms, metrics every 500 ms, so the test need not wait the SDK's 5 s and 60 s.
  Object.assign(d.env, { OTEL_BSP_SCHEDULE_DELAY: "200", OTEL_METRIC_EXPORT_INTERVAL: "500" });
  await d.start();
  const worker = spawnTroupe([...d.cfg, "worker"], { cwd: d.dir, env: d.env });
  cleanups.push(async () => {
    worker.child.kill("SIGTERM");
    await worker.exit;
  });
  await waitFor("the worker", () => worker.stderr().includes("troupe worker "), 15_000);
  return { ...d, worker };
}

/**
 * The spans of a `leadAndExplorers` run once the last each process makes are in: the run's root
 * span (the daemon's) and both explorers' (the worker's).
 */
export async function wholeTrace(receiver: OtlpReceiver): Promise<ReceivedSpan[]> {
  const count = (name: string) => receiver.spans.filter((s) => s.name === name).length;
  await waitFor("the run's root span", () => count("invoke_workflow lead") === 1, 15_000);
  await waitFor("both explorers' spans", () => count("invoke_agent explorer") === 2, 15_000);
  return receiver.spans;
}
