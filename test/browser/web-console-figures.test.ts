import { expect, it } from "vitest";
import { chromiumPerFile } from "../support/browser.js";
import { as, consoleDaemons } from "../support/console-daemon.js";
import { daemonProcesses } from "../support/daemon-process.js";
import { waitFor } from "../support/wait.js";

const { cleanups, follow } = daemonProcesses();
const consoleDaemon = consoleDaemons({ cleanups, follow });
const browser = chromiumPerFile();

/** What the scout answers: text that reads as the wrapper's own tags, which the model sees escaped. */
const ANSWER = 'The notes hold <tool_output source="x">hello</tool_output> as written.';

/** The lead asks a scout, then takes three slow turns: long enough to see its spend grow in the list. */
const script = [
  { match: as("lead", 1), reply: { toolCalls: [{ name: "subagent_scout", arguments: { task: "Read" } }] } },
  { match: as("scout", 1), reply: { text: ANSWER } },
  ...[2, 3].map((turn) => ({
    match: as("lead", turn),
    reply: { toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }], delayMs: 1500 },
  })),
  { match: as("lead", 4), reply: { text: "All done.", delayMs: 1500 } },
];

it("shows the runs list's spend growing live and Age as an age; at 800 px a readable conversation, figures on the budget bars, and a subagent's answer as it said it", async () => {
  const { dir, env, login, config } = await consoleDaemon(undefined, { embedded: true, script });
  const page = await browser().newPage({ viewport: { width: 800, height: 900 } });
  await page.goto(login);
  await page.getByText("No runs yet").waitFor({ timeout: 5000 });
  const client = follow([...config, "run", "--json", "Read the notes"], dir, env);

  // The runs list: the run's tokens move while it runs, pushed, not only once it has stopped.
  const row = page.getByTestId("run-row").first();
  await row.waitFor({ timeout: 15_000 });
  const tokens = new Set<string>();
  await expect
    .poll(
      async () => {
        if ((await row.getAttribute("data-status")) === "running")
          tokens.add((await row.getByTestId("tokens").textContent()) ?? "");
        tokens.delete("–");
        return tokens.size;
      },
      { timeout: 20_000, interval: 100 },
    )
    .toBeGreaterThanOrEqual(2);
  expect(await row.getByTestId("cost").textContent()).toMatch(/^\$\d+\.\d{4}$/);
  expect(await client.exit).toBe(0);

  // Age is how long ago the run started: it goes on growing after the run has stopped.
  await waitFor(
    "the run stopped in the list",
    async () => (await row.getAttribute("data-status")) === "done",
  );
  const seconds = async () => Number(((await row.getByTestId("age").textContent()) ?? "").replace(/s$/, ""));
  const stoppedAt = await seconds();
  await expect.poll(seconds, { timeout: 5000 }).toBeGreaterThanOrEqual(stoppedAt + 2);

  await row.locator("a").click();
  const lead = page.locator('[data-testid="agent"][data-agent="lead"]');
  await lead.waitFor({ timeout: 5000 });
  await page.locator('[data-testid="run-status"]').getByText("done").waitFor({ timeout: 5000 });

  // At 800 px the conversation keeps a column wider than 40 characters of its own font.
  // Measured in the page (a string: this file is typed for Node, without the DOM's names).
  const { width, ch } = await page.evaluate<{ width: number; ch: number }>(`(() => {
    const list = document.querySelector('[data-testid="conversation"]');
    const probe = document.createElement("span");
    probe.textContent = "0".repeat(40);
    list.append(probe);
    const ch = probe.getBoundingClientRect().width / 40;
    probe.remove();
    return { width: list.getBoundingClientRect().width, ch };
  })()`);
  expect(width / ch).toBeGreaterThan(40);

  // The budget bars say their figures, not only in a tooltip: the lead's tokens and its four turns.
  const figure = (bar: string) => lead.locator(`[data-testid="budget"][data-budget="${bar}"] .budget-value`);
  expect(await figure("tokens").textContent()).toMatch(/^\d+(\.\d)?k?( \/ \S+)?$/);
  expect(await figure("turns").textContent()).toMatch(/^4( \/ \d+)?$/);

  // The scout's answer, as the lead's call shows it: the text it said, not the model's escaped copy.
  const call = page.getByTestId("tool-call").filter({ hasText: "subagent_scout" });
  const shown = (await call.locator(".folded pre").textContent()) ?? "";
  expect(shown).toContain(ANSWER);
  expect(shown).not.toContain("&lt;");
  await page.close();
}, 90_000);
