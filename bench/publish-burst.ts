/**
 * A process of its own that publishes events on their run's subjects as fast as NATS takes them,
 * without waiting for the log's acks (the stream stores each all the same): what an observer at the
 * log's end is measured against when the appends, acked one by one, are not the limit. Run as
 * `node publish-burst.js URL PREFIX RUNS PER_RUN`; prints `{"published": events per second}`.
 */
import { connect } from "@nats-io/transport-node";
import { subjects } from "../src/bus/subjects.js";
import { encodeEnvelope } from "../src/events/envelope.js";
import { floodEvents } from "./flood.js";

const [url, prefix, runs, perRun] = process.argv.slice(2) as [string, string, string, string];
const names = subjects(prefix);
const events = floodEvents(Number(runs), Number(perRun), "run-burst");
const encoded = events.map((event) => ({
  subject: names.event(event.runId, event.agentId, event.type),
  bytes: encodeEnvelope(event),
}));
const nc = await connect({ servers: url });
const started = performance.now();
for (let i = 0; i < encoded.length; i++) {
  const { subject, bytes } = encoded[i] as { subject: string; bytes: Uint8Array };
  nc.publish(subject, bytes);
  if (i % 1000 === 999) await nc.flush();
}
await nc.flush();
process.stdout.write(
  `${JSON.stringify({ published: encoded.length / ((performance.now() - started) / 1000) })}\n`,
);
await nc.close();
