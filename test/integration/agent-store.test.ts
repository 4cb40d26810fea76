import { describe, expect, it } from "vitest";
import { AGENT_RECORD_VERSION, type AgentRecord, AgentStore } from "../../src/actors/agent-store.js";
import type { Bus, KvStore } from "../../src/bus/bus.js";
import { memoryLogger } from "../../src/log.js";
import { AGENT_MACHINE_VERSION } from "../../src/machines/agent-machine.js";
import { bothBuses, busPerTest } from "../support/buses.js";

const record = (state: string, done = false): AgentRecord => ({
  v: AGENT_RECORD_VERSION,
  machineVersion: AGENT_MACHINE_VERSION,
  runId: "run-1",
  agentId: "agent-a",
  name: "a",
  depth: 0,
  task: "t",
  budget: {},
  nextSeq: 0,
  elapsedMs: 0,
  snapshot: { value: state },
  done,
});

const bound = (target: object, key: string | symbol) => {
  const value = Reflect.get(target, key);
  return typeof value === "function" ? value.bind(target) : value;
};

/** The bus with its `snapshots` bucket counting the puts made to it. */
function counting(bus: Bus): { bus: Bus; puts: () => number } {
  let puts = 0;
  const kv = async (name: string): Promise<KvStore> => {
    const inner = await bus.kv(name);
    return new Proxy(inner, {
      get: (target, key) =>
        key === "put"
          ? (...args: Parameters<KvStore["put"]>) => {
              puts++;
              return target.put(...args);
            }
          : bound(target, key),
    });
  };
  return { bus: new Proxy(bus, { get: (t, k) => (k === "kv" ? kv : bound(t, k)) }), puts: () => puts };
}

describe.each(bothBuses)("agent snapshots on $name", ({ open }) => {
  const under = busPerTest(() => open());

  it("writes one record at a time, and only the latest of those saved meanwhile", async () => {
    const { bus, puts } = counting(under().bus);
    const store = await AgentStore.open(bus, memoryLogger().log);
    let taken = 0;
    const saved = ["callingModel", "executingTools", "awaitingApproval", "callingModel"].map((state) =>
      store.save("run-1", "agent-a", async () => {
        taken++;
        return record(state);
      }),
    );
    await Promise.all(saved);
    // The first is taken and written at once; the two in between are replaced by the last, never taken.
    expect(taken).toBe(2);
    expect(puts()).toBe(2);
    const loaded = await store.load("run-1", "agent-a");
    expect(loaded?.snapshot).toEqual({ value: "callingModel" });
    await store.save("run-1", "agent-a", async () => record("executingTools"));
    expect(puts()).toBe(3);
    // A save with nothing to write (the agent went to another host) writes nothing.
    await store.save("run-1", "agent-a", async () => undefined);
    expect(puts()).toBe(3);
  });

  it("refuses a host that lost the agent to another, and lets a loaded stopped agent be written again", async () => {
    const memory = memoryLogger();
    const first = await AgentStore.open(under().bus, memory.log);
    await first.save("run-1", "agent-a", async () => record("callingModel"));
    const second = await AgentStore.open(under().bus, memoryLogger().log);
    await second.load("run-1", "agent-a");
    await second.save("run-1", "agent-a", async () => record("executingTools"));
    await first.save("run-1", "agent-a", async () => record("stopped-by-the-old-host"));
    expect(memory.records.some((r) => String(r.msg).includes("another host has moved this agent on"))).toBe(
      true,
    );
    expect((await second.load("run-1", "agent-a"))?.snapshot).toEqual({ value: "executingTools" });
    await second.save("run-1", "agent-a", async () => record("stopped", true));
    await second.load("run-1", "agent-a");
    await second.save("run-1", "agent-a", async () => record("callingModel"));
    expect((await first.load("run-1", "agent-a"))?.snapshot).toEqual({ value: "callingModel" });
  });

  it("writes over something that is no record of the agent (put there by the server for a reader), and keeps saving", async () => {
    const memory = memoryLogger();
    const store = await AgentStore.open(under().bus, memory.log);
    await store.save("run-1", "agent-a", async () => record("callingModel"));
    // What a reader can have the server write over the key: a stream API response, not a record.
    await (await under().bus.kv("snapshots")).put("run-1.agent-a", {
      type: "io.nats.jetstream.api.v1.stream_msg_get_response",
    });
    await store.save("run-1", "agent-a", async () => record("executingTools"));
    expect(memory.records.some((r) => String(r.msg).includes("written over"))).toBe(true);
    expect((await store.load("run-1", "agent-a"))?.snapshot).toEqual({ value: "executingTools" });
  });

  it("keeps an agent whose write timed out but was stored: the next write goes on from it", async () => {
    const memory = memoryLogger();
    // The bucket stores the first put, then answers it with a timeout, as a busy host's put can end.
    let dropped = 0;
    const kv = async (name: string): Promise<KvStore> => {
      const inner = await under().bus.kv(name);
      return new Proxy(inner, {
        get: (target, key) =>
          key === "put"
            ? async (...args: Parameters<KvStore["put"]>) => {
                const revision = await target.put(...args);
                if (dropped++ === 1) throw new Error("timeout");
                return revision;
              }
            : bound(target, key),
      });
    };
    const bus = new Proxy(under().bus, { get: (t, k) => (k === "kv" ? kv : bound(t, k)) });
    const store = await AgentStore.open(bus, memory.log);
    expect(await store.save("run-1", "agent-a", async () => record("callingModel"))).toBe(true);
    await store.save("run-1", "agent-a", async () => record("executingTools"));
    expect(await store.save("run-1", "agent-a", async () => record("callingModel again"))).toBe(true);
    await store.settled("run-1", "agent-a");
    expect((await store.load("run-1", "agent-a"))?.snapshot).toEqual({ value: "callingModel again" });
    expect(memory.records.some((r) => String(r.msg).includes("another host has moved this agent on"))).toBe(
      false,
    );
  });
});
