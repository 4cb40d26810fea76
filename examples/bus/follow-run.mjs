// follow-run.mjs: node follow-run.mjs RUN_ID: the run's events, stored and to come, a JSON line each, until its first agent stops.
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, nkeyAuthenticator } from "@nats-io/transport-node";

const { NATS_URL, TROUPE_PREFIX: p = "troupe", NATS_SEED, NATS_CA, NATS_ROLE = "client" } = process.env;
const [runId] = process.argv.slice(2);
const seed = NATS_SEED && new TextEncoder().encode(NATS_SEED.trim());
const nc = await connect({
  servers: NATS_URL,
  ...(seed && { authenticator: nkeyAuthenticator(seed), inboxPrefix: `_INBOX_${p}.${NATS_ROLE}` }),
  ...(NATS_CA && { tls: { caFile: NATS_CA } }),
});
// Subscribed first, so nothing published while the stored events are read is missed.
const live = nc.subscribe(`${p}.evt.${runId}.>`);
const seen = new Set();
const show = (event) => {
  if (seen.has(event.id)) return false;
  seen.add(event.id);
  console.log(JSON.stringify(event));
  // The run's first agent has no parent; its last event ends the run.
  return event.type === "agent.stopped" && event.parentId === undefined;
};
// A person's account reads the hosts' stream by gets, under their API prefix (no consumers).
const jsm = await jetstreamManager(nc, { checkAPI: false, ...(seed && { apiPrefix: `$JS.${p}_hosts.API` }) });
const stream = `${p.toUpperCase().replaceAll("-", "_")}_EVENTS`;
const NO_MESSAGE = 10037;
let done = false;
for (let seq = 1; !done; ) {
  const msg = await jsm.streams
    .getMessage(stream, { seq, next_by_subj: `${p}.evt.${runId}.>` })
    .catch((e) => (e.api_error?.err_code === NO_MESSAGE ? null : Promise.reject(e)));
  if (!msg) break;
  done = show(msg.json());
  seq = msg.seq + 1;
}
if (!done) for await (const msg of live) if (show(msg.json())) break;
await nc.close();
