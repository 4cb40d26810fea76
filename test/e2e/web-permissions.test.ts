import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, inject, it } from "vitest";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { removePrefix } from "../support/buses.js";
import { spawnTroupe, tempTree } from "../support/cli.js";
import { waitFor } from "../support/wait.js";

/* The web console shows the daemon's allow and deny rules as `troupe permissions` lists them. */

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it("the console's /api/permissions lists the rules of the daemon's troupe.yaml, deny first, where each is written", async () => {
  const url = inject("natsUrl");
  const prefix = uniquePrefix();
  cleanups.push(() => removePrefix(url, prefix));
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultAgent: worker\ndefaultModel: scripted\npermissions:\n  allow:\n    - shell(git status *)\n  deny: [shell(rm *)]\n`,
    "config/agents/worker.yaml": "name: worker\ndescription: Works.\ntools: [shell]\n",
  });
  cleanups.push(dispose);
  const data = join(dir, ".data");
  const env = {
    ...process.env,
    NATS_URL: url,
    OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
    OPENAI_API_KEY: "",
    TROUPE_DATA_DIR: data,
  };
  const daemon = spawnTroupe(["--config", join(dir, "config"), "daemon", "--web", "127.0.0.1:0"], {
    cwd: dir,
    env,
  });
  cleanups.push(() => void daemon.child.kill("SIGKILL"));
  await waitFor("the web console", () => daemon.stderr().includes("web console: "), 15_000);
  const login = readFileSync(join(data, "web-login"), "utf8").trim();
  const page = await (await fetch(login)).text();
  const session = /name="troupe-session" content="([^"]+)"/.exec(page)?.[1];
  expect(session).toBeDefined();
  const response = await fetch(`${new URL(login).origin}/api/permissions`, {
    headers: { authorization: `Bearer ${session}` },
  });
  expect(response.status).toBe(200);
  expect(await response.json()).toEqual([
    { kind: "deny", pattern: "shell(rm *)", where: "config/troupe.yaml:8" },
    { kind: "allow", pattern: "shell(git status *)", where: "config/troupe.yaml:7" },
  ]);
  daemon.child.kill("SIGTERM");
  await daemon.exit;
});
