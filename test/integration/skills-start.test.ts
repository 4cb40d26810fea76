import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import { UnknownSkillError } from "../../src/actors/runtime-errors.js";
import { matchSkill, skillCommand } from "../../src/skills/skills.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";
import { skillFile as skill, testConfig } from "../support/config.js";
import { collect } from "../support/wait.js";

let server: ScriptedModelServer;
let dir: string;
let dispose: () => void;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir, dispose } = tempTree({
    "config/skills/release/SKILL.md": skill(
      "release",
      "Cut a release: bump the version, write the changelog, tag it.",
      "1. Bump package.json.\n2. Changelog.\n3. git tag.",
    ),
    "config/skills/db-migrate/SKILL.md": skill(
      "db-migrate",
      "Write and run a database schema migration safely.",
      "Always back up first.",
    ),
    "ws/.keep": "",
  }));
});
afterEach(async () => {
  await server.close();
  dispose();
});

async function runtime(troupe: Record<string, unknown> = {}, agent: Record<string, unknown> = {}) {
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
      ...troupe,
    },
    [{ name: "worker", description: "Works.", tools: ["load_skill"], ...agent }],
  );
  config.dir = `${dir}/config`;
  return new Runtime({ config, workspace: `${dir}/ws`, env: {} }).open();
}

async function firstUserMessage(rt: Runtime, options: Parameters<Runtime["start"]>[0]) {
  server.script({ reply: { text: "ok" } });
  const handle = rt.start(options);
  await handle.done;
  const events = (await collect(rt.bus.eventLog.read({ runId: handle.runId }))).map((e) => e.envelope);
  const request = server.requests.at(-1)?.body;
  return {
    user: request?.messages.find((m) => m.role === "user")?.content ?? "",
    loaded: events.find((e) => e.type === "skill.loaded")?.data,
  };
}

describe("skills, three ways in", () => {
  it("the user names one: --skill loads its body before the first model call", async () => {
    const { user, loaded } = await firstUserMessage(await runtime(), {
      task: "Ship 1.2.0",
      skill: "release",
    });
    expect(user).toBe(
      "Follow this skill (release) for the task below.\n\n1. Bump package.json.\n2. Changelog.\n3. git tag.\n\nTask: Ship 1.2.0",
    );
    expect(loaded).toEqual({ name: "release", by: "user", files: 0 });
  });

  it("the user names one with /skill:NAME at the start of the task", async () => {
    const { user, loaded } = await firstUserMessage(await runtime(), {
      task: "/skill:db-migrate add a column for emails",
    });
    expect(user).toContain("Always back up first.");
    expect(user).toMatch(/Task: add a column for emails$/);
    expect(loaded).toEqual({ name: "db-migrate", by: "user", files: 0 });
  });

  it("an unknown or hidden skill is one clear error", async () => {
    const rt = await runtime();
    expect(() => rt.start({ task: "x", skill: "relase" })).toThrow(UnknownSkillError);
    expect(() => rt.start({ task: "x", skill: "relase" })).toThrow(
      'unknown skill "relase" (did you mean "release"?); worker can load db-migrate, release',
    );
    const limited = await runtime({}, { skills: ["release"] });
    expect(() => limited.start({ task: "/skill:db-migrate x" })).toThrow(/worker can load release$/);
  });

  it("the harness picks one with skills.autoMatch when the task matches its description well enough, and says so", async () => {
    const { user, loaded } = await firstUserMessage(
      await runtime({ skills: { autoMatch: true, threshold: 0.3 } }),
      { task: "Please cut a release and tag it, with a changelog" },
    );
    expect(user).toContain("1. Bump package.json.");
    expect(loaded).toMatchObject({ name: "release", by: "match" });
    const none = await firstUserMessage(await runtime({ skills: { autoMatch: true, threshold: 0.3 } }), {
      task: "Fix the login button colour",
    });
    expect(none.loaded).toBeUndefined();
    expect(none.user).toBe("Fix the login button colour");
    const off = await firstUserMessage(await runtime(), {
      task: "Please cut a release and tag it, with a changelog",
    });
    expect(off.loaded).toBeUndefined();
  });

  it("matching and the /skill: command, alone", () => {
    const skills = [
      {
        name: "release",
        description: "Cut a release: bump the version, write the changelog, tag it.",
        path: "",
      },
      { name: "db", description: "Database schema migration.", path: "" },
    ];
    expect(matchSkill("write a schema migration for the database", skills, 0.5)?.skill.name).toBe("db");
    expect(matchSkill("hello", skills, 0.1)).toBeUndefined();
    expect(skillCommand("/skill:release   ship it")).toEqual({ name: "release", task: "ship it" });
    expect(skillCommand("please /skill:release")).toBeUndefined();
  });
});
