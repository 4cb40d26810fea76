import { JetStreamApiError } from "@nats-io/jetstream";
import { describe, expect, it } from "vitest";
import type { Bus } from "../../src/bus/bus.js";
import { followRun } from "../../src/bus/follow-run.js";
import { type Envelope, makeEnvelope } from "../../src/events/envelope.js";
import { bothBuses, busPerTest } from "../support/buses.js";

const usage = { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, costUsd: 0 };
const stopped = { reason: "done", result: "", usage, turns: 0, toolCalls: 0, total: { usage, toolCalls: 0 } };
const event = (agentId: string, seq: number, type = "test.event") =>
  makeEnvelope({ runId: "run-f", agentId, seq, type, data: type === "agent.stopped" ? stopped : { seq } });

/** Follows run-f until `agentId` says agent.stopped; resolves with every envelope seen. */
function follow(bus: Bus, quietMs?: number): { seen: Envelope[]; done: Promise<Envelope[]> } {
  const seen: Envelope[] = [];
  const done = (async () => {
    for await (const envelope of followRun(bus, "run-f", quietMs === undefined ? {} : { quietMs })) {
      seen.push(envelope);
      if (envelope.type === "agent.stopped" && envelope.agentId === "root") break;
    }
    return seen;
  })();
  return { seen, done };
}

const order = (envelopes: Envelope[]) => envelopes.map((e) => `${e.agentId}:${e.seq}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(bothBuses)("following a run on $name", ({ open }) => {
  const under = busPerTest(() => open());

  it("yields every event once, in order, retried appends included", async () => {
    const { bus } = under();
    const following = follow(bus);
    await sleep(50);
    await bus.eventLog.append(event("root", 0));
    const retried = event("child", 0);
    await bus.eventLog.appendAll([retried, event("child", 1)]);
    await bus.eventLog.append(retried); // a retry: subscribers may see it again
    await bus.eventLog.appendAll([event("root", 1), event("root", 2, "agent.stopped")]);
    expect(order(await following.done)).toEqual(["root:0", "child:0", "child:1", "root:1", "root:2"]);
  });

  it("reads the log when it joined late: what came before is replayed, nothing twice", async () => {
    const { bus } = under();
    await bus.eventLog.appendAll([event("root", 0), event("root", 1)]);
    const following = follow(bus);
    await sleep(50);
    await bus.eventLog.append(event("root", 2));
    await bus.eventLog.append(event("root", 3, "agent.stopped"));
    expect(order(await following.done)).toEqual(["root:0", "root:1", "root:2", "root:3"]);
  });

  it("takes an event the log holds after later ones of its agent (an append retried), once", async () => {
    const { bus } = under();
    const late = event("root", 1);
    await bus.eventLog.appendAll([event("root", 0), event("root", 2)]);
    await bus.eventLog.append(late);
    const following = follow(bus);
    await sleep(50);
    await bus.eventLog.append(late); // retried once more: stored once, maybe seen again live
    await bus.eventLog.append(event("root", 3, "agent.stopped"));
    expect(order(await following.done).sort()).toEqual(["root:0", "root:1", "root:2", "root:3"]);
  });

  it("goes on from the log after a quiet spell", async () => {
    const { bus } = under();
    const following = follow(bus, 100);
    await sleep(50);
    await bus.eventLog.append(event("root", 0));
    await sleep(400); // quiet: the log takes over
    await bus.eventLog.append(event("root", 1));
    await bus.eventLog.append(event("root", 2, "agent.stopped"));
    expect(order(await following.done)).toEqual(["root:0", "root:1", "root:2"]);
  });

  it("reads the log again when JetStream answers it is temporarily unavailable (a cluster node coming back)", async () => {
    const { bus } = under();
    const flaky = refusingOneRead(bus, new JetStreamApiError(UNAVAILABLE));
    const seen: Envelope[] = [];
    const done = (async () => {
      for await (const envelope of followRun(flaky, "run-f", { quietMs: 100 })) {
        seen.push(envelope);
        if (envelope.type === "agent.stopped") break;
      }
    })();
    await sleep(50);
    await bus.eventLog.append(event("root", 0));
    await sleep(400); // quiet: the log takes over, and its first read is refused
    await bus.eventLog.append(event("root", 1));
    await bus.eventLog.append(event("root", 2, "agent.stopped"));
    await done;
    expect(order(seen)).toEqual(["root:0", "root:1", "root:2"]);
  });
});

/** What JetStream answers while a stream of a cluster has no leader (code 503, 10008). */
const UNAVAILABLE = { code: 503, err_code: 10008, description: "JetStream system temporarily unavailable" };

/** The bus, but the first read of its event log fails with `error`, as a JetStream API call would. */
function refusingOneRead(bus: Bus, error: Error): Bus {
  let refused = false;
  const bound = <T extends object>(target: T, key: string | symbol) => {
    const value = Reflect.get(target, key);
    return typeof value === "function" ? value.bind(target) : value;
  };
  const eventLog = new Proxy(bus.eventLog, {
    get: (target, key) =>
      key === "read"
        ? (options: Parameters<Bus["eventLog"]["read"]>[0]) => {
            if (refused) return target.read(options);
            refused = true;
            return (async function* () {
              yield* [];
              throw error;
            })();
          }
        : bound(target, key),
  });
  return new Proxy(bus, { get: (target, key) => (key === "eventLog" ? eventLog : bound(target, key)) });
}
