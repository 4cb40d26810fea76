import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { ScriptedModelServer, type ScriptRule } from "../../src/testing/scripted-model-server.js";
import { TROUPE_BIN, tempTree } from "../support/cli.js";
import { Tmux } from "../support/tmux.js";
import { waitFor } from "../support/wait.js";

/*
 * `troupe chat --local` on a terminal: each line a turn of one run, approvals asked at its prompt,
 * Ctrl-C stopping a turn and not the session, /cost and /agents saying what the run spent.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A project whose agent `coder` may write files, on `rules`; `troupe chat --local ARGS` on a terminal. */
async function localChat(rules: ScriptRule[], args: string[] = [], files: Record<string, string> = {}) {
  const model = await ScriptedModelServer.start(rules);
  cleanups.push(() => model.close());
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": "defaultAgent: coder\ndefaultModel: scripted\n",
    "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [write_file]\n",
    "ws/README.md": "# a project\n",
    ...files,
  });
  cleanups.push(dispose);
  const env = {
    ...process.env,
    OPENAI_BASE_URL: model.baseURL,
    OPENAI_API_KEY: "",
    TROUPE_DATA_DIR: join(dir, ".data"),
  };
  const command = [process.execPath, TROUPE_BIN, "--config", join(dir, "config"), "chat", "--local"];
  const tmux = Tmux.start([...command, "-w", "ws", ...args], { cwd: dir, env, columns: 100, rows: 40 });
  cleanups.push(() => tmux.kill());
  await waitFor("the prompt", () => tmux.screen().includes("›"), 20_000);
  return { model, tmux, dir };
}

/** Types `line` at the prompt and waits until the screen shows `until`. */
async function say(tmux: Tmux, line: string, until: string | RegExp, timeoutMs = 20_000) {
  tmux.keys(line, "Enter");
  await waitFor(`${until} on the screen`, () => matchesScreen(tmux, until), timeoutMs);
}

const matchesScreen = (tmux: Tmux, what: string | RegExp) => {
  const screen = tmux.history();
  return typeof what === "string" ? screen.includes(what) : what.test(screen);
};

/** The text of every message the model was sent in its `n`th request (0-based). */
const sent = (model: ScriptedModelServer, n: number) =>
  (model.requests[n]?.body.messages ?? []).map((m) => `${m.role}: ${String(m.content ?? "")}`);

it("two lines are two turns of one run: the second call carries the first exchange; /cost and /agents say what it spent", async () => {
  const { model, tmux } = await localChat([
    { match: { lastUser: "first question" }, reply: { text: "First answer." } },
    { match: { lastUser: "second question" }, reply: { text: "Second answer." } },
  ]);
  await say(tmux, "first question", /✓ done · 1 turn/);
  await say(tmux, "second question", /✓ done · 2 turns/);
  expect(model.requests).toHaveLength(2);
  const second = sent(model, 1);
  expect(second).toContain("user: first question");
  expect(second).toContain("assistant: First answer.");
  expect(second.at(-1)).toBe("user: second question");
  model.assertComplete();

  await say(tmux, "/cost", /run run-[0-9a-z]{26}: \d+ tokens/);
  const tokens = Number(/run run-[0-9a-z]{26}: (\d+) tokens/.exec(tmux.history())?.[1]);
  // What `troupe run` said the turns spent, and /cost the same.
  expect(tmux.history()).toContain(`2 turns · 0 tool calls · ${tokens} tokens`);
  expect(tmux.history()).toMatch(new RegExp(`coder \\(coder-[0-9a-z]+\\): ${tokens} tokens, \\$0\\.0000`));
  await say(tmux, "/agents", /coder \(coder-[0-9a-z]+\): stopped \(done\), 2 turns, 0 tool calls/);
  await say(tmux, "/cots", 'unknown command /cots (did you mean "/cost"?)');

  // Ctrl-D at an empty prompt leaves, saying how to go on.
  tmux.keys("C-d");
  await waitFor("the way back", () => tmux.history().includes("troupe chat --continue run-"), 10_000);
  expect(tmux.history().replaceAll("\n", "")).toMatch(
    /troupe: run (run-[0-9a-z]{26}) stays: troupe chat --continue \1 goes on with it \(or troupe follow-up \1/,
  );
}, 60_000);

it("asks for an approval at its prompt, and the answer typed there decides it", async () => {
  const write = { name: "write_file", arguments: { path: "out.txt", content: "written\n" } };
  const { tmux, dir } = await localChat(
    [
      { match: { turn: 1 }, reply: { toolCalls: [write] } },
      { match: { turn: 2 }, reply: { text: "Written." } },
      {
        match: { lastUser: "write again", turn: 3 },
        reply: { toolCalls: [{ name: "write_file", arguments: { path: "again.txt", content: "again\n" } }] },
      },
      { match: { turn: 4 }, reply: { text: "Written again." } },
    ],
    ["--approval", "ask"],
  );
  await say(tmux, "write it", "? allow write_file");
  expect(existsSync(join(dir, "ws/out.txt"))).toBe(false);
  await say(tmux, "y", /✓ done/);
  expect(tmux.history()).toContain("✓ allowed by user");
  expect(readFileSync(join(dir, "ws/out.txt"), "utf8")).toBe("written\n");

  // /approval: the next turn writes without asking.
  await say(tmux, "/approval auto-edit", "the next turns ask as auto-edit does");
  await say(tmux, "write again", /✓ done · 4 turns · 2 tool calls/);
  expect(tmux.history().match(/\? allow write_file/g)).toHaveLength(1);
  expect(readFileSync(join(dir, "ws/again.txt"), "utf8")).toBe("again\n");
}, 60_000);

it("Ctrl-C stops the turn, not the session: the next line goes on with the same run", async () => {
  const { model, tmux } = await localChat([
    { match: { lastUser: "a long one" }, reply: { text: "Too late.", delayMs: 60_000 } },
    { match: { lastUser: "a short one" }, reply: { text: "Short answer." } },
  ]);
  tmux.keys("a long one", "Enter");
  await waitFor("the model asked", () => model.requests.length === 1, 20_000);
  tmux.keys("C-c");
  await waitFor(
    "the turn aborted",
    () => tmux.history().includes("troupe: this turn stopped (aborted)"),
    20_000,
  );
  await say(tmux, "a short one", "Short answer.");
  await waitFor("the turn done", () => tmux.history().includes("✓ done"), 10_000);
  expect(model.requests).toHaveLength(2);
  expect(sent(model, 1)).toContain("user: a long one");
  expect(sent(model, 1).at(-1)).toBe("user: a short one");
}, 60_000);

it("/model puts the next turns of the run on another model the config names; one it does not name is one line", async () => {
  const { model, tmux } = await localChat(
    [
      { match: { lastUser: "one" }, reply: { text: "Answer one." } },
      { match: { lastUser: "two" }, reply: { text: "Answer two." } },
      { match: { lastUser: "four" }, reply: { text: "Answer four." } },
    ],
    [],
    {
      "config/agents/reviewer.yaml":
        "name: reviewer\ndescription: Reviews.\nmodel: scripted-large\ntools: []\n",
    },
  );
  await say(tmux, "one", "Answer one.");
  await say(tmux, "/model scripted-large", "the next turns are on scripted-large");
  await say(tmux, "two", "Answer two.");
  await say(tmux, "/model nope", "the next turns are on nope");
  await say(tmux, "three", 'troupe: unknown model "nope"');
  await say(tmux, "four", "Answer four.");
  expect(model.requests.map((request) => request.body.model)).toEqual([
    "scripted",
    "scripted-large",
    "scripted",
  ]);
  expect(sent(model, 2)).toContain("assistant: Answer two.");
}, 60_000);

it("keeps what is typed during a turn below its spinner and output, never drawn over; it is the next line once the turn ends", async () => {
  const { model, tmux } = await localChat([
    { match: { lastUser: "a long one" }, reply: { text: "Too late.", delayMs: 60_000 } },
    { match: { lastUser: "typed meanwhile" }, reply: { text: "Meanwhile answered." } },
  ]);
  tmux.keys("a long one", "Enter");
  await waitFor("the model asked", () => model.requests.length === 1, 20_000);
  await waitFor("the spinner", () => tmux.screen().includes("thinking…"), 10_000);
  tmux.keys("typed meanwhile");
  const lines = () => tmux.screen().split("\n");
  // The spinner turns on the line above the prompt and what was typed, which stay whole.
  const frames = new Set<string>();
  await waitFor(
    "the spinner turning above the typed line",
    () => {
      const screen = lines();
      const at = screen.findIndex((line) => line.trimEnd() === "› typed meanwhile");
      const above = screen[at - 1] ?? "";
      if (at > 0 && /^[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] thinking…/.test(above)) frames.add(above.slice(0, 1));
      return frames.size >= 3;
    },
    10_000,
  );
  // Nowhere is the typed text mixed with the spinner's.
  for (const line of lines().filter((line) => line.includes("typed")))
    expect(line.trimEnd()).toBe("› typed meanwhile");

  // Output while it is typed goes above it.
  tmux.keys("C-c");
  await waitFor(
    "the turn aborted",
    () => tmux.screen().includes("troupe: this turn stopped (aborted)"),
    20_000,
  );
  const after = lines().map((line) => line.trimEnd());
  const stopped = after.indexOf("troupe: this turn stopped (aborted)");
  expect(after.slice(stopped + 1).filter(Boolean)).toEqual(["› typed meanwhile"]);
  expect(after.filter((line) => line.includes("typed"))).toEqual(["› typed meanwhile"]);

  // What was typed is the next line: Enter sends it.
  tmux.keys("Enter");
  await waitFor("the next turn", () => tmux.history().includes("Meanwhile answered."), 20_000);
  expect(sent(model, 1).at(-1)).toBe("user: typed meanwhile");
}, 60_000);

it("/compact compacts the run's conversation now: one line with its tokens before and after, and the next turn goes on from the summary", async () => {
  const long = "The first answer, at length. ".repeat(60).trim();
  const { model, tmux } = await localChat([
    { match: { lastUser: "first question" }, reply: { text: long } },
    { match: { lastUser: "second question" }, reply: { text: "Second answer." } },
    { match: { system: "You compact the conversation" }, reply: { text: "Asked twice, answered twice." } },
    { match: { lastUser: "third question" }, reply: { text: "Third answer." } },
  ]);
  await say(tmux, "/compact", "nothing to compact yet: the run starts with the first line");
  await say(tmux, "first question", /✓ done · 1 turn/);
  await say(tmux, "second question", /✓ done · 2 turns/);
  await say(tmux, "/compact", /context compacted: \d+ → \d+ tokens/);
  const [, before, after] = /context compacted: (\d+) → (\d+) tokens/.exec(tmux.history()) ?? [];
  expect(Number(after)).toBeLessThan(Number(before));
  // One line, and the prompt again.
  const shown = tmux
    .history()
    .split("\n")
    .map((line) => line.trimEnd());
  const asked = shown.lastIndexOf("› /compact");
  expect(shown.slice(asked + 1, asked + 3)).toEqual([`context compacted: ${before} → ${after} tokens`, "›"]);
  // The summary was asked of the agent's model, with the turns it replaces.
  const summarised = sent(model, 2).join("\n");
  expect(summarised).toContain(long);
  expect(summarised).toContain("second question");

  await say(tmux, "third question", /✓ done · 3 turns/);
  const third = sent(model, 3);
  expect(third.join("\n")).not.toContain(long);
  expect(third).toContainEqual(expect.stringContaining("Asked twice, answered twice."));
  expect(third.slice(-2)).toEqual(["assistant: Second answer.", "user: third question"]);
  model.assertComplete();
  // /help lists it.
  await say(tmux, "/help", "/compact   compact the conversation now");
}, 60_000);
