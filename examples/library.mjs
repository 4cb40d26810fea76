// Troupe as a library: a tool defined in code, hooks as functions, typed events, steering.
// Run it with a model server in OPENAI_BASE_URL (or OPENAI_API_KEY for OpenAI):
//   node examples/library.mjs
import { createRuntime, defineTool } from "troupe";
import { z } from "zod";

const weather = defineTool({
  name: "weather",
  description: "Today's weather in a city.",
  effect: "read",
  parameters: z.object({ city: z.string() }),
  execute: ({ city }) => ({ ok: true, output: `Sunny and 21°C in ${city}` }),
});

const runtime = await createRuntime({
  // OPENAI_BASE_URL and OPENAI_API_KEY are read from the environment, as the CLI reads them.
  settings: { defaultModel: process.env.TROUPE_EXAMPLE_MODEL ?? "gpt-4o-mini" },
  agents: [{ name: "forecaster", description: "Answers questions about the weather.", tools: ["weather"] }],
  tools: [weather],
  hooks: {
    // Every city is looked up in upper case; a lookup for "Atlantis" is refused.
    beforeToolCall: ({ tool, args }) =>
      tool === "weather" && args.city === "Atlantis"
        ? { block: "Atlantis is not on the map" }
        : { args: { city: String(args.city).toUpperCase() } },
    afterToolCall: ({ result }) => ({ ...result, output: `${result.output} (checked by a hook)` }),
  },
});

const handle = runtime.start({ task: "What is the weather in Lisbon?" });
for await (const event of handle.events()) {
  if (event.type === "tool.requested") console.log(`tool: ${event.data.name} ${event.data.arguments}`);
  if (event.type === "model.delta") process.stdout.write(event.data.text);
  if (event.type === "agent.stopped") {
    const why = event.data.error ?? event.data.limit;
    console.log(`\nstopped: ${event.data.reason}${why ? ` (${why})` : ""}, ${event.data.turns} turns`);
    if (event.data.reason !== "done") process.exitCode = 1;
  }
}
await runtime.close();
