import { expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import { watchDaemon } from "../../src/cli/daemon-contact.js";
import { makeEnvelope } from "../../src/events/envelope.js";

/* Outside review J (a client's seed): the daemon's answer to a request whose reply subject was the
 * beat's reached every person as a beat, from a daemon "just started". Only a beat is one. */
it("takes only the daemon's beats for beats: an API's answer sent onto the beat subject starts no daemon", async () => {
  const bus = new LocalBus({ prefix: "beat" });
  let started = 0;
  const watch = watchDaemon(bus, { started: () => started++ });
  const send = (type: string, data: unknown) =>
    bus.publish(
      bus.subjects.daemonBeat(),
      makeEnvelope({ runId: "daemon", agentId: "daemon", seq: 0, type, data }),
    );
  send("daemon.beat", { pid: 7, since: 1 });
  send("runs.list.reply", { runs: [] });
  send("error", { name: "RequestRefusedError", message: "no" });
  send("daemon.beat", { pid: "x", since: 2 });
  await bus.flush();
  expect(started).toBe(0);
  send("daemon.beat", { pid: 8, since: 3 });
  await bus.flush();
  expect(started).toBe(1);
  watch.stop();
  await bus.close();
});

/* A client that asked a daemon and began watching its beat before hearing one: when that daemon
 * goes and another comes before the first beat, the first beat heard is the new daemon's. */
it("takes a first beat from a daemon that started after the watch began for a daemon started meanwhile", async () => {
  const bus = new LocalBus({ prefix: "beat-first" });
  let started = 0;
  const watch = watchDaemon(bus, { started: () => started++ });
  const beat = (pid: number, since: number) =>
    bus.publish(
      bus.subjects.daemonBeat(),
      makeEnvelope({ runId: "daemon", agentId: "daemon", seq: 0, type: "daemon.beat", data: { pid, since } }),
    );
  beat(7, Date.now() + 1000);
  await bus.flush();
  expect(started).toBe(1);
  watch.stop();

  // One that was already beating when the watch began is the daemon the client asked.
  let again = 0;
  const second = watchDaemon(bus, { started: () => again++ });
  beat(9, Date.now() - 60_000);
  await bus.flush();
  expect(again).toBe(0);
  second.stop();
  await bus.close();
});
