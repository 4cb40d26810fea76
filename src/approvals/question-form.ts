import type { ApprovalRequest } from "./approver.js";

/*
 * A question an MCP server puts to the user while its tool runs (MCP's elicitation, form mode): a
 * message and a flat form of named fields. It travels as an approval request of the tool
 * `SERVER__elicitation` whose arguments are the form, so it reaches a person wherever approvals do
 * and is answered the same way, signed: allowed with the answers as JSON in the reason (accept), or
 * denied (decline). Everything in it is the server's: untrusted, shown through `visible`.
 */

/** The tool name a server's questions are asked under: `SERVER__elicitation`. */
export const QUESTION_TOOL = "__elicitation";

/** `choices`: several of `options` (MCP's multi-select, an array of strings). */
export type FieldType = "string" | "number" | "integer" | "boolean" | "choices";

export interface FormField {
  name: string;
  type: FieldType;
  required: boolean;
  title?: string;
  description?: string;
  /** The values a string field (or each of a `choices` field's) may take. */
  options?: string[];
  /** `email`, `uri`, `date`, `date-time`, for a string. */
  format?: string;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  /** How many a `choices` field takes. */
  minItems?: number;
  maxItems?: number;
}

export interface QuestionForm {
  message: string;
  fields: FormField[];
}

export type Answer = string | number | boolean | string[];
export type Answers = Record<string, Answer>;

/** The most fields a form may have, and characters of a message: a question a person can read. */
const MAX_FIELDS = 20;
const MAX_MESSAGE = 4000;

/** The form of MCP's `requestedSchema` (an object of primitive properties), or why it cannot be asked. */
export function formFromSchema(message: string, schema: unknown): QuestionForm | { problem: string } {
  if (message.length > MAX_MESSAGE) return { problem: `its message is over ${MAX_MESSAGE} characters` };
  const object = schema as { type?: unknown; properties?: unknown; required?: unknown } | undefined;
  if (object?.type !== "object" || typeof object.properties !== "object" || object.properties === null)
    return { problem: "its requestedSchema is not an object with properties" };
  const required = new Set(Array.isArray(object.required) ? object.required.map(String) : []);
  const fields: FormField[] = [];
  for (const [name, raw] of Object.entries(object.properties as Record<string, unknown>)) {
    const field = fieldOf(name, raw, required.has(name));
    if ("problem" in field) return field;
    fields.push(field);
  }
  if (fields.length > MAX_FIELDS) return { problem: `it has over ${MAX_FIELDS} fields` };
  return { message, fields };
}

function fieldOf(name: string, raw: unknown, required: boolean): FormField | { problem: string } {
  const p = (raw ?? {}) as Record<string, unknown>;
  const text = (key: string) => (typeof p[key] === "string" ? { [key]: p[key] as string } : {});
  const num = (key: string) => (typeof p[key] === "number" ? { [key]: p[key] as number } : {});
  const base = { name, required, ...text("title"), ...text("description") };
  const oneOf = Array.isArray(p.oneOf) ? p.oneOf.map((o) => (o as { const?: unknown }).const) : undefined;
  const options = Array.isArray(p.enum) ? p.enum : oneOf;
  switch (p.type) {
    case "string":
      if (options && !options.every((o) => typeof o === "string"))
        return { problem: `field "${name}" has values that are not strings` };
      return {
        ...base,
        type: "string",
        ...(options ? { options: options as string[] } : {}),
        ...text("format"),
        ...num("minLength"),
        ...num("maxLength"),
      };
    case "number":
    case "integer":
      return { ...base, type: p.type, ...num("minimum"), ...num("maximum") };
    case "boolean":
      return { ...base, type: "boolean" };
    case "array": {
      const items = (p.items ?? {}) as { enum?: unknown; anyOf?: unknown };
      const choices = Array.isArray(items.enum)
        ? items.enum
        : Array.isArray(items.anyOf)
          ? items.anyOf.map((o) => (o as { const?: unknown }).const)
          : undefined;
      if (!choices?.every((o) => typeof o === "string"))
        return {
          problem: `field "${name}" is a list of other than named choices, which troupe cannot ask for`,
        };
      return {
        ...base,
        type: "choices",
        options: choices as string[],
        ...num("minItems"),
        ...num("maxItems"),
      };
    }
    default:
      return { problem: `field "${name}" is of type ${JSON.stringify(p.type)}, which troupe cannot ask for` };
  }
}

/** The form a request asks, when it is a server's question (its tool `SERVER__elicitation`). */
export function formOf(request: Pick<ApprovalRequest, "tool" | "arguments">): QuestionForm | undefined {
  if (!request.tool.endsWith(QUESTION_TOOL)) return undefined;
  try {
    const parsed = JSON.parse(request.arguments) as QuestionForm;
    return typeof parsed.message === "string" && Array.isArray(parsed.fields) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** One typed value for a field, or what is wrong with it. */
export function fieldValue(field: FormField, text: string): { value: Answer } | { problem: string } {
  const t = text.trim();
  if (field.type === "choices")
    return checkedChoices(field, t === "" ? [] : t.split(",").map((c) => c.trim()));
  if (field.type === "boolean") {
    if (/^(y|yes|true)$/i.test(t)) return { value: true };
    if (/^(n|no|false)$/i.test(t)) return { value: false };
    return { problem: `${field.name} is yes or no` };
  }
  if (field.type === "number" || field.type === "integer") {
    const value = Number(t);
    if (t === "" || !Number.isFinite(value)) return { problem: `${field.name} is a number` };
    if (field.type === "integer" && !Number.isInteger(value))
      return { problem: `${field.name} is a whole number` };
    return checked(field, value);
  }
  return checked(field, text);
}

function checked(field: FormField, value: string | number): { value: string | number } | { problem: string } {
  if (typeof value === "number") {
    if (field.minimum !== undefined && value < field.minimum)
      return { problem: `${field.name} is at least ${field.minimum}` };
    if (field.maximum !== undefined && value > field.maximum)
      return { problem: `${field.name} is at most ${field.maximum}` };
    return { value };
  }
  const format = field.format && FORMATS[field.format];
  if (format && !format.test(value)) return { problem: `${field.name} is ${format.says}` };
  if (field.options && !field.options.includes(value))
    return { problem: `${field.name} is one of ${field.options.join(", ")}` };
  if (field.minLength !== undefined && value.length < field.minLength)
    return { problem: `${field.name} has at least ${field.minLength} characters` };
  if (field.maxLength !== undefined && value.length > field.maxLength)
    return { problem: `${field.name} has at most ${field.maxLength} characters` };
  return { value };
}

function checkedChoices(field: FormField, chosen: string[]): { value: string[] } | { problem: string } {
  const wrong = chosen.find((c) => !field.options?.includes(c));
  if (wrong !== undefined) return { problem: `${field.name} takes some of ${field.options?.join(", ")}` };
  if (field.minItems !== undefined && chosen.length < field.minItems)
    return { problem: `${field.name} takes at least ${field.minItems}` };
  if (field.maxItems !== undefined && chosen.length > field.maxItems)
    return { problem: `${field.name} takes at most ${field.maxItems}` };
  return { value: chosen };
}

/** The string formats MCP's forms name, as checked here (the server checks again). */
const FORMATS: Record<string, { test(value: string): boolean; says: string }> = {
  email: { test: (v) => /^[^\s@]+@[^\s@]+$/.test(v), says: "an email address (name@host)" },
  uri: { test: (v) => URL.canParse(v), says: "a URI (https://…)" },
  date: {
    test: (v) => /^\d{4}-\d{2}-\d{2}$/.test(v) && !Number.isNaN(Date.parse(v)),
    says: "a date (YYYY-MM-DD)",
  },
  "date-time": {
    test: (v) => !Number.isNaN(Date.parse(v)) && /T/.test(v),
    says: "a date and time (YYYY-MM-DDTHH:MM:SSZ)",
  },
};

/** Answers as the form takes them (the JSON of an accepted answer's reason), or what is wrong with them. */
export function checkAnswers(form: QuestionForm, given: unknown): { answers: Answers } | { problem: string } {
  if (typeof given !== "object" || given === null || Array.isArray(given))
    return { problem: "the answers are not a JSON object of field: value" };
  const answers: Answers = {};
  const known = new Set(form.fields.map((f) => f.name));
  const unknown = Object.keys(given).filter((key) => !known.has(key));
  if (unknown.length > 0)
    return {
      problem: `no field ${unknown.join(", ")} in the form (its fields: ${[...known].join(", ") || "none"})`,
    };
  for (const field of form.fields) {
    const value = (given as Record<string, unknown>)[field.name];
    if (value === undefined || value === "") {
      if (field.required) return { problem: `${field.name} is required` };
      continue;
    }
    if (field.type === "choices") {
      if (!Array.isArray(value) || !value.every((v) => typeof v === "string"))
        return { problem: `${field.name} is a list of some of ${field.options?.join(", ")}` };
      const fit = checkedChoices(field, value);
      if ("problem" in fit) return fit;
      answers[field.name] = fit.value;
      continue;
    }
    const ok =
      field.type === "boolean"
        ? typeof value === "boolean"
        : field.type === "string"
          ? typeof value === "string"
          : typeof value === "number" && (field.type === "number" || Number.isInteger(value));
    if (!ok)
      return {
        problem: `${field.name} is ${field.type === "integer" ? "a whole number" : `a ${field.type}`}`,
      };
    const fit = typeof value === "boolean" ? { value } : checked(field, value as string | number);
    if ("problem" in fit) return fit;
    answers[field.name] = fit.value;
  }
  return { answers };
}

/** Answers typed as `name=value` (`troupe approve --field`), or what is wrong with one. */
export function answersFromPairs(
  form: QuestionForm,
  pairs: readonly string[],
): { answers: Answers } | { problem: string } {
  const given: Record<string, unknown> = {};
  for (const pair of pairs) {
    const at = pair.indexOf("=");
    const name = at < 0 ? pair : pair.slice(0, at);
    const field = form.fields.find((f) => f.name === name);
    if (at < 0 || !field)
      return {
        problem: `"${pair}" is not NAME=VALUE of a field (the fields: ${form.fields.map((f) => f.name).join(", ") || "none"})`,
      };
    const value = fieldValue(field, pair.slice(at + 1));
    if ("problem" in value) return value;
    given[name] = value.value;
  }
  return checkAnswers(form, given);
}

/** A field as a person reads it: `name (a number, required): title — description [a, b]`. */
export function fieldLine(field: FormField): string {
  const kind =
    field.type === "integer" ? "a whole number" : field.type === "boolean" ? "yes/no" : `a ${field.type}`;
  const about = [field.title, field.description].filter(Boolean).join(": ");
  const options = field.options
    ? ` (${field.type === "choices" ? "of" : "one of"}: ${field.options.join(", ")})`
    : "";
  return `${field.name} (${kind}${field.format ? `, ${field.format}` : ""}, ${field.required ? "required" : "optional"})${about ? ` ${about}` : ""}${options}`;
}

/** What the request shows: the message, then each field on a line of its own. */
export function formDetail(form: QuestionForm): string {
  return [
    form.message,
    ...(form.fields.length ? ["fields:", ...form.fields.map((f) => `  ${fieldLine(f)}`)] : []),
  ].join("\n");
}
