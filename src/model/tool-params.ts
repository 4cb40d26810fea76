import type OpenAI from "openai";
import type { ToolChoice, ToolSpec } from "./types.js";

/** What a request says of its tools: the tools, and how the model may use them. */
export interface ToolParams {
  tools: OpenAI.ChatCompletionTool[] | undefined;
  tool_choice: OpenAI.ChatCompletionToolChoiceOption | undefined;
}

/**
 * The request's `tools` and `tool_choice`. With `strict`, a tool whose schema a strict server takes
 * (`strictFits`) is sent with `strict: true`; any other goes without, as a server in strict mode
 * refuses a schema with an optional property. No tools: no `tool_choice` either (a server refuses
 * one alone). A tool named as the choice that is not among the tools sent (a read-only turn's)
 * leaves the choice to the model.
 */
export function toolParams(
  specs: readonly ToolSpec[] | undefined,
  strict: boolean,
  choice?: ToolChoice,
): ToolParams {
  if (!specs?.length) return { tools: undefined, tool_choice: undefined };
  const tools = specs.map((spec) => {
    const definition: OpenAI.FunctionDefinition = {
      name: spec.name,
      description: spec.description,
      parameters: spec.parameters,
    };
    if (strict && strictFits(spec.parameters)) definition.strict = true;
    return { type: "function" as const, function: definition };
  });
  return { tools, tool_choice: wireChoice(choice, specs) };
}

function wireChoice(
  choice: ToolChoice | undefined,
  specs: readonly ToolSpec[],
): OpenAI.ChatCompletionToolChoiceOption | undefined {
  if (choice === undefined) return undefined;
  if (choice === "auto" || choice === "required" || choice === "none")
    return choice as OpenAI.ChatCompletionToolChoiceOption;
  return specs.some((spec) => spec.name === choice)
    ? { type: "function", function: { name: choice } }
    : undefined;
}

/**
 * Whether a strict server takes this JSON Schema as it is: every object that lists properties takes
 * no others (`additionalProperties: false`) and requires each of them, at every depth.
 */
export function strictFits(schema: unknown): boolean {
  if (Array.isArray(schema)) return schema.every(strictFits);
  if (typeof schema !== "object" || schema === null) return true;
  const node = schema as Record<string, unknown>;
  const properties = node.properties;
  if (typeof properties === "object" && properties !== null) {
    const required = new Set(Array.isArray(node.required) ? node.required : []);
    if (node.additionalProperties !== false) return false;
    if (!Object.keys(properties).every((key) => required.has(key))) return false;
  }
  return Object.entries(node).every(([key, value]) => key === "enum" || key === "const" || strictFits(value));
}
