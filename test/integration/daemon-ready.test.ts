import { afterEach, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import { Daemon } from "../../src/daemon/daemon.js";
import { makeEnvelope } from "../../src/events/envelope.js";
import { silentLogger } from "../../src/log.js";
import { type BusUnderTest, natsBus } from "../support/buses.js";
import { testConfig } from "../support/config.js";

const opened: BusUnderTest[] = [];
afterEach(async () => {
  for (const under of opened.splice(0)) await under.dispose();
});

it("answers its API from another connection as soon as start() resolves", async () => {
  // The race this guards: the API subscriptions must be on the server before the daemon says it is ready.
  for (let i = 0; i < 10; i++) {
    const daemonSide = await natsBus();
    opened.push(daemonSide);
    const client = await natsBus({ prefix: daemonSide.bus.subjects.prefix });
    opened.push(client);
    const config = testConfig({ nats: { prefix: daemonSide.bus.subjects.prefix } }, [
      { name: "worker", description: "Works." },
    ]);
    const runtime = await new Runtime({
      config,
      bus: daemonSide.bus,
      workspace: process.cwd(),
      env: {},
    }).open();
    const daemon = new Daemon(runtime, silentLogger);
    await daemon.start();
    const reply = await client.bus.request(
      client.bus.subjects.api("agents.list"),
      makeEnvelope({ runId: "x", agentId: "test", seq: 0, type: "agents.list", data: {} }),
    );
    expect(reply.data).toMatchObject({ agents: [{ name: "worker" }] });
    await daemon.stop();
    await runtime.close();
  }
});
