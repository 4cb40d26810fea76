import { expect, it } from "vitest";
import { z } from "zod";
import { ConfigError } from "../../src/config/problems.js";
import { createRuntime, defineTool } from "../../src/index.js";

const weather = defineTool({
  name: "weather",
  description: "Today's weather.",
  effect: "read",
  parameters: z.object({ city: z.string() }),
  execute: ({ city }) => ({ ok: true, output: `Sunny in ${city}` }),
});

it("settings and agents given in code are checked as a config dir is: every problem, named, with did-you-mean", async () => {
  const error = await createRuntime({
    settings: { defaultModle: "x" } as never,
    agents: [
      { name: "a", description: "A.", tools: ["weather", "bash", "wether"], subagents: ["helpr"] },
      { name: "helper", description: "Helps.", tols: [] } as never,
    ],
    tools: [weather as never],
  }).catch((caught: unknown) => caught);
  expect(error).toBeInstanceOf(ConfigError);
  const lines = (error as Error).message.split("\n");
  expect(lines).toContainEqual(
    expect.stringMatching(/^settings:1:1: defaultModle: unknown key \(did you mean "defaultModel"\?\)$/),
  );
  expect(lines).toContainEqual(
    expect.stringMatching(/^agents\[1\]:\d+:1: tols: unknown key \(did you mean "tools"\?\)$/),
  );

  // With the settings right, the agents are checked together: tools given in code count as tools.
  const agents = await createRuntime({
    settings: { defaultModel: "x" },
    agents: [{ name: "a", description: "A.", tools: ["weather", "bash", "wether"], subagents: ["helpr"] }],
    tools: [weather as never],
  }).catch((caught: unknown) => caught);
  expect(agents).toBeInstanceOf(ConfigError);
  const told = (agents as Error).message;
  expect(told).toContain('unknown tool "bash" (did you mean "shell"? Troupe calls it so)');
  expect(told).toContain('unknown tool "wether" (did you mean "weather"?)');
  expect(told).toContain('unknown agent "helpr"');
  expect(told).not.toContain('unknown tool "weather"');
});
