// answer-approval.mjs: node answer-approval.mjs RUN_ID AGENT_ID CALL_ID allow|deny [REASON]: answers a pending approval, signed with the key APPROVER_KEY names.
import { createHash, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { fromSeed } from "@nats-io/nkeys";
import { connect, nkeyAuthenticator } from "@nats-io/transport-node";

const { NATS_URL, TROUPE_PREFIX: p = "troupe", NATS_SEED, NATS_CA, APPROVER_KEY } = process.env;
const [runId, agentId, callId, decision, reason] = process.argv.slice(2);
const seed = NATS_SEED && new TextEncoder().encode(NATS_SEED.trim());
const nc = await connect({
  servers: NATS_URL,
  ...(seed && { authenticator: nkeyAuthenticator(seed), inboxPrefix: `_INBOX_${p}.approver` }),
  ...(NATS_CA && { tls: { caFile: NATS_CA } }),
});
const jsm = await jetstreamManager(nc, { checkAPI: false, ...(seed && { apiPrefix: `$JS.${p}_hosts.API` }) });

// The request record, as its host wrote it under <runId>.<agentId>.<call key>.
const callKey = /^[-_A-Za-z0-9]{1,64}$/.test(callId)
  ? callId
  : `=${createHash("sha256").update(callId).digest("base64url")}`;
const approval = `${runId}.${agentId}.${callKey}`;
const read = async () =>
  (
    await jsm.streams.getMessage(`KV_${p}_approvals`, { last_by_subj: `$KV.${p}_approvals.${approval}` })
  ).json();
const record = await read();
const { request: r, nonce, createdAt, requestId } = record;
// Its digest is of what it shows: sign only a request you have checked.
const facts = [
  "troupe-approval-request/v1",
  r.runId,
  r.agentId,
  r.callId,
  r.tool,
  r.arguments,
  r.effect,
  r.detail,
];
facts.push(r.paths, nonce, createdAt, ...(r.escalation === undefined ? [] : [{ escalation: r.escalation }]));
if (createHash("sha256").update(JSON.stringify(facts)).digest("base64url") !== requestId)
  throw new Error(`${approval}: the record's digest is not of what it says`);
if (record.status !== "pending") throw new Error(`${approval} is ${record.status} already`);
console.error(`${r.tool} (${r.effect}): ${r.detail}`);

const pair = fromSeed(new TextEncoder().encode(readFileSync(APPROVER_KEY, "utf8").trim()));
const content = {
  v: 1,
  answerId: randomUUID().replaceAll("-", ""),
  runId,
  callId,
  requestId,
  decision,
  reason, // absent when undefined: JSON leaves it out
  time: Date.now(),
  name: basename(APPROVER_KEY, ".nk"),
  publicKey: pair.getPublicKey(),
  via: "answer-approval.mjs",
};
// The signed bytes: this array, as JSON, in this order; an absent reason or via is null.
const signed = JSON.stringify([
  "troupe-approval-answer/v1",
  content.v,
  content.answerId,
  content.runId,
  content.callId,
  content.requestId,
  content.decision,
  content.reason ?? null,
  content.time,
  content.name,
  content.publicKey,
  content.via ?? null,
]);
const signature = Buffer.from(pair.sign(new TextEncoder().encode(signed))).toString("base64");
// Written blind, as a new key: <approval key>.<requestId>.<answerId>.
await jetstream(nc).publish(
  `$KV.${p}_answers.${approval}.${requestId}.${content.answerId}`,
  JSON.stringify({ content, signature }),
  { expect: { lastSubjectSequence: 0 } },
);

// What the host made of it, within 10 s: the record decided by it, or its refusal.
let outcome = "sent: no host has acted on it yet";
for (let tries = 0; tries < 50 && outcome.startsWith("sent"); tries++) {
  await new Promise((resolve) => setTimeout(resolve, 200));
  const now = await read();
  const refused = now.rejected?.find((x) => x.answerId === content.answerId);
  const mine = now.answer?.content.answerId === content.answerId;
  if (refused) outcome = `refused: ${refused.why}`;
  else if (now.status !== "pending") outcome = `${mine ? "" : "already "}${now.status} by ${now.by}`;
}
console.log(outcome);
process.exitCode = outcome.startsWith("approved") || outcome.startsWith("denied") ? 0 : 1;
await nc.close();
