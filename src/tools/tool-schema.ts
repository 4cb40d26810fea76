import type { StandardJSONSchemaV1, StandardSchemaV1 } from "@standard-schema/spec";
import { z } from "zod";
import { zodToJsonSchema } from "zod-to-json-schema";
import { TroupeError } from "../errors.js";
import { closest } from "../util/did-you-mean.js";

/**
 * What a tool's arguments are checked with: a zod schema from zod 4 or zod 3 (3.25 and later), made
 * with the program's own zod, whichever copy that is, not necessarily Troupe's. Both implement
 * Standard Schema, and only that interface is relied on to check arguments.
 */
export type ToolSchema<Args = unknown> = StandardSchemaV1<unknown, Args>;

/** The arguments a tool's `execute` gets: what its schema gives out. */
export type ArgsOf<S extends ToolSchema> = StandardSchemaV1.InferOutput<S>;

/** A schema Troupe cannot use: one that checks asynchronously, or that no JSON Schema can be made of. */
export class ToolSchemaError extends TroupeError {
  override name = "ToolSchemaError";
}

/** Arguments that do not fit the tool's schema: `problems` says what is wrong, one field each. */
export class ToolArgumentsError extends TroupeError {
  override name = "ToolArgumentsError";
  constructor(readonly problems: string[]) {
    super(problems.join("; "));
  }
}

/** The arguments as the schema gives them out (defaults filled, transforms run); throws `ToolArgumentsError`. */
export function parseArgs<Args>(schema: ToolSchema<Args>, value: unknown, tool = "a tool"): Args {
  const result = schema["~standard"].validate(value);
  if (result instanceof Promise)
    throw new ToolSchemaError(
      `${tool}: its schema checks asynchronously (an async refine or transform); tool arguments are checked at once`,
    );
  if (!result.issues) return result.value;
  throw new ToolArgumentsError(
    result.issues.map((issue) => {
      const path = (issue.path ?? []).map((part) => String(typeof part === "object" ? part.key : part));
      return `${path.length ? path.join(".") : "arguments"}: ${issue.message}`;
    }),
  );
}

/**
 * The JSON Schema the model is shown: of the arguments it writes (the schema's input side). The schema
 * makes it itself when it can (Standard JSON Schema: zod 4.2 and later); a zod 4 schema without it is
 * converted by Troupe's zod, a zod 3 schema by zod-to-json-schema.
 */
export function argsJsonSchema(tool: string, schema: ToolSchema): Record<string, unknown> {
  const standard = schema["~standard"] as StandardSchemaV1.Props & Partial<StandardJSONSchemaV1.Props>;
  if (standard.jsonSchema) return standard.jsonSchema.input({ target: "draft-2020-12" });
  if ("_zod" in schema)
    return z.toJSONSchema(schema as z.ZodType, { io: "input", metadata: new MetadataOfAnyCopy() });
  if (standard.vendor === "zod" && "_def" in schema)
    // A zod 3 schema, which zod-to-json-schema reads by its `_def`; the cast is to its zod 3 types.
    return zodToJsonSchema(schema as unknown as Parameters<typeof zodToJsonSchema>[0], {
      pipeStrategy: "input",
    }) as Record<string, unknown>;
  throw new ToolSchemaError(
    `tool "${tool}": no JSON Schema can be made of its parameters (a schema of "${standard.vendor}"); define it with zod 4, or zod 3.25 or later`,
  );
}

/**
 * The metadata (descriptions) of a zod 4 schema, whichever copy of zod made it. Copies of zod 4.2 and
 * later share one registry; an older one (4.0, 4.1, zod 3.25's `zod/v4`) keeps its own, which the
 * schema's `meta()` reads.
 */
class MetadataOfAnyCopy extends z.core.$ZodRegistry<z.core.GlobalMeta> {
  override get<S extends z.core.$ZodType>(schema: S) {
    const own = (schema as { meta?: () => z.core.GlobalMeta | undefined }).meta;
    return z.globalRegistry.get(schema) ?? (typeof own === "function" ? own.call(schema) : undefined);
  }
}

type JsonSchema = Record<string, unknown>;

const isSchema = (value: unknown): value is JsonSchema =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** Where a JSON Schema holds other schemas: by name, in a list, or one. */
const SCHEMA_MAPS = ["properties", "$defs", "definitions", "patternProperties"] as const;
const SCHEMA_LISTS = ["anyOf", "oneOf", "allOf", "prefixItems"] as const;
const SCHEMA_ONES = ["items", "additionalProperties", "not"] as const;

/**
 * The arguments' schema as the model is shown it: an object that lists its properties and does not
 * say whether it takes others takes none (`additionalProperties: false`), at any depth. One that says
 * (a record, a loose object, an MCP tool's own `additionalProperties`) keeps what it says, and an
 * object that lists no properties stays open to any.
 */
export function closedSchema(schema: JsonSchema): JsonSchema {
  const closed: JsonSchema = { ...schema };
  for (const key of SCHEMA_MAPS) {
    const map = schema[key];
    if (isSchema(map))
      closed[key] = Object.fromEntries(
        Object.entries(map).map(([name, sub]) => [name, isSchema(sub) ? closedSchema(sub) : sub]),
      );
  }
  for (const key of SCHEMA_LISTS) {
    const list = schema[key];
    if (Array.isArray(list)) closed[key] = list.map((sub) => (isSchema(sub) ? closedSchema(sub) : sub));
  }
  for (const key of SCHEMA_ONES) {
    const one = schema[key];
    if (isSchema(one)) closed[key] = closedSchema(one);
  }
  if (isSchema(schema.properties) && schema.additionalProperties === undefined)
    closed.additionalProperties = false;
  return closed;
}

/**
 * The keys of `value` that a closed object of `schema` does not take, one problem per object, naming
 * the keys it does take (and the likely one meant), so that the model can mend its call. Followed
 * through `properties`, as deep as the value goes.
 */
export function unknownKeys(schema: JsonSchema, value: unknown, at = ""): string[] {
  const properties = schema.properties;
  if (!isSchema(properties) || !isSchema(value)) return [];
  const problems: string[] = [];
  const unknown: string[] = [];
  for (const [key, inner] of Object.entries(value)) {
    if (!Object.hasOwn(properties, key)) unknown.push(key);
    else if (isSchema(properties[key])) problems.push(...unknownKeys(properties[key], inner, `${at}${key}.`));
  }
  if (unknown.length === 0 || schema.additionalProperties !== false) return problems;
  const known = Object.keys(properties);
  const [first] = unknown;
  const meant = unknown.length === 1 && first !== undefined ? closest(first, known) : undefined;
  const what = `unknown ${at ? "key" : "argument"}${unknown.length > 1 ? "s" : ""}`;
  const named = unknown.slice(0, NAMED).map((key) => `"${key.length > 64 ? `${key.slice(0, 63)}…` : key}"`);
  const more = unknown.length > NAMED ? ` and ${unknown.length - NAMED} more` : "";
  const where = at ? ` in ${at.slice(0, -1)}` : "";
  const takes = known.length ? `the ${at ? "keys" : "arguments"} are ${known.join(", ")}` : "it takes none";
  return [
    `${what} ${named.join(", ")}${more}${where}${meant ? ` (did you mean "${meant}"?)` : ""}; ${takes}`,
    ...problems,
  ];
}

/** The most unknown keys named in one problem. */
const NAMED = 5;
