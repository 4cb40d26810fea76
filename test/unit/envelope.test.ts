import { describe, expect, it } from "vitest";
import {
  envelopeSchema,
  MalformedEnvelopeError,
  makeEnvelope,
  parseEnvelope,
} from "../../src/events/envelope.js";

const good = makeEnvelope({
  runId: "r1",
  agentId: "a1",
  parentId: "p1",
  seq: 3,
  type: "state.changed",
  data: {},
});

/** Each differs from a good envelope in one field. */
const variants: Array<[string, Record<string, unknown>]> = [
  ["no parentId", { parentId: undefined }],
  ["no data", { data: undefined }],
  ["data null", { data: null }],
  ["an unknown key", { extra: 1 }],
  ["another version", { v: 2 }],
  ["no version", { v: undefined }],
  ["empty id", { id: "" }],
  ["numeric id", { id: 7 }],
  ["negative ts", { ts: -1 }],
  ["fractional ts", { ts: 1.5 }],
  ["ts past safe integers", { ts: 2 ** 60 }],
  ["ts as text", { ts: "1" }],
  ["empty runId", { runId: "" }],
  ["no agentId", { agentId: undefined }],
  ["empty parentId", { parentId: "" }],
  ["negative seq", { seq: -1 }],
  ["seq NaN", { seq: Number.NaN }],
  ["seq Infinity", { seq: Number.POSITIVE_INFINITY }],
  ["empty type", { type: "" }],
];

function variant(change: Record<string, unknown>): Record<string, unknown> {
  const json: Record<string, unknown> = { ...good, ...change };
  for (const [key, value] of Object.entries(change)) if (value === undefined) delete json[key];
  return json;
}

describe("parseEnvelope", () => {
  it.each(variants)("agrees with the envelope schema: %s", (_, change) => {
    const json = variant(change);
    const expected = envelopeSchema.safeParse(json);
    if (expected.success) expect(parseEnvelope(json)).toEqual(expected.data);
    else expect(() => parseEnvelope(json)).toThrow(MalformedEnvelopeError);
  });

  it("says which field is wrong", () => {
    expect(() => parseEnvelope(variant({ seq: -1 }))).toThrow(/^seq: /);
    expect(() => parseEnvelope([good])).toThrow(MalformedEnvelopeError);
    expect(() => parseEnvelope(null)).toThrow(MalformedEnvelopeError);
  });

  it("drops keys the schema does not know", () => {
    expect(parseEnvelope(variant({ extra: 1 }))).not.toHaveProperty("extra");
  });
});
