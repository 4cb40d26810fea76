import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import { afterEach, beforeEach, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import { createLogger } from "../../src/log.js";
import { Redactor } from "../../src/safety/redact.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { natsBus } from "../support/buses.js";
import { canaryPieces } from "../support/canary.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { collect } from "../support/wait.js";

const CANARY = `canary-${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
const ENV_NAME = "CANARY_SERVICE_TOKEN";

let server: ScriptedModelServer;
let workspace: string;
let dispose: () => void;
let previous: string | undefined;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir: workspace, dispose } = tempTree({}));
  writeFileSync(join(workspace, ".env"), `${ENV_NAME}=${CANARY}\nNOTE=the token is ${CANARY}\n`);
  previous = process.env[ENV_NAME];
  process.env[ENV_NAME] = CANARY;
});
afterEach(async () => {
  await server.close();
  dispose();
  if (previous === undefined) delete process.env[ENV_NAME];
  else process.env[ENV_NAME] = previous;
});

it("keeps a planted secret off the bus, out of the logs, out of stored state and away from the model", async () => {
  server.script(
    {
      match: { turn: 1 },
      reply: {
        toolCalls: [
          { name: "shell", arguments: { command: "env" } },
          { name: "shell", arguments: { command: "cat .env" } },
          { name: "read_file", arguments: { path: ".env" } },
        ],
      },
    },
    // A model that repeats a secret it saw (say, in the task) in its answer.
    { match: { turn: 2 }, reply: { text: `I looked at the environment; the token was ${CANARY}.` } },
  );
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _e, done) {
      lines.push(String(chunk));
      done();
    },
  });
  const redactor = Redactor.fromEnv(process.env);
  const log = createLogger({
    level: "trace",
    destination: sink,
    pretty: false,
    redact: (line) => redactor.redact(line),
  });
  // The shell passes the variable on (as a user may configure), so `env` prints it.
  const config = testConfig(
    {
      defaultModel: "scripted",
      shell: { env: [ENV_NAME] },
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    [{ name: "worker", description: "Works.", tools: ["shell", "read_file"] }],
  );
  const runtime = await new Runtime({ config, workspace, env: process.env, log }).open();
  const handle = runtime.start({ task: "Show me the environment and the .env file.", approval: "yolo" });
  const output = await handle.done;
  expect(output).toMatchObject({ reason: "done", toolCalls: 3 });

  const events = JSON.stringify(await collect(runtime.bus.eventLog.read({ runId: handle.runId })));
  const state = JSON.stringify(handle.snapshot());
  const requests = JSON.stringify(server.requests.map((r) => r.body));
  // The tools really did see it: the outputs went through redaction.
  expect(requests).toContain(`${ENV_NAME}=[REDACTED]`);
  expect(requests).toContain("the token is [REDACTED]");
  expect(lines.join("").length).toBeGreaterThan(0);
  expect(events).toContain("the token was [REDACTED]");
  for (const [where, text] of [
    ["the bus", events],
    ["the logs", lines.join("")],
    ["stored state", state],
    ["the model's requests", requests],
  ] as const) {
    expect(text.includes(CANARY), `the canary reached ${where}`).toBe(false);
  }
  await runtime.close();
});

it("on NATS, as the daemon hosts it: a canary in its environment and beside the workspace stays out, whatever the command does to it", async () => {
  // A name no redactor knows, and a file outside the workspace: only the sandbox keeps them in.
  const envCanary = `plain${CANARY.slice(7)}`;
  const fileCanary = `beside${CANARY.slice(7)}`;
  process.env.BUILD_LABEL = envCanary;
  const ws = join(workspace, "ws");
  mkdirSync(ws);
  writeFileSync(join(workspace, "beside.txt"), `${fileCanary}\n`);
  const transforms = [
    "tr '\\0' '\\n' < /proc/$PPID/environ | tr a-zA-Z n-za-mN-ZA-M",
    "tr '\\0' '\\n' < /proc/1/environ | rev",
    "env | grep -i build; cat /proc/*/environ | tr '\\0' '\\n'",
    "rev ../beside.txt; tr a-z n-za-m < ../beside.txt; cut -c3- ../beside.txt",
    `cat ${join(workspace, "beside.txt")} | od -An -c`,
  ];
  server.script(
    {
      match: { turn: 1 },
      reply: { toolCalls: transforms.map((command) => ({ name: "shell", arguments: { command } })) },
    },
    { match: { turn: 2 }, reply: { text: "looked" } },
  );
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _e, done) {
      lines.push(String(chunk));
      done();
    },
  });
  const log = createLogger({ level: "trace", destination: sink, pretty: false });
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    [{ name: "worker", description: "Works.", tools: ["shell"] }],
  );
  const under = await natsBus();
  try {
    const runtime = await new Runtime({
      config,
      workspace: ws,
      env: process.env,
      log,
      bus: under.bus,
    }).open();
    const handle = runtime.start({ task: "Look around.", approval: "auto-edit" });
    expect(await handle.done).toMatchObject({ reason: "done", toolCalls: transforms.length });
    const events = JSON.stringify(await collect(runtime.bus.eventLog.read({ runId: handle.runId })));
    const stored = JSON.stringify(
      await (await runtime.bus.kv("snapshots")).get(`${handle.runId}.${handle.agentId}`),
    );
    const requests = JSON.stringify(server.requests.map((r) => r.body));
    // The commands ran (in the sandbox) and their output is there: the search below is not vacuous.
    expect(requests).toContain("No such file or directory");
    expect(stored).toContain("tr a-zA-Z n-za-mN-ZA-M");
    for (const [where, text] of [
      ["the bus", events],
      ["the logs", lines.join("")],
      ["stored state", stored],
      ["the model's requests", requests],
    ] as const) {
      const flat = text.replace(/\s|\\[nt]/g, "");
      for (const piece of [...canaryPieces(envCanary), ...canaryPieces(fileCanary)])
        expect(flat.includes(piece), `${piece} reached ${where}`).toBe(false);
    }
    await runtime.close();
  } finally {
    delete process.env.BUILD_LABEL;
    await under.dispose();
  }
});
