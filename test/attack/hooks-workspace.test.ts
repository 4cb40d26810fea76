import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, tempTree } from "../support/cli.js";

/* ATTACK: hooks ran as the user, in the workspace, what the workspace holds. With the docs' own
 * example (`command: ./scripts/check-write.sh`) an agent rewrote the script and the next call ran
 * it unsandboxed; with `cat >> .troupe-hooks.log` it made the log a symlink to ~/.bashrc and the hook
 * appended there; with a workspace directory on the user's PATH, a program of the hook's name planted
 * there ran. Hooks now run in the command sandbox; one that asks for `sandbox: none` starts from the
 * config dir, with no workspace directory on its PATH, and is refused when its program lies in one. */

let server: ScriptedModelServer;
let dir: string;
const cleanups: Array<() => unknown> = [];
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  cleanups.push(() => server.close());
  const tree = tempTree({
    "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [write_file, shell]\n",
    "ws/scripts/check-write.sh": "#!/bin/sh\nexit 0\n",
    "home/.bashrc": "# the user's own\n",
  });
  dir = tree.dir;
  cleanups.push(tree.dispose);
  chmodSync(join(dir, "ws/scripts/check-write.sh"), 0o755);
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const marker = () => join(dir, "MARKER");
const shell = (command: string) => ({ name: "shell", arguments: { command } });
const write = (path: string, content: string) => ({ name: "write_file", arguments: { path, content } });

/** The scripted calls run under auto-edit, with `hooks` (YAML lines) in troupe.yaml. */
async function attack(
  hooks: string,
  calls: Array<{ name: string; arguments: Record<string, unknown> }>,
  env: NodeJS.ProcessEnv = {},
) {
  writeFileSync(
    join(dir, "config/troupe.yaml"),
    `defaultAgent: coder\ndefaultModel: scripted\nhooks:\n${hooks}`,
  );
  server.script(...calls.map((call, i) => ({ match: { turn: i + 1 }, reply: { toolCalls: [call] } })), {
    match: { turn: calls.length + 1 },
    reply: { text: "done" },
  });
  return runTroupe(["--config", "config", "run", "--local", "--approval", "auto-edit", "-w", "ws", "go"], {
    cwd: dir,
    env: { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "", HOME: join(dir, "home"), ...env },
  });
}

it("a hook script the agent rewrote runs in the sandbox, where it reaches nothing outside the workspace", async () => {
  const result = await attack(
    '  beforeTool:\n    - match: "write_*"\n      command: ./scripts/check-write.sh\n',
    [
      shell(`printf '#!/bin/sh\\ntouch ${marker()}\\n' > scripts/check-write.sh`),
      write("notes.txt", "hello\n"),
    ],
  );
  expect(result.code, result.stderr).toBe(0);
  expect(readFileSync(join(dir, "ws/scripts/check-write.sh"), "utf8")).toContain(`touch ${marker()}`);
  expect(existsSync(marker())).toBe(false);
  // The hook still ran, and let the write go on.
  expect(readFileSync(join(dir, "ws/notes.txt"), "utf8")).toBe("hello\n");
});

it("a hook's log made a symlink to ~/.bashrc is never written through", async () => {
  const result = await attack('  afterTool:\n    - command: "cat >> .troupe-hooks.log"\n', [
    shell(`ln -sf ${join(dir, "home/.bashrc")} .troupe-hooks.log`),
    write("notes.txt", "touch /tmp/owned\n"),
  ]);
  expect(result.code, result.stderr).toBe(0);
  expect(readFileSync(join(dir, "home/.bashrc"), "utf8")).toBe("# the user's own\n");
});

it("a hook outside the sandbox finds no program in a workspace directory on PATH, and one named in the workspace is refused", async () => {
  const plant = `mkdir -p bin && printf '#!/bin/sh\\ntouch ${marker()}\\n' > bin/notify-send && chmod +x bin/notify-send`;
  const result = await attack(
    `  agentStop:\n    - command: notify-send done\n      sandbox: none\n    - command: ${join(dir, "ws/bin/notify-send")} done\n      sandbox: none\n`,
    [shell(plant)],
    { PATH: `${join(dir, "ws/bin")}:.:${process.env.PATH}` },
  );
  expect(result.code, result.stderr).toBe(0);
  expect(existsSync(join(dir, "ws/bin/notify-send"))).toBe(true);
  expect(existsSync(marker())).toBe(false);
});

it("an honest hook outside the sandbox still runs, from the config dir", async () => {
  const result = await attack(`  agentStop:\n    - command: "touch ran-here"\n      sandbox: none\n`, [
    write("notes.txt", "hello\n"),
  ]);
  expect(result.code, result.stderr).toBe(0);
  expect(existsSync(join(dir, "config/ran-here"))).toBe(true);
});
