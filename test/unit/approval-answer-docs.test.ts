import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { expect, it } from "vitest";
import {
  type AnswerContent,
  answerContentSchema,
  canonicalAnswer,
  requestDigest,
  signedAnswerSchema,
} from "../../src/trust/signed-answer.js";

const PAGE = readFileSync(resolve(import.meta.dirname, "../../docs/daemon.md"), "utf8");

/** The array docs/daemon.md shows for `tag`, each name replaced by `values`' field of that name. */
function documented(tag: string, values: Record<string, unknown>): unknown[] {
  const line = PAGE.split("\n").find((l) => l.startsWith(`["${tag}", `));
  expect(line, `docs/daemon.md shows the array of ${tag}`).toBeDefined();
  const names = (line ?? "").slice(1, -1).split(", ").slice(1);
  for (const name of names) expect(values, `${tag}: ${name}`).toHaveProperty(name);
  return [tag, ...names.map((name) => values[name])];
}

it("the bytes docs/daemon.md says an answer signs are canonicalAnswer's, null for an absent reason or via", () => {
  const content: AnswerContent = {
    v: 1,
    answerId: "a1",
    runId: "run-1",
    callId: "call_1",
    requestId: "digest",
    decision: "deny",
    reason: "not now",
    time: 1764806400000,
    name: "ana",
    publicKey: "UKEY",
    via: "a script",
  };
  const text = new TextDecoder().decode(canonicalAnswer(content));
  expect(text).toBe(JSON.stringify(documented("troupe-approval-answer/v1", content)));
  const { reason: _r, via: _v, ...bare } = content;
  expect(new TextDecoder().decode(canonicalAnswer(bare))).toBe(
    JSON.stringify(documented("troupe-approval-answer/v1", { ...bare, reason: null, via: null })),
  );
});

it("the digest docs/daemon.md says a request record's requestId is, is requestDigest's", () => {
  const facts = {
    runId: "run-1",
    agentId: "coder-1",
    callId: "call_1",
    tool: "shell",
    arguments: '{"command":"ls"}',
    effect: "execute",
    detail: "ls",
    paths: ["/w"],
    nonce: "n",
    createdAt: 1764806400000,
  };
  const digest = (array: unknown[]) => createHash("sha256").update(JSON.stringify(array)).digest("base64url");
  expect(requestDigest(facts)).toBe(digest(documented("troupe-approval-request/v1", facts)));
  // With an escalation, one more element: {escalation}.
  const escalated = { ...facts, escalation: "network" };
  expect(requestDigest(escalated)).toBe(
    digest([...documented("troupe-approval-request/v1", facts), { escalation: "network" }]),
  );
});

it("the answer's JSON docs/daemon.md shows has the fields the host's schema takes, no other", () => {
  const block = /Its value is this JSON[^`]*```json\n([\s\S]*?)```/.exec(PAGE)?.[1];
  const shown = JSON.parse(block ?? "{}") as { content: Record<string, unknown> };
  expect(Object.keys(shown).sort()).toEqual(Object.keys(signedAnswerSchema.shape).sort());
  expect(Object.keys(shown.content).sort()).toEqual(Object.keys(answerContentSchema.shape).sort());
});
