import { afterEach, expect, it } from "vitest";
import { makeEnvelope } from "../../src/events/envelope.js";
import { runTroupe } from "../support/cli.js";
import { plainDaemon } from "../support/embedded-daemon.js";

/* ATTACK (observer seed): `runs.get` with a run id of 5,000 characters. The daemon looked it up in
 * KV as it was: the lookup's subject outgrew the server's control line, the server dropped the
 * daemon's connection at each request, and the API answered "no responders" to everyone for a
 * while after. Every id is now checked (its shape, at most 64 characters) before a subject or a key
 * is made of it: each such request gets one refusal, and the daemon's connection stays up. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

it("40 requests naming a 5,000-character run id are each refused, the daemon stays connected, and troupe status answers meanwhile; an unknown verb is named", async () => {
  const prefix = "ids";
  const h = await plainDaemon(prefix, cleanups);
  await h.start();
  const nc = await h.connectAs("observer", prefix);
  const runId = "r".repeat(5000);
  const ask = (verb: string) =>
    nc
      .request(
        `${prefix}.api.${verb}`,
        JSON.stringify(
          makeEnvelope({
            runId: "x",
            agentId: "cli",
            seq: 0,
            type: verb,
            data: verb === "runs.list" ? {} : { runId },
          }),
        ),
        { timeout: 5000 },
      )
      .then((reply) => reply.json<{ type: string; data: { message?: string } }>());
  const flood = Promise.all(Array.from({ length: 40 }, (_, i) => ask(i % 2 ? "runs.get" : "runs.list")));
  const status = await runTroupe([...h.cfg, "status", "--json"], { cwd: h.dir, env: h.env });
  const replies = await flood;
  expect(status.code, status.stderr).toBe(0);
  const refused = replies.filter((reply) => reply.type === "error");
  expect(refused).toHaveLength(20);
  expect(replies.filter((reply) => reply.type !== "error")).toHaveLength(20);
  expect(refused[0]?.data.message).toContain('a run id is at most 64 letters, digits, "_" or "-"');
  expect(h.stderr()).not.toMatch(/disconnect|control line/i);

  // A verb it does not know is told so, not met with "no responders" (which says no daemon runs).
  const client = await h.connectAs("client", prefix);
  const unknown = await client
    .request(
      `${prefix}.api.runs.delete`,
      JSON.stringify(makeEnvelope({ runId: "x", agentId: "cli", seq: 0, type: "runs.delete", data: {} })),
      { timeout: 5000 },
    )
    .then((reply) => reply.json<{ type: string; data: { message?: string } }>());
  expect(unknown.type).toBe("error");
  expect(unknown.data.message).toContain(
    'unknown API verb "runs.delete": this daemon answers runs.start, runs.list',
  );
}, 60_000);
