import { describe, expect, it } from "vitest";
import {
  answersFromPairs,
  checkAnswers,
  fieldValue,
  formFromSchema,
  formOf,
  type QuestionForm,
} from "../../src/approvals/question-form.js";

/** The shapes of server-everything's form: every kind of field MCP's form mode has. */
const schema = {
  type: "object",
  properties: {
    name: { type: "string", title: "Name" },
    check: { type: "boolean" },
    email: { type: "string", format: "email" },
    integer: { type: "integer", minimum: 1, maximum: 100 },
    pet: { type: "string", enum: ["pet-1", "pet-2"], enumNames: ["Cats", "Dogs"] },
    hero: { type: "string", oneOf: [{ const: "hero-1", title: "Superman" }] },
    fish: { type: "array", items: { anyOf: [{ const: "fish-1" }, { const: "fish-2" }] }, maxItems: 1 },
  },
  required: ["name"],
};

function form(): QuestionForm {
  const made = formFromSchema("Who are you?", schema);
  if ("problem" in made) throw new Error(made.problem);
  return made;
}

describe("an MCP server's question as a form", () => {
  it("takes every kind of field of MCP's form mode, and refuses what it cannot ask", () => {
    expect(form().fields.map((f) => [f.name, f.type, f.required])).toEqual([
      ["name", "string", true],
      ["check", "boolean", false],
      ["email", "string", false],
      ["integer", "integer", false],
      ["pet", "string", false],
      ["hero", "string", false],
      ["fish", "choices", false],
    ]);
    expect(form().fields.find((f) => f.name === "hero")?.options).toEqual(["hero-1"]);
    expect(formFromSchema("x", { type: "object", properties: { o: { type: "object" } } })).toEqual({
      problem: expect.stringContaining('field "o" is of type "object"'),
    });
    expect(formFromSchema("x", { type: "string" })).toEqual({
      problem: expect.stringContaining("not an object"),
    });
  });

  it("checks what is typed for a field, as the terminal asks it", () => {
    const field = (name: string) =>
      form().fields.find((f) => f.name === name) as QuestionForm["fields"][number];
    expect(fieldValue(field("integer"), "42")).toEqual({ value: 42 });
    expect(fieldValue(field("integer"), "4.5")).toEqual({ problem: "integer is a whole number" });
    expect(fieldValue(field("integer"), "101")).toEqual({ problem: "integer is at most 100" });
    expect(fieldValue(field("check"), "yes")).toEqual({ value: true });
    expect(fieldValue(field("email"), "nobody")).toEqual({
      problem: expect.stringContaining("email address"),
    });
    expect(fieldValue(field("pet"), "pet-3")).toEqual({ problem: "pet is one of pet-1, pet-2" });
    expect(fieldValue(field("fish"), "fish-1")).toEqual({ value: ["fish-1"] });
    expect(fieldValue(field("fish"), "fish-1, fish-2")).toEqual({ problem: "fish takes at most 1" });
  });

  it("checks answers given whole (JSON, or NAME=VALUE pairs): required fields, unknown ones, types", () => {
    expect(checkAnswers(form(), { name: "Ann", integer: 7 })).toEqual({
      answers: { name: "Ann", integer: 7 },
    });
    expect(checkAnswers(form(), { integer: 7 })).toEqual({ problem: "name is required" });
    expect(checkAnswers(form(), { name: "Ann", age: 3 })).toEqual({
      problem: expect.stringContaining("no field age"),
    });
    expect(checkAnswers(form(), { name: 5 })).toEqual({ problem: "name is a string" });
    expect(checkAnswers(form(), "Ann")).toEqual({ problem: expect.stringContaining("not a JSON object") });
    expect(answersFromPairs(form(), ["name=Ann Lee", "check=no", "fish=fish-2"])).toEqual({
      answers: { name: "Ann Lee", check: false, fish: ["fish-2"] },
    });
    expect(answersFromPairs(form(), ["nam=Ann"])).toEqual({
      problem: expect.stringContaining('"nam=Ann" is not NAME=VALUE'),
    });
  });

  it("is found in a request of SERVER__elicitation only", () => {
    const args = JSON.stringify(form());
    expect(formOf({ tool: "everything__elicitation", arguments: args })?.message).toBe("Who are you?");
    expect(formOf({ tool: "write_file", arguments: args })).toBeUndefined();
    expect(formOf({ tool: "everything__elicitation", arguments: "{" })).toBeUndefined();
  });
});
