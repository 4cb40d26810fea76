import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";

/*
 * Troupe installed as a library in a project of its own, as a user installs it: packed with `npm pack`,
 * installed with the project's zod 3, typescript and @types/node from the npm registry, in a temp
 * dir with its own npm cache (and the HOME of test/support/hermetic.ts). One install serves every test.
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const ZOD_3 = "3.25.76";
const own = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  devDependencies: Record<string, string>;
};

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<Ran> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.once("error", reject);
    child.once("close", (code) => resolvePromise({ code, stdout, stderr }));
  });
}

let project: string;
let env: NodeJS.ProcessEnv;
let install: Ran;
beforeAll(async () => {
  if (!existsSync(join(ROOT, "dist", "index.js"))) throw new Error("no dist/: run npm run build first");
  project = mkdtempSync(join(tmpdir(), "troupe-library-user-"));
  // Nothing of the npm that runs the tests (its cache, its config) reaches the project's npm.
  env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name)));
  Object.assign(env, {
    npm_config_cache: join(project, ".npm-cache"),
    npm_config_update_notifier: "false",
    npm_config_audit: "false",
    npm_config_fund: "false",
  });
  const packed = await run("npm", ["pack", "--json", "--pack-destination", project], ROOT, env);
  expect(packed.code, packed.stderr).toBe(0);
  const [{ filename }] = JSON.parse(packed.stdout) as [{ filename: string }];
  writeFileSync(
    join(project, "package.json"),
    JSON.stringify({
      name: "uses-troupe",
      private: true,
      type: "module",
      // As docs/library.md advises a project on Node 20.
      overrides: { "@nats-io/nuid": "2.0.3" },
    }),
  );
  install = await run(
    "npm",
    [
      "install",
      `./${filename}`,
      `zod@${ZOD_3}`,
      `typescript@${own.devDependencies.typescript}`,
      `@types/node@${own.devDependencies["@types/node"]}`,
    ],
    project,
    env,
  );
  expect(install.code, install.stderr).toBe(0);
}, 300_000);
afterAll(() => {
  if (project) rmSync(project, { recursive: true, force: true });
});

const versionOf = (path: string) =>
  (JSON.parse(readFileSync(join(project, path, "package.json"), "utf8")) as { version: string }).version;

describe("Troupe in a project on zod 3", () => {
  it("installs beside the project's zod 3 with a zod 4 of its own, and npm warns of no engine", () => {
    expect(versionOf("node_modules/zod")).toBe(ZOD_3);
    expect(versionOf("node_modules/troupe/node_modules/zod")).toMatch(/^4\./);
    expect(install.stdout + install.stderr).not.toMatch(/EBADENGINE/);
    // The example the README points at comes with the package.
    expect(existsSync(join(project, "node_modules/troupe/examples/library.mjs"))).toBe(true);
  });

  it("runs tools defined with the project's zod (zod 3, and its zod/v4): shown to the model, called with parsed arguments", async () => {
    writeFileSync(
      join(project, "weather.mjs"),
      `import { createRuntime, defineTool } from "troupe";
import { z } from "zod";
import { z as z4 } from "zod/v4";

const seen = [];
const weather = defineTool({
  name: "weather",
  description: "The weather in a city.",
  effect: "read",
  parameters: z.object({ city: z.string().describe("The city"), days: z.number().default(1) }),
  execute: (args) => {
    seen.push({ tool: "weather", args });
    return { ok: true, output: "sunny in " + args.city };
  },
});
const clock = defineTool({
  name: "clock",
  description: "The time in a zone.",
  effect: "read",
  parameters: z4.object({ zone: z4.string().describe("An IANA zone") }),
  execute: (args) => {
    seen.push({ tool: "clock", args });
    return { ok: true, output: "12:00" };
  },
});
const runtime = await createRuntime({
  settings: { defaultModel: "scripted" },
  agents: [{ name: "a", description: "A.", tools: ["weather", "clock"] }],
  tools: [weather, clock],
});
const output = await runtime.start({ task: "Weather and time in Lisbon?" }).done;
await runtime.close();
console.log(JSON.stringify({ output, seen }));
`,
    );
    const server = await ScriptedModelServer.start();
    try {
      server.script(
        {
          match: { turn: 1 },
          reply: {
            toolCalls: [
              { name: "weather", arguments: { city: "Lisbon" } },
              { name: "weather", arguments: { city: 5 } },
              { name: "clock", arguments: { zone: "Europe/Lisbon" } },
            ],
          },
        },
        { match: { turn: 2 }, reply: { text: "Sunny, noon." } },
      );
      const ran = await run(process.execPath, ["weather.mjs"], project, {
        ...env,
        OPENAI_BASE_URL: server.baseURL,
        OPENAI_API_KEY: "",
      });
      expect(ran.stderr).toBe("");
      expect(ran.code).toBe(0);
      const { output, seen } = JSON.parse(ran.stdout) as {
        output: { reason: string; result: string };
        seen: Array<{ tool: string; args: unknown }>;
      };
      expect(output).toMatchObject({ reason: "done", result: "Sunny, noon." });
      // Parsed by the project's schemas: the default filled in; the call with a number never ran.
      expect(seen).toHaveLength(2);
      expect(seen).toContainEqual({ tool: "weather", args: { city: "Lisbon", days: 1 } });
      expect(seen).toContainEqual({ tool: "clock", args: { zone: "Europe/Lisbon" } });

      const specs = new Map(
        server.requests[0]?.body.tools?.map((t) => [t.function.name, t.function.parameters]),
      );
      expect(specs.get("weather")).toMatchObject({
        type: "object",
        properties: { city: { type: "string", description: "The city" }, days: { type: "number" } },
        required: ["city"],
      });
      expect(specs.get("clock")).toMatchObject({
        type: "object",
        properties: { zone: { type: "string", description: "An IANA zone" } },
        required: ["zone"],
      });
      const results = server.requests[1]?.body.messages
        .filter((m) => m.role === "tool")
        .map((m) => m.content);
      expect(results).toContainEqual(
        expect.stringMatching(/invalid arguments for weather: city: Expected string, received number/),
      );
    } finally {
      await server.close();
    }
  }, 60_000);

  it("troupe/testing gives the scripted model server, and runs an agent on it; troupe itself does not export it", async () => {
    writeFileSync(
      join(project, "scripted.mjs"),
      `import * as troupe from "troupe";
import { ScriptedModelServer } from "troupe/testing";

const model = await ScriptedModelServer.start();
model.script({ match: { turn: 1 }, reply: { text: "Scripted hello." } });
const runtime = await troupe.createRuntime({
  settings: { defaultModel: "scripted", providers: { openai: { baseURL: model.baseURL, models: { scripted: {} } } } },
  agents: [{ name: "greeter", description: "Greets.", tools: [] }],
});
const output = await runtime.start({ task: "Hello?" }).done;
await runtime.close();
await model.close();
console.log(JSON.stringify({ result: output.result, inMain: "ScriptedModelServer" in troupe }));
`,
    );
    const ran = await run(process.execPath, ["scripted.mjs"], project, { ...env, OPENAI_API_KEY: "" });
    expect(ran.stderr).toBe("");
    expect(JSON.parse(ran.stdout)).toEqual({ result: "Scripted hello.", inMain: false });
  }, 60_000);

  it("compiles the examples of docs/library.md under tsc --strict", async () => {
    const doc = readFileSync(join(ROOT, "docs", "library.md"), "utf8");
    const blocks = [...doc.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((match) => match[1] ?? "");
    expect(blocks.length).toBeGreaterThan(0);
    for (const [i, code] of blocks.entries()) writeFileSync(join(project, `doc-example-${i + 1}.ts`), code);
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          target: "es2022",
          module: "nodenext",
          types: ["node"],
          skipLibCheck: true,
          noEmit: true,
        },
        include: ["doc-example-*.ts"],
      }),
    );
    const tsc = await run(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "."], project, env);
    expect(tsc.stdout + tsc.stderr).toBe("");
    expect(tsc.code).toBe(0);
  }, 120_000);
});
