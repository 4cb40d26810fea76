import { existsSync, readFileSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, TROUPE_BIN } from "../support/cli.js";
import { embeddedDaemon } from "../support/embedded-daemon.js";
import { Tmux } from "../support/tmux.js";
import { waitFor } from "../support/wait.js";

/*
 * `troupe chat` through the daemon (its default embedded, credentialed server): each line a turn of
 * one run the daemon hosts, its approvals asked at the prompt; `troupe follow-up` and `troupe run
 * --continue` go on with it from a script.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The text of every message the model was sent in its `n`th request (0-based). */
const sent = (model: ScriptedModelServer, n: number) =>
  (model.requests[n]?.body.messages ?? []).map((m) => `${m.role}: ${String(m.content ?? "")}`);

it("chats with a run on the daemon: two turns of one run, an approval answered at the prompt, /cost, then follow-up and --continue from a script", async () => {
  const write = { name: "write_file", arguments: { path: "out.txt", content: "written\n" } };
  const model = await ScriptedModelServer.start([
    { match: { lastUser: "first question" }, reply: { text: "First answer." } },
    { match: { lastUser: "write it", turn: 2 }, reply: { toolCalls: [write] } },
    { match: { lastUser: "write it" }, reply: { text: "Written." } },
    { match: { lastUser: "on the large model" }, reply: { text: "Large answer." } },
    { match: { lastUser: "from a script" }, reply: { text: "Scripted answer." } },
    { match: { lastUser: "continued" }, reply: { text: "Continued answer." } },
  ]);
  cleanups.push(() => model.close());
  const h = await embeddedDaemon(
    {
      "config/troupe.yaml": `nats:\n  prefix: ${uniquePrefix()}\ndefaultAgent: coder\ndefaultModel: scripted\n`,
      "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [write_file]\n",
      "config/agents/reviewer.yaml":
        "name: reviewer\ndescription: Reviews.\nmodel: scripted-large\ntools: []\n",
    },
    model.baseURL,
    cleanups,
  );
  await h.start();
  const tmux = Tmux.start([process.execPath, TROUPE_BIN, ...h.cfg, "chat", "--approval", "ask"], {
    cwd: h.dir,
    env: h.env,
    columns: 100,
    rows: 40,
  });
  cleanups.push(() => tmux.kill());
  await waitFor("the prompt", () => tmux.screen().includes("(daemon); /help"), 20_000);
  const shows = (what: string | RegExp, timeoutMs = 20_000) =>
    waitFor(
      `${what} on the screen`,
      () => {
        const seen = tmux.history();
        return typeof what === "string" ? seen.includes(what) : what.test(seen);
      },
      timeoutMs,
    );

  tmux.keys("first question", "Enter");
  await shows(/✓ done · 1 turn/);
  tmux.keys("write it", "Enter");
  await shows("? allow write_file");
  expect(existsSync(join(h.dir, "out.txt"))).toBe(false);
  tmux.keys("y", "Enter");
  await shows(/✓ done · 3 turns · 1 tool call/);
  expect(readFileSync(join(h.dir, "out.txt"), "utf8")).toBe("written\n");
  // One run: its second turn's first call carries the first exchange.
  expect(sent(model, 1)).toContain("user: first question");
  expect(sent(model, 1)).toContain("assistant: First answer.");
  expect(sent(model, 1).at(-1)).toBe("user: write it");
  tmux.keys("/cost", "Enter");
  await shows(/run run-[0-9a-z]{26}: \d+ tokens/);
  const tokens = /run run-[0-9a-z]{26}: (\d+) tokens/.exec(tmux.history())?.[1];
  expect(tmux.history()).toContain(`3 turns · 1 tool call · ${tokens} tokens`);
  tmux.keys("/agents", "Enter");
  await shows(/coder \(coder-[0-9a-z]+\): stopped \(done\), 3 turns, 1 tool call/);
  // A policy beyond the daemon's ceiling is refused at the next turn, in one line; the run goes on as it was.
  tmux.keys("/approval yolo", "Enter");
  await shows("the next turns ask as yolo does");
  tmux.keys("as yolo", "Enter");
  await waitFor("the refusal", () =>
    /troupe: .*raise daemon\.maxApproval in troupe\.yaml to allow it/.test(
      tmux.history().replaceAll("\n", ""),
    ),
  );
  tmux.keys("/model scripted-large", "Enter");
  await shows("the next turns are on scripted-large");
  tmux.keys("on the large model", "Enter");
  await shows("Large answer.");
  expect(model.requests[3]?.body.model).toBe("scripted-large");
  await shows(/✓ done · 4 turns/);
  tmux.keys("C-c");
  await shows("troupe chat --continue run-", 10_000);
  const runId = /troupe: run (run-[0-9a-z]{26}) stays/.exec(tmux.history())?.[1] ?? "";
  expect(runId).not.toBe("");

  const followed = await runTroupe([...h.cfg, "follow-up", runId, "from a script"], {
    cwd: h.dir,
    env: h.env,
  });
  expect(followed.stdout).toContain("Scripted answer.");
  expect(followed.code).toBe(0);
  expect(sent(model, 4)).toContain("user: write it");
  expect(sent(model, 4).at(-1)).toBe("user: from a script");
  // The model chosen in chat was for that session's turns: a script's go on on the agent's.
  expect(model.requests[4]?.body.model).toBe("scripted");

  const continued = await runTroupe([...h.cfg, "run", "--continue", "continued"], { cwd: h.dir, env: h.env });
  expect(continued.stderr).toContain(
    `troupe: continuing run ${runId} (the newest in ${realpathSync(h.dir)})`,
  );
  expect(continued.stdout).toContain("Continued answer.");
  expect(continued.code).toBe(0);
  expect(sent(model, 5)).toContain("assistant: Scripted answer.");
  expect(sent(model, 5).at(-1)).toBe("user: continued");
  model.assertComplete();

  // A run the daemon does not know: one line, and no turn.
  const unknown = await runTroupe([...h.cfg, "follow-up", "run-00000000000000000000000000", "hello"], {
    cwd: h.dir,
    env: h.env,
  });
  expect(unknown.code).toBe(2);
  expect(unknown.stderr.trim().split("\n")).toEqual([
    "troupe: no run run-00000000000000000000000000 here or on the daemon (troupe runs lists them)",
  ]);
}, 120_000);

it("/compact through the daemon compacts the run's conversation between turns: one line, the next turn goes on from the summary", async () => {
  const long = "The first answer, at length. ".repeat(60).trim();
  const model = await ScriptedModelServer.start([
    { match: { lastUser: "first question" }, reply: { text: long } },
    { match: { lastUser: "second question" }, reply: { text: "Second answer." } },
    { match: { system: "You compact the conversation" }, reply: { text: "Asked twice, answered twice." } },
    { match: { lastUser: "third question" }, reply: { text: "Third answer." } },
  ]);
  cleanups.push(() => model.close());
  const h = await embeddedDaemon(
    {
      "config/troupe.yaml": `nats:\n  prefix: ${uniquePrefix()}\ndefaultAgent: coder\ndefaultModel: scripted\n`,
      "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: []\n",
    },
    model.baseURL,
    cleanups,
  );
  await h.start();
  const tmux = Tmux.start([process.execPath, TROUPE_BIN, ...h.cfg, "chat"], {
    cwd: h.dir,
    env: h.env,
    columns: 100,
    rows: 40,
  });
  cleanups.push(() => tmux.kill());
  await waitFor("the prompt", () => tmux.screen().includes("(daemon); /help"), 20_000);
  const shows = (what: RegExp) => waitFor(`${what} on the screen`, () => what.test(tmux.history()), 20_000);
  tmux.keys("first question", "Enter");
  await shows(/✓ done · 1 turn/);
  tmux.keys("second question", "Enter");
  await shows(/✓ done · 2 turns/);
  tmux.keys("/compact", "Enter");
  await shows(/context compacted: \d+ → \d+ tokens/);
  const [, before, after] = /context compacted: (\d+) → (\d+) tokens/.exec(tmux.history()) ?? [];
  expect(Number(after)).toBeLessThan(Number(before));
  tmux.keys("third question", "Enter");
  await shows(/✓ done · 3 turns/);
  const third = sent(model, 3);
  expect(third.join("\n")).not.toContain(long);
  expect(third).toContainEqual(expect.stringContaining("Asked twice, answered twice."));
  expect(third.at(-1)).toBe("user: third question");
  model.assertComplete();
}, 60_000);
