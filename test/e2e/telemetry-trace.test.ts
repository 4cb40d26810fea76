import { afterEach, expect, it } from "vitest";
import type { Envelope } from "../../src/events/envelope.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, spawnTroupe } from "../support/cli.js";
import { OtlpReceiver, type ReceivedSpan } from "../support/otlp-receiver.js";
import { leadAndExplorers, SECRET, tracedProject, wholeTrace } from "../support/telemetry-project.js";
import { waitFor } from "../support/wait.js";

/*
 * One trace per run, across processes: the daemon on its default embedded (credentialed) server
 * hosts the lead, a `troupe worker` process hosts its two subagents, and both export to an OTLP
 * receiver that decodes what they send with the OpenTelemetry project's protobuf definitions.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
}, 30_000);

const byName = (spans: ReceivedSpan[], name: string) => spans.filter((s) => s.name === name);

function eventsOf(stdout: string): Envelope[] {
  return stdout
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Envelope);
}

it("a run with a lead and two subagents on a worker is one trace (the traced job's that asked for it), parented across the processes, with the GenAI attributes typed and the run's own token counts", async () => {
  const receiver = await OtlpReceiver.http();
  cleanups.push(() => receiver.close());
  const model = await ScriptedModelServer.start(leadAndExplorers(0));
  cleanups.push(() => model.close());
  const p = await tracedProject(model, receiver, cleanups);
  // The client is run inside a traced job (as a CI tool sets TRACEPARENT): the run is a part of it.
  const job = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", spanId: "00f067aa0ba902b7" };
  const run = await runTroupe([...p.cfg, "run", "--json", "--approval", "yolo", "Read the notes"], {
    cwd: p.dir,
    env: { ...p.env, TRACEPARENT: `00-${job.traceId}-${job.spanId}-01` },
  });
  expect(run.code).toBe(0);
  model.assertComplete();
  const events = eventsOf(run.stdout);
  const spans = await wholeTrace(receiver);

  // One trace, the job's; every span's parent is in it, but the root's, which is the job's span.
  expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set([job.traceId]));
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  expect(byId.size).toBe(spans.length);
  const [root] = byName(spans, "invoke_workflow lead");
  expect(root?.parentSpanId).toBe(job.spanId);
  for (const span of spans) if (span !== root) expect(byId.has(span.parentSpanId), span.name).toBe(true);

  // The lead under the run; each subagent under the tool call that spawned it, on the worker.
  const [lead] = byName(spans, "invoke_agent lead");
  expect(lead?.parentSpanId).toBe(root?.spanId);
  expect(lead?.resource["troupe.role"]).toBe("daemon");
  const calls = byName(spans, "execute_tool subagent_explorer");
  expect(calls).toHaveLength(2);
  for (const call of calls) {
    expect(call.parentSpanId).toBe(lead?.spanId);
    const child = byName(spans, "invoke_agent explorer").find((s) => s.parentSpanId === call.spanId);
    expect(child?.resource["troupe.role"]).toBe("worker");
    expect(child?.resource["process.pid"]).not.toBe(lead?.resource["process.pid"]);
    expect(child?.attributes["gen_ai.agent.id"]).toBe(call.attributes["troupe.subagent.id"]);
    // Its own calls are under it.
    const reads = spans.filter(
      (s) => s.name === "execute_tool read_file" && s.parentSpanId === child?.spanId,
    );
    expect(reads).toHaveLength(1);
    expect(reads[0]?.attributes["gen_ai.tool.call.id"]).toMatch(/\S/);
  }

  // The GenAI attributes, typed as the conventions say.
  const chats = spans.filter((s) => s.name === "chat scripted");
  expect(chats).toHaveLength(6);
  for (const chat of chats) {
    expect(chat.attributes["gen_ai.operation.name"]).toBe("chat");
    expect(chat.kinds).toMatchObject({
      "gen_ai.request.model": "stringValue",
      "gen_ai.response.model": "stringValue",
      "gen_ai.provider.name": "stringValue",
      "gen_ai.usage.input_tokens": "intValue",
      "gen_ai.usage.output_tokens": "intValue",
      "gen_ai.usage.cache_read.input_tokens": "intValue",
      "gen_ai.response.finish_reasons": "arrayValue",
    });
    expect(chat.attributes["gen_ai.provider.name"]).toBe("openai");
    expect(byId.get(chat.parentSpanId)?.name).toMatch(/^invoke_agent /);
  }
  expect(lead?.kinds["gen_ai.agent.name"]).toBe("stringValue");

  // Token counts: each agent's chat spans add up to what its agent.stopped says it used.
  for (const agentSpan of byName(spans, "invoke_agent lead").concat(byName(spans, "invoke_agent explorer"))) {
    const agentId = agentSpan.attributes["gen_ai.agent.id"] as string;
    const stopped = events.find((e) => e.type === "agent.stopped" && e.agentId === agentId)?.data as {
      usage: { inputTokens: number; outputTokens: number };
    };
    const own = chats.filter((c) => c.parentSpanId === agentSpan.spanId);
    const sum = (key: string) => own.reduce((total, c) => total + (c.attributes[key] as number), 0);
    expect(stopped.usage.inputTokens).toBeGreaterThan(0);
    expect(sum("gen_ai.usage.input_tokens")).toBe(stopped.usage.inputTokens);
    expect(sum("gen_ai.usage.output_tokens")).toBe(stopped.usage.outputTokens);
    expect(agentSpan.attributes["gen_ai.usage.input_tokens"]).toBe(stopped.usage.inputTokens);
  }
  const leadStop = events.filter((e) => e.type === "agent.stopped").at(-1)?.data as {
    total: { usage: { inputTokens: number } };
  };
  expect(root?.attributes["troupe.total.input_tokens"]).toBe(leadStop.total.usage.inputTokens);

  // Captured content is there, and redacted as the events are: the key never leaves as it is.
  const results = byName(spans, "execute_tool read_file").map((s) => s.attributes["gen_ai.tool.call.result"]);
  expect(results).toHaveLength(2);
  for (const result of results) {
    expect(result).toContain("the answer is 42");
    expect(result).toContain("[REDACTED");
  }
  expect(JSON.stringify(spans)).not.toContain(SECRET);
  const leadChats = chats.filter((c) => c.parentSpanId === lead?.spanId);
  expect(JSON.parse(leadChats[0]?.attributes["gen_ai.input.messages"] as string)).toEqual([
    { role: "user", parts: [{ type: "text", content: "Read the notes" }] },
  ]);
  expect(JSON.parse(leadChats[1]?.attributes["gen_ai.output.messages"] as string)).toEqual([
    { role: "assistant", parts: [{ type: "text", content: "The answer is 42." }], finish_reason: "stop" },
  ]);

  // The metrics came too: token usage by type, and the tool calls by outcome.
  await waitFor(
    "the token usage metric",
    () => receiver.metrics.some((m) => m.name === "gen_ai.client.token.usage"),
    10_000,
  );
  const usage = receiver.metrics.filter((m) => m.name === "gen_ai.client.token.usage");
  expect(usage.flatMap((m) => m.points.map((p) => p.attributes["gen_ai.token.type"]))).toEqual(
    expect.arrayContaining(["input", "output"]),
  );
}, 90_000);

it("kill -9 of the daemon while its lead waits on its subagents: one trace still, the lead's spans made whole by the daemon that resumed it, its resumed part linked to the calls it went on waiting for", async () => {
  const receiver = await OtlpReceiver.http();
  cleanups.push(() => receiver.close());
  const model = await ScriptedModelServer.start(leadAndExplorers(3000));
  cleanups.push(() => model.close());
  const p = await tracedProject(model, receiver, cleanups);
  const client = spawnTroupe([...p.cfg, "run", "--json", "--approval", "yolo", "Read the notes"], {
    cwd: p.dir,
    env: p.env,
  });
  cleanups.push(() => void client.child.kill("SIGKILL"));
  await waitFor(
    "both subagents spawned",
    () => client.stdout().split('"subagent.spawned"').length === 3,
    20_000,
  );
  // What the first daemon had ended and sent: the lead's first model call.
  await waitFor(
    "the lead's first chat span",
    () => receiver.spans.some((s) => s.name === "chat scripted"),
    10_000,
  );
  const firstPid = p.pid();
  p.kill();
  await p.start();
  expect(await client.exit).toBe(0);
  const spans = await wholeTrace(receiver);

  expect(new Set(spans.map((s) => s.traceId)).size).toBe(1);
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  expect(byId.size).toBe(spans.length);
  const [root] = byName(spans, "invoke_workflow lead");
  for (const span of spans) if (span !== root) expect(byId.has(span.parentSpanId), span.name).toBe(true);

  // The spans the killed daemon had open are made, once, by the one that went on.
  const leads = byName(spans, "invoke_agent lead");
  expect(leads).toHaveLength(1);
  expect(leads[0]?.resource["process.pid"]).toBe(p.pid());
  expect(leads[0]?.resource["process.pid"]).not.toBe(firstPid);
  const calls = byName(spans, "execute_tool subagent_explorer");
  expect(calls).toHaveLength(2);
  for (const call of calls) {
    expect(call.parentSpanId).toBe(leads[0]?.spanId);
    expect(byName(spans, "invoke_agent explorer").filter((s) => s.parentSpanId === call.spanId)).toHaveLength(
      1,
    );
  }
  // Its first model call was ended, and sent, by the first daemon.
  const [resume] = byName(spans, "resume_agent lead");
  const chatsUnder = (span: ReceivedSpan | undefined) =>
    spans.filter((s) => s.name === "chat scripted" && s.parentSpanId === span?.spanId);
  expect(chatsUnder(leads[0]).map((s) => s.resource["process.pid"])).toEqual([firstPid]);

  // The resumed part: a span under the lead, linked to the calls it went on waiting for; what the
  // lead did after it is under it.
  expect(resume?.parentSpanId).toBe(leads[0]?.spanId);
  expect(resume?.resource["process.pid"]).toBe(p.pid());
  expect(resume?.links.map((l) => l.spanId).sort()).toEqual(calls.map((c) => c.spanId).sort());
  const after = chatsUnder(resume);
  expect(after).toHaveLength(1);
  expect(after[0]?.attributes["gen_ai.response.finish_reasons"]).toEqual(["stop"]);
}, 120_000);
