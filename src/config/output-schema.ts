import { Ajv, type ValidateFunction } from "ajv";

/*
 * An agent's `output`: the JSON Schema its final answer must fit. Compiled once per schema; an answer
 * is checked as the JSON it says it is (a ```json fence around it is allowed, as models write one).
 */

const ajv = new Ajv({ allErrors: true, strict: false });
const compiled = new WeakMap<object, ValidateFunction>();

/** Why `schema` is not a JSON Schema Troupe can check answers against, or undefined when it is. */
export function outputSchemaProblem(schema: Record<string, unknown>): string | undefined {
  try {
    validator(schema);
    return undefined;
  } catch (error) {
    return `not a JSON Schema: ${(error as Error).message}`;
  }
}

function validator(schema: Record<string, unknown>): ValidateFunction {
  let validate = compiled.get(schema);
  if (!validate) {
    // Which draft it names is not asked: the keywords answers are held to are the same.
    const { $schema: _draft, ...rest } = schema;
    validate = ajv.compile(rest);
    compiled.set(schema, validate);
  }
  return validate;
}

/** The answer's JSON when it fits `schema`, else what is wrong with it, in a line or a few. */
export function checkOutput(
  schema: Record<string, unknown>,
  text: string,
): { value: unknown } | { problem: string } {
  const fenced = /^\s*```(?:json)?\s*\n([\s\S]*?)\n\s*```\s*$/.exec(text);
  let value: unknown;
  try {
    value = JSON.parse(fenced ? (fenced[1] as string) : text);
  } catch (error) {
    return { problem: `it is not JSON (${(error as Error).message})` };
  }
  const validate = validator(schema);
  if (validate(value)) return { value };
  const errors = (validate.errors ?? [])
    .slice(0, 5)
    .map((e) => `${e.instancePath || "the answer"} ${e.message ?? "does not fit"}`);
  return { problem: errors.join("; ") };
}
