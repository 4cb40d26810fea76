import { chmodSync, mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { apiRequests, beyondCeiling } from "../../src/daemon/api.js";
import { ApproverTrust, createKey, identityFromFile, localIdentity } from "../../src/trust/approvers.js";
import { RecordSeal } from "../../src/trust/record-seal.js";
import { ensureRoleCredentials } from "../../src/trust/role-credentials.js";
import { type AnswerContent, signAnswer, verifyAnswer } from "../../src/trust/signed-answer.js";
import { readSecretFile } from "../../src/util/secret-files.js";
import { newIdentity, trusting } from "../support/approvers.js";

const ana = newIdentity("ana");
const ben = newIdentity("ben");
const trust = trusting(ana, ben);
const request = { runId: "run-1", callId: "call_1", requestId: "digest-1", createdAt: 1_000_000 };
const signed = signAnswer(
  ana,
  { ...request, approved: true, reason: "fine", via: "troupe approve" },
  1_000_500,
);

describe("signed answers", () => {
  it("verify under the trusted name, with where they were given", () => {
    expect(verifyAnswer(signed, request, trust, 1_001_000)).toMatchObject({
      ok: true,
      by: "ana (troupe approve)",
    });
  });

  it("are refused when any signed field changes after signing", () => {
    const changes: Array<[keyof AnswerContent, unknown, string | RegExp]> = [
      ["decision", "deny", "bad signature"],
      ["reason", "changed", "bad signature"],
      ["answerId", "other", "bad signature"],
      ["via", "troupe run", "bad signature"],
      ["time", 1_000_600, "bad signature"],
      ["publicKey", ben.publicKey, "bad signature"],
      ["name", "ben", "bad signature"],
      ["runId", "run-2", "signed for another call"],
      ["callId", "call_2", "signed for another call"],
      ["requestId", "digest-0", "signed for another request (an old answer?)"],
    ];
    for (const [field, value, why] of changes) {
      const tampered = { ...signed, content: { ...signed.content, [field]: value } };
      const verdict = verifyAnswer(tampered, request, trust, 1_001_000);
      expect(verdict, field).toMatchObject({ ok: false, why });
    }
  });

  it("are refused when older than the request, from the future, unsigned or by a key nobody trusts", () => {
    const at = (time: number) => signAnswer(ana, { ...request, approved: true }, time);
    expect(verifyAnswer(at(1_000_000 - 61_000), request, trust, 1_001_000)).toMatchObject({
      why: "older than the request",
    });
    expect(verifyAnswer(at(1_001_000 + 61_000), request, trust, 1_001_000)).toMatchObject({
      why: "dated in the future",
    });
    expect(verifyAnswer({ approved: true }, request, trust)).toMatchObject({ why: "not a signed answer" });
    expect(verifyAnswer(signed, request, trusting(ben), 1_001_000)).toMatchObject({
      ok: false,
      why: expect.stringMatching(/not a trusted approver's/),
      claimedBy: "ana",
    });
  });
});

describe("keys and credentials on disk", () => {
  it("are private, never replaced, and a key others can read is refused with how to mend it", () => {
    const dir = mkdtempSync(join(tmpdir(), "troupe-keys-"));
    const { file, publicKey } = createKey(dir, "ana");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, "keys")).mode & 0o777).toBe(0o700);
    expect(() => createKey(dir, "ana")).toThrow(/exists: a key is never replaced/);
    expect(() => createKey(dir, "../ana")).toThrow(/must be letters, digits/);
    expect(identityFromFile(file).publicKey).toBe(publicKey);
    chmodSync(file, 0o644);
    expect(() => readSecretFile(file)).toThrow(`${file} can be read by others: chmod 600 ${file}`);
    // …and a data dir's trust leaves such a key out.
    expect(new ApproverTrust({}, dir).nameOf(publicKey)).toBeUndefined();
    chmodSync(file, 0o600);
    expect(new ApproverTrust({}, dir).nameOf(publicKey)).toBe("ana");
  });

  it("make the local user's key on first use, and the same one after", () => {
    const dir = mkdtempSync(join(tmpdir(), "troupe-keys-"));
    const first = localIdentity(dir, {});
    expect(localIdentity(dir, {}).publicKey).toBe(first.publicKey);
    expect(new ApproverTrust({}, dir).nameOf(first.publicKey)).toBe(first.name);
    const other = createKey(mkdtempSync(join(tmpdir(), "troupe-keys-")), "ops");
    expect(localIdentity(dir, { TROUPE_APPROVER_KEY: other.file })).toMatchObject({
      name: "ops",
      publicKey: other.publicKey,
    });
  });

  it("keep each role's seed once made: a second daemon start reads the same keys", () => {
    const dir = mkdtempSync(join(tmpdir(), "troupe-creds-"));
    const keys = ensureRoleCredentials(dir);
    const seed = readFileSync(join(dir, "credentials", "observer.nk"), "utf8");
    expect(ensureRoleCredentials(dir)).toEqual(keys);
    expect(readFileSync(join(dir, "credentials", "observer.nk"), "utf8")).toBe(seed);
    expect(new Set(Object.values(keys)).size).toBe(5);
  });
});

describe("the daemon's ceiling", () => {
  it("refuses a looser policy or sandbox than daemon.maxApproval allows", () => {
    const refused = (
      request: Parameters<typeof beyondCeiling>[0],
      ceiling: Parameters<typeof beyondCeiling>[1],
    ) => beyondCeiling(request, ceiling) !== undefined;
    expect(refused({ approval: "yolo" }, "auto-edit")).toBe(true);
    expect(refused({ sandbox: "off" }, "auto-edit")).toBe(true);
    for (const approval of ["ask", "never-ask", "auto-edit"] as const)
      expect(refused({ approval, sandbox: "workspace-write" }, "auto-edit")).toBe(false);
    expect(refused({ approval: "auto-edit" }, "never-ask")).toBe(true);
    expect(refused({ sandbox: "workspace-write" }, "never-ask")).toBe(true);
    expect(refused({ approval: "never-ask", sandbox: "read-only" }, "never-ask")).toBe(false);
    expect(refused({ approval: "never-ask" }, "ask")).toBe(true);
    expect(refused({ approval: "yolo", sandbox: "off" }, "yolo")).toBe(false);
    expect(beyondCeiling({ approval: "yolo" }, "auto-edit")).toBe(
      'approval "yolo" is beyond this daemon\'s maxApproval "auto-edit": raise daemon.maxApproval in troupe.yaml to allow it',
    );
  });

  it("leaves steer and follow-up no way to widen a run's rights", () => {
    for (const verb of ["runs.steer", "runs.followUp"] as const) {
      for (const extra of [{ approval: "yolo" }, { sandbox: "off" }, { mode: "act" }]) {
        const parsed = apiRequests[verb].safeParse({ runId: "run-1", text: "go on", ...extra });
        expect(parsed.success, `${verb} ${JSON.stringify(extra)}`).toBe(false);
      }
    }
  });
});

describe("RecordSeal", () => {
  it("opens what it sealed as written after a JSON round trip, and nothing changed, sealed by another key or the other way", () => {
    const seal = RecordSeal.ephemeral();
    const record = {
      runId: "r",
      agentId: "a",
      snapshot: { messages: [{ role: "user", content: "hi" }] },
      done: false,
    };
    const stored = JSON.parse(JSON.stringify(seal.sealAsWritten(record)));
    expect(seal.openAsWritten(stored)).toEqual(record);
    expect(seal.openAsWritten({ ...stored, done: true })).toBeUndefined();
    expect(RecordSeal.ephemeral().openAsWritten(stored)).toBeUndefined();
    expect(seal.openAsWritten(JSON.parse(JSON.stringify(seal.seal({ b: 1, a: 2 }))))).toBeUndefined();
    expect(seal.openAsWritten({ ...record })).toBeUndefined();
  });
});
