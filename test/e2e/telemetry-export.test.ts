import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import type { Envelope } from "../../src/events/envelope.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, TROUPE_BIN, tempTree } from "../support/cli.js";
import { OtlpReceiver, type ReceivedSpan } from "../support/otlp-receiver.js";
import { Tmux } from "../support/tmux.js";
import { waitFor } from "../support/wait.js";

/*
 * `troupe run --local` exporting as it runs (over gRPC here), and `troupe export-trace` making the
 * spans of a run recorded with telemetry off from its stored events: the same tree either way.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const as = (name: string, turn: number) => ({ system: `"${name}"`, turn });

async function project(telemetry = "", more: NodeJS.ProcessEnv = {}) {
  const model = await ScriptedModelServer.start([
    {
      match: as("lead", 1),
      reply: { toolCalls: [{ name: "subagent_explorer", arguments: { task: "What does notes.txt say?" } }] },
    },
    {
      match: as("explorer", 1),
      reply: { toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }] },
    },
    { match: as("explorer", 2), reply: { text: "It says 42." } },
    { match: as("lead", 2), reply: { text: "42." } },
  ]);
  cleanups.push(() => model.close());
  const { dir, dispose } = tempTree(
    {
      "config/troupe.yaml": `defaultAgent: lead\ndefaultModel: scripted\n${telemetry}`,
      "config/agents/lead.yaml":
        "name: lead\ndescription: Leads.\ntools: [read_file]\nsubagents: [explorer]\n",
      "config/agents/explorer.yaml":
        "name: explorer\ndescription: Reads.\nreadOnly: true\ntools: [read_file]\n",
      "ws/notes.txt": "the answer is 42\n",
    },
    { trusted: true },
  );
  cleanups.push(dispose);
  const env = { OPENAI_BASE_URL: model.baseURL, OPENAI_API_KEY: "", OTEL_BSP_SCHEDULE_DELAY: "100", ...more };
  const run = await runTroupe(["run", "--local", "--json", "-w", "ws", "Read the notes"], { cwd: dir, env });
  expect(run.code).toBe(0);
  const events = run.stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Envelope);
  return { dir, env, runId: events[0]?.runId as string, events };
}

/** The tree the spans make, as `name < parent name` lines, sorted: what must be the same live and exported. */
function tree(spans: ReceivedSpan[]): string[] {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  expect(new Set(spans.map((s) => s.traceId)).size).toBe(1);
  return spans.map((s) => `${s.name} < ${byId.get(s.parentSpanId)?.name ?? "(root)"}`).sort();
}

const EXPECTED_TREE = [
  "chat scripted < invoke_agent explorer",
  "chat scripted < invoke_agent explorer",
  "chat scripted < invoke_agent lead",
  "chat scripted < invoke_agent lead",
  "execute_tool read_file < invoke_agent explorer",
  "execute_tool subagent_explorer < invoke_agent lead",
  "invoke_agent explorer < execute_tool subagent_explorer",
  "invoke_agent lead < invoke_workflow lead",
  "invoke_workflow lead < (root)",
];

it("troupe run --local exports its spans and metrics over gRPC to the endpoint troupe.yaml names", async () => {
  const receiver = await OtlpReceiver.grpc();
  cleanups.push(() => receiver.close());
  const p = await project(
    `telemetry:\n  enabled: true\n  protocol: grpc\n  endpoint: ${await receiverUrl(receiver)}\n  headers:\n    x-team: agents\n`,
  );
  // A local run sends what it holds as it ends: everything is there once it has exited.
  expect(tree(receiver.spans)).toEqual(EXPECTED_TREE);
  expect(receiver.spans[0]?.resource).toMatchObject({ "service.name": "troupe", "troupe.role": "local" });
  expect(receiver.headers.some((h) => h["x-team"] === "agents")).toBe(true);
  const [root] = receiver.spans.filter((s) => s.name === "invoke_workflow lead");
  expect(root?.attributes["troupe.run.id"]).toBe(p.runId);
  expect(receiver.metrics.map((m) => m.name)).toEqual(
    expect.arrayContaining([
      "gen_ai.client.token.usage",
      "gen_ai.client.operation.duration",
      "troupe.tool.calls",
    ]),
  );
});

it("the standard environment configures it: TROUPE_TELEMETRY=1 turns it on, OTEL_* say where, with what headers, as what service, and what is sampled", async () => {
  const receiver = await OtlpReceiver.http();
  cleanups.push(() => receiver.close());
  const standard = {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_HEADERS: "authorization=Basic cGs6c2s=",
    OTEL_SERVICE_NAME: "nightly-agents",
    OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=ci",
  };
  // Off by default: the environment alone sends nothing.
  await project("", standard);
  expect(receiver.spans).toEqual([]);
  expect(receiver.headers).toEqual([]);

  const p = await project("", { ...standard, TROUPE_TELEMETRY: "1" });
  expect(tree(receiver.spans)).toEqual(EXPECTED_TREE);
  expect(receiver.spans[0]?.resource).toMatchObject({
    "service.name": "nightly-agents",
    "deployment.environment": "ci",
    "troupe.role": "local",
  });
  expect(receiver.headers.every((h) => h.authorization === "Basic cGs6c2s=")).toBe(true);
  expect(receiver.spans.find((s) => s.name === "invoke_workflow lead")?.attributes["troupe.run.id"]).toBe(
    p.runId,
  );

  // A sampler that keeps nothing: no span leaves, the metrics still do.
  const [spans, metrics] = [receiver.spans.length, receiver.metrics.length];
  await project("", { ...standard, TROUPE_TELEMETRY: "1", OTEL_TRACES_SAMPLER: "always_off" });
  expect(receiver.spans.length).toBe(spans);
  expect(receiver.metrics.length).toBeGreaterThan(metrics);
});

it("troupe export-trace makes a run recorded with telemetry off into the same spans: sent over HTTP, or written as OTLP/JSON", async () => {
  const p = await project();
  const receiver = await OtlpReceiver.http();
  cleanups.push(() => receiver.close());
  const sent = await runTroupe(["export-trace", p.runId, "--endpoint", receiver.url], {
    cwd: p.dir,
    env: p.env,
  });
  expect(sent.stderr).toBe(`sent 9 spans of run ${p.runId} to ${receiver.url}\n`);
  expect(sent.code).toBe(0);
  expect(tree(receiver.spans)).toEqual(EXPECTED_TREE);
  expect(receiver.spans[0]?.resource["troupe.role"]).toBe("export-trace");
  // Without --content, none of what was said is on the spans.
  expect(JSON.stringify(receiver.spans)).not.toContain("the answer is 42");
  const stopped = p.events.findLast((e) => e.type === "agent.stopped")?.data as {
    usage: { inputTokens: number };
  };
  const [lead] = receiver.spans.filter((s) => s.name === "invoke_agent lead");
  expect(lead?.attributes["gen_ai.usage.input_tokens"]).toBe(stopped.usage.inputTokens);

  const file = join(p.dir, "trace.json");
  const written = await runTroupe(["export-trace", p.runId, "--file", file, "--content"], {
    cwd: p.dir,
    env: p.env,
  });
  expect(written.code).toBe(0);
  expect(statSync(file).mode & 0o777).toBe(0o600);
  const json = JSON.parse(readFileSync(file, "utf8")) as {
    resourceSpans: Array<{
      scopeSpans: Array<{ spans: Array<{ spanId: string; name: string; attributes: unknown[] }> }>;
    }>;
  };
  const fileSpans = json.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans));
  expect(fileSpans.map((s) => s.name).sort()).toEqual(receiver.spans.map((s) => s.name).sort());
  // The same ids: a span sent and a span written are one span.
  expect(new Set(fileSpans.map((s) => Buffer.from(s.spanId, "hex").toString("hex")))).toEqual(
    new Set(receiver.spans.map((s) => s.spanId)),
  );
  expect(readFileSync(file, "utf8")).toContain("the answer is 42");
});

it("troupe export-trace says in one line what it could not do, and writes nothing half", async () => {
  const p = await project();
  const nobody = await runTroupe(["export-trace", p.runId, "--endpoint", "http://127.0.0.1:9"], {
    cwd: p.dir,
    env: p.env,
  });
  expect(nobody.code).not.toBe(0);
  expect(nobody.stderr.trim().split("\n")).toHaveLength(1);
  expect(nobody.stderr).toMatch(
    /^troupe: could not send the spans of run \S+ to http:\/\/127\.0\.0\.1:9: .*; is a collector listening there\?\n$/,
  );
  const unknown = await runTroupe(["export-trace", "run-nothing", "--file", join(p.dir, "out.json")], {
    cwd: p.dir,
    env: p.env,
  });
  expect(unknown.code).not.toBe(0);
  expect(unknown.stderr.trim().split("\n")).toHaveLength(1);
  expect(existsSync(join(p.dir, "out.json"))).toBe(false);
  const unwritable = await runTroupe(
    ["export-trace", p.runId, "--file", join(p.dir, "no", "such", "dir.json")],
    {
      cwd: p.dir,
      env: p.env,
    },
  );
  expect(unwritable.stderr).toMatch(/^troupe: could not write .*dir\.json: ENOENT\n$/);
  expect(readdirSync(p.dir).filter((name) => name.endsWith(".tmp"))).toEqual([]);
});

/** The gRPC receiver's address as troupe.yaml gives an endpoint. */
async function receiverUrl(receiver: OtlpReceiver): Promise<string> {
  await waitFor("the receiver", () => receiver.url !== "", 1000);
  return receiver.url;
}

it("a collector that does not answer never stops a run: the run is done, and its log says so in one line", async () => {
  const model = await ScriptedModelServer.start([{ reply: { text: "Done." } }]);
  cleanups.push(() => model.close());
  const { dir, dispose } = tempTree(
    {
      "config/troupe.yaml":
        "defaultAgent: a\ndefaultModel: scripted\ntelemetry:\n  enabled: true\n  endpoint: http://127.0.0.1:9\n",
      "config/agents/a.yaml": "name: a\ndescription: A.\ntools: [read_file]\n",
    },
    { trusted: true },
  );
  cleanups.push(dispose);
  const run = await runTroupe(["run", "--local", "Hi"], {
    cwd: dir,
    env: { OPENAI_BASE_URL: model.baseURL, OPENAI_API_KEY: "" },
  });
  expect(run.code).toBe(0);
  expect(run.stdout).toContain("Done.");
  const said = run.stderr.split("\n").filter((line) => line.includes("telemetry"));
  expect(said).toHaveLength(1);
  expect(said[0]).toMatch(
    /telemetry: .*ECONNREFUSED 127\.0\.0\.1:9.*; the run goes on \(later failures are not said\)/,
  );
  expect(run.stderr).not.toMatch(/\n\s+at /);
});

it("a telemetry setting that is wrong is said where it is", async () => {
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": "defaultModel: scripted\ntelemetry:\n  enabled: true\n  protocol: carrier-pigeon\n",
    "config/agents/a.yaml": "name: a\ndescription: A.\ntools: [read_file]\n",
  });
  cleanups.push(dispose);
  const run = await runTroupe(["agents", "validate"], { cwd: dir, env: {} });
  expect(run.code).not.toBe(0);
  expect(run.stderr).toBe(
    'config/troupe.yaml:4:13: telemetry.protocol: must be one of "http/protobuf", "grpc"; got "carrier-pigeon"\n',
  );
});

it("troupe chat --local exports each turn of its run: a follow-up is a new stretch of the run's spans, in the same trace", async () => {
  const receiver = await OtlpReceiver.http();
  cleanups.push(() => receiver.close());
  const model = await ScriptedModelServer.start([
    { match: { lastUser: "first question" }, reply: { text: "First answer." } },
    { match: { lastUser: "second question" }, reply: { text: "Second answer." } },
  ]);
  cleanups.push(() => model.close());
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": `defaultAgent: coder\ndefaultModel: scripted\ntelemetry:\n  enabled: true\n  endpoint: ${receiver.url}\n`,
    "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [read_file]\n",
    "ws/README.md": "# a project\n",
  });
  cleanups.push(dispose);
  const env = {
    ...process.env,
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "",
    TROUPE_DATA_DIR: join(dir, ".data"),
  };
  const command = [
    process.execPath,
    TROUPE_BIN,
    "--config",
    join(dir, "config"),
    "chat",
    "--local",
    "-w",
    "ws",
  ];
  const tmux = Tmux.start(command, { cwd: dir, env, columns: 100, rows: 40 });
  cleanups.push(() => tmux.kill());
  await waitFor("the prompt", () => tmux.screen().includes("›"), 20_000);
  tmux.keys("first question", "Enter");
  await waitFor("the first turn", () => /✓ done · 1 turn/.test(tmux.history()), 20_000);
  tmux.keys("second question", "Enter");
  await waitFor("the second turn", () => /✓ done · 2 turns/.test(tmux.history()), 20_000);
  tmux.keys("C-d");
  // Leaving the chat sends what it holds.
  await waitFor(
    "both stretches",
    () => receiver.spans.filter((s) => s.name === "invoke_workflow coder").length === 2,
    15_000,
  );
  expect(new Set(receiver.spans.map((s) => s.traceId)).size).toBe(1);
  const agents = receiver.spans.filter((s) => s.name === "invoke_agent coder");
  expect(agents).toHaveLength(2);
  expect(agents[0]?.spanId).not.toBe(agents[1]?.spanId);
  expect(
    receiver.spans
      .filter((s) => s.name === "chat scripted")
      .map((s) => s.parentSpanId)
      .sort(),
  ).toEqual(agents.map((a) => a.spanId).sort());
  expect(agents[0]?.resource["troupe.role"]).toBe("local");
}, 60_000);
