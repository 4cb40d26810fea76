import { mkdirSync, realpathSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { decodeEnvelope, encodeEnvelope, makeEnvelope } from "../../src/events/envelope.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, tempTree } from "../support/cli.js";
import { coderDaemon } from "../support/embedded-daemon.js";

/* ATTACK (outside review, client seed, from any host): runs.start's workspace check looked at the
 * disk first. A path that did not exist or was not a directory got "is not a directory on the
 * daemon's host", an existing directory outside the workspaces "is outside the daemon's
 * workspaces": the answers mapped the daemon host's disk (/root/.ssh, home dirs, checkouts). Now a
 * path outside is refused on the path as given, before anything is looked up, with one answer
 * whatever lies there; a link in a workspace that leads out gets that same answer. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

it("runs.start answers every workspace outside the daemon's the same, whether it exists, is a file, or is reached by a link", async () => {
  const model = await ScriptedModelServer.start([]);
  cleanups.push(() => model.close());
  const prefix = "wsoracle";
  const h = await coderDaemon(prefix, model.baseURL, cleanups);
  await h.start();
  const root = realpathSync(h.dir);
  const elsewhere = tempTree({ "secret/key.pem": "x", "notes.txt": "x" });
  cleanups.push(elsewhere.dispose);
  const away = realpathSync(elsewhere.dir);
  mkdirSync(join(h.dir, "proj"));
  symlinkSync(away, join(h.dir, "proj", "out"));

  const client = await h.connectAs("client", prefix);
  const start = async (workspace: string) => {
    const reply = decodeEnvelope(
      (
        await client.request(
          `${prefix}.api.runs.start`,
          encodeEnvelope(
            makeEnvelope({
              runId: "new",
              agentId: "cli",
              seq: 0,
              type: "runs.start",
              data: { task: "x", workspace },
            }),
          ),
          { timeout: 10_000 },
        )
      ).data,
    );
    expect(reply.type).toBe("error");
    return (reply.data as { message: string }).message;
  };
  const outside = (path: string) =>
    `workspace ${path} is outside the daemon's workspaces (${root}): add it to daemon.workspaces in its troupe.yaml`;

  for (const path of [
    join(away, "secret"), // a directory
    join(away, "notes.txt"), // a file
    join(away, "nothing-here"), // nothing
    join(away, "nothing", "deeper"),
    `${root}/../${away.split("/").at(-1)}/secret`, // out by ..
    join(root, "proj", "out", "secret"), // out by a link, to a directory
    join(root, "proj", "out", "notes.txt"), // to a file
    join(root, "proj", "out", "nothing-here"), // to nothing
    join(root, "proj", "out", "nothing", "deeper"),
  ])
    expect(await start(path)).toBe(outside(path));

  // Inside the workspaces (where a client's runs may work anyway), what is not a directory is said.
  expect(await start(join(root, "proj", "nothing-here"))).toBe(
    `workspace ${join(root, "proj", "nothing-here")} is not a directory on the daemon's host`,
  );

  // The same through troupe run -w: one line, exit 2.
  const run = await runTroupe([...h.cfg, "run", "-w", join(away, "nothing-here"), "x"], {
    cwd: h.dir,
    env: h.env,
  });
  expect(run.stderr).toBe(`troupe: ${outside(join(away, "nothing-here"))}\n`);
  expect(run.code).toBe(2);
  expect(model.requests).toHaveLength(0);
}, 60_000);
