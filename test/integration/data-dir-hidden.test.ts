import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { ensureRoleCredentials, roleSeedFile } from "../../src/trust/role-credentials.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";

/*
 * The data dir inside the workspace (a workspace at $HOME holds ~/.local/share/troupe): the
 * in-process file tools neither read nor change the role seeds and approver keys kept there.
 */
let server: ScriptedModelServer;
let ws: string;
let dispose: () => void;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({ "notes.txt": "project notes\n" }));
});
afterEach(async () => {
  await server.close();
  dispose();
});

it("read, list, search and write tools refuse or skip troupe's data dir when it is in the workspace", async () => {
  const data = join(ws, ".data");
  ensureRoleCredentials(data);
  const seed = readFileSync(roleSeedFile(data, "daemon"), "utf8").trim();
  const calls = [
    { name: "read_file", arguments: { path: ".data/credentials/daemon.nk" } },
    { name: "read_file", arguments: { path: `${data}/credentials/worker.nk` } },
    { name: "grep", arguments: { pattern: seed.slice(0, 12) } },
    { name: "grep", arguments: { pattern: "^SU", path: ".data" } },
    { name: "glob", arguments: { pattern: "**/*.nk" } },
    { name: "list_dir", arguments: { path: "." } },
    { name: "list_dir", arguments: { path: ".data/credentials" } },
    { name: "write_file", arguments: { path: ".data/credentials/daemon.nk", content: "SUforged\n" } },
  ];
  server.script(
    { match: { turn: 1 }, reply: { toolCalls: calls } },
    { match: { turn: 2 }, reply: { text: "done" } },
  );
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    [
      {
        name: "worker",
        description: "Works.",
        tools: ["read_file", "grep", "glob", "list_dir", "write_file"],
      },
    ],
  );
  const env = { TROUPE_DATA_DIR: data };
  const rt = await new Runtime({ config, workspace: ws, env }).open();
  try {
    const output = await rt.start({ task: "Look around", approval: "yolo" }).done;
    expect(output.reason).toBe("done");
  } finally {
    await rt.close();
  }
  const results = (server.requests[1]?.body.messages ?? [])
    .filter((m) => m.role === "tool")
    .map((m) => String(m.content));
  expect(results).toHaveLength(calls.length);
  const [readRel, readAbs, grepAll, grepData, glob, listRoot, listData, write] = results;
  expect(readRel).toContain("is in troupe's data directory");
  expect(readAbs).toContain("is in troupe's data directory");
  expect(grepAll).not.toContain(seed.slice(0, 12));
  expect(grepData).toContain("is in troupe's data directory");
  expect(glob).not.toContain(".nk");
  expect(listRoot).toContain("notes.txt");
  expect(listRoot).not.toContain(".data");
  expect(listData).toContain("is in troupe's data directory");
  expect(write).toContain("is in troupe's data directory");
  expect(readFileSync(roleSeedFile(data, "daemon"), "utf8").trim()).toBe(seed);
  for (const result of results) expect(result).not.toMatch(/SU[A-Z2-7]{20}/);
});
