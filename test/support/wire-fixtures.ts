import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { z } from "zod";

/* The conformance suite's fixtures (test/fixtures/wire, its README says how they are made). */

export const DIR = fileURLToPath(new URL("../fixtures/wire/", import.meta.url));

const usage = z.object({ inputTokens: z.number(), outputTokens: z.number(), cachedInputTokens: z.number() });
const fixtureSchema = z
  .object({
    server: z.string().min(1),
    source: z.string().min(1),
    shows: z.string().min(1),
    expect: z
      .object({
        text: z.string().nullable(),
        reasoning: z.string().optional(),
        refusal: z.string().optional(),
        toolCalls: z.array(
          z.object({
            id: z.string().optional(),
            name: z.string(),
            arguments: z.record(z.string(), z.unknown()),
          }),
        ),
        finishReason: z.enum(["stop", "tool_calls", "length", "content_filter", "error", "other"]),
        truncatedToolCalls: z.boolean().optional(),
        usage: z.union([usage, z.literal("counted")]),
      })
      .strict()
      .optional(),
    error: z.object({ name: z.string(), message: z.string() }).optional(),
  })
  .strict()
  .refine((f) => (f.expect === undefined) !== (f.error === undefined), "give expect or error, not both");

export const fixtures = readdirSync(DIR)
  .filter((file) => file.endsWith(".expect.json"))
  .sort()
  .map((file) => {
    const name = file.slice(0, -".expect.json".length);
    const bodyFile = readdirSync(DIR).find((f) => f === `${name}.sse` || f === `${name}.json`);
    if (!bodyFile) throw new Error(`${file} has no ${name}.sse or ${name}.json beside it`);
    return {
      name,
      ...fixtureSchema.parse(JSON.parse(readFileSync(`${DIR}${file}`, "utf8"))),
      body: readFileSync(`${DIR}${bodyFile}`, "utf8"),
      contentType: bodyFile.endsWith(".sse") ? "text/event-stream" : "application/json",
    };
  });
