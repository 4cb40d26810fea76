import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { inject } from "vitest";
import { answersNats, freePort } from "../../src/bus/embedded-nats.js";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { ScriptedModelServer, type ScriptRule } from "../../src/testing/scripted-model-server.js";
import { removePrefix } from "./buses.js";
import { tempTree } from "./cli.js";
import type { daemonProcesses } from "./daemon-process.js";
import { waitFor } from "./wait.js";

/** Stops the nats-server a daemon of this data dir started, by the pid it recorded. */
async function stopEmbeddedServer(dataDir: string): Promise<void> {
  const record = join(dataDir, "nats", "server.json");
  if (!existsSync(record)) return;
  const { pid, port } = JSON.parse(readFileSync(record, "utf8")) as { pid: number; port: number };
  process.kill(pid, "SIGKILL");
  await waitFor("its nats-server gone", async () => !(await answersNats("127.0.0.1", port)), 5000);
}

/** A script's match for the turn of the agent named in its system prompt. */
export const as = (name: string, turn: number) => ({ system: `"${name}"`, turn });

/**
 * Makes consoleDaemon for a test file: a daemon serving the console on a free port, its project, and
 * the login URL it keeps in its data dir. The lead asks two scouts to read the notes, then writes
 * (`script` and `files` replace the model's script and add to the project).
 */
export function consoleDaemons({
  cleanups,
  follow,
}: Pick<ReturnType<typeof daemonProcesses>, "cleanups" | "follow">) {
  return async function consoleDaemon(
    web: { flag?: string; yaml?: string } = { flag: "127.0.0.1:0" },
    {
      embedded = false,
      script,
      files = {},
    }: { embedded?: boolean; script?: ScriptRule[]; files?: Record<string, string> } = {},
  ) {
    // Embedded: nothing answers at the URL, so the daemon starts its own server, with a user per role,
    // as it does for a user who sets nothing.
    const url = embedded ? `nats://127.0.0.1:${await freePort()}` : inject("natsUrl");
    const prefix = uniquePrefix();
    if (!embedded) cleanups.push(() => removePrefix(url, prefix));
    const model = await ScriptedModelServer.start(
      script ?? [
        {
          match: as("lead", 1),
          reply: {
            toolCalls: [
              { name: "subagent_scout", arguments: { task: "Read the notes" } },
              { name: "subagent_scout", arguments: { task: "Read the notes again" } },
            ],
          },
        },
        {
          match: as("scout", 1),
          reply: { toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }], delayMs: 700 },
          times: 2,
        },
        { match: as("scout", 2), reply: { text: "The notes say hello.", delayMs: 700 }, times: 2 },
        {
          match: as("lead", 2),
          reply: {
            toolCalls: [{ name: "write_file", arguments: { path: "out.txt", content: "written once\n" } }],
          },
        },
        { match: as("lead", 3), reply: { text: "All done." } },
      ],
    );
    cleanups.push(() => model.close());
    const { dir, dispose } = tempTree({
      "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultAgent: lead\ndefaultModel: scripted\n${web.yaml ?? ""}`,
      "config/agents/lead.yaml": "name: lead\ndescription: Leads.\ntools: [write_file]\nsubagents: [scout]\n",
      "config/agents/scout.yaml": "name: scout\ndescription: Scouts.\ntools: [read_file]\n",
      "notes.txt": "hello\n",
      ...files,
    });
    cleanups.push(dispose);
    const env = {
      NATS_URL: url,
      OPENAI_BASE_URL: model.baseURL,
      OPENAI_API_KEY: "",
      TROUPE_DATA_DIR: join(dir, ".data"),
    };
    const flag = web.flag === undefined ? [] : ["--web", web.flag];
    // After the daemon's SIGKILL (cleanups run last first): its server outlives a killed daemon.
    if (embedded) cleanups.push(() => stopEmbeddedServer(env.TROUPE_DATA_DIR));
    const daemon = follow(["--config", join(dir, "config"), "daemon", ...flag], dir, env);
    await waitFor("the web console", () => daemon.stderr().includes("web console: "), 15_000);
    // Not on a terminal: the login is in the data dir, where troupe web reads it, not on stderr.
    const login = readFileSync(join(env.TROUPE_DATA_DIR, "web-login"), "utf8").trim();
    return {
      stderr: daemon.stderr,
      dir,
      env,
      prefix,
      login,
      origin: new URL(login).origin,
      config: ["--config", join(dir, "config")],
    };
  };
}
