import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { chromiumPerFile } from "../support/browser.js";
import { as, consoleDaemons } from "../support/console-daemon.js";
import { daemonProcesses } from "../support/daemon-process.js";

/*
 * The console's permissions panel in Chromium, on the default embedded, credentialed server: it lists
 * the rules the daemon runs by, and offers no way to change them (troupe.yaml does, at the next start).
 */
const { cleanups, follow } = daemonProcesses();
const browser = chromiumPerFile();

const consoleDaemon = consoleDaemons({ cleanups, follow });

const RULES = "permissions:\n  allow:\n    - write_file(out.txt)\n  deny:\n    - write_file(secrets/**)\n";

it("lists the daemon's allow and deny rules, deny first, where each is written; they are the rules its runs go by, and the page can change none", async () => {
  const write = (path: string) => ({
    toolCalls: [{ name: "write_file", arguments: { path, content: "x\n" } }],
  });
  const { dir, env, login, config } = await consoleDaemon(
    { flag: "127.0.0.1:0", yaml: RULES },
    {
      embedded: true,
      script: [
        { match: as("lead", 1), reply: write("secrets/key.txt") },
        { match: as("lead", 2), reply: write("out.txt") },
        { match: as("lead", 3), reply: { text: "Done by the rules." } },
      ],
    },
  );
  const page = await browser().newPage();
  await page.goto(login);
  const panel = page.getByTestId("permissions");
  await panel.waitFor({ timeout: 10_000 });
  const rows = () =>
    panel
      .getByTestId("permission-rule")
      .evaluateAll((nodes) =>
        nodes.map((row) => [...row.querySelectorAll("td")].map((cell) => cell.textContent?.trim())),
      );
  const listed = [
    ["deny", "write_file(secrets/**)", "config/troupe.yaml:9"],
    ["allow", "write_file(out.txt)", "config/troupe.yaml:7"],
  ];
  expect(await rows()).toEqual(listed);
  // Nothing on the panel changes a rule: no button, field or choice.
  expect(await panel.locator("button, input, select, textarea, form, [contenteditable]").count()).toBe(0);

  // The rules shown are those the daemon's runs go by: under --approval ask, the denied write is
  // refused and the allowed one made, neither asking anyone.
  const client = follow([...config, "run", "--json", "--approval", "ask", "Write the files"], dir, env);
  expect(await client.exit).toBe(0);
  expect(existsSync(join(dir, "secrets", "key.txt"))).toBe(false);
  expect(readFileSync(join(dir, "out.txt"), "utf8")).toBe("x\n");
  const types = client
    .stdout()
    .trim()
    .split("\n")
    .map((line) => (JSON.parse(line) as { type: string }).type);
  expect(types).not.toContain("approval.requested");
  await page.locator('[data-testid="run-row"]').first().waitFor({ timeout: 10_000 });

  // From the page's own origin, with its session, a POST to the rules is no action the console has.
  const posted = await page.evaluate<number>(`(async () => {
    const session = localStorage.getItem("troupe-session");
    const response = await fetch("/api/permissions", {
      method: "POST",
      headers: { authorization: "Bearer " + session, "content-type": "application/json" },
      body: JSON.stringify({ kind: "allow", pattern: "write_file(secrets/**)" }),
    });
    return response.status;
  })()`);
  expect(posted).toBe(404);

  // troupe.yaml changed while the daemon runs: the page still shows what the daemon runs by.
  const yaml = join(dir, "config", "troupe.yaml");
  writeFileSync(yaml, readFileSync(yaml, "utf8").replace("write_file(secrets/**)", "write_file(**)"));
  await page.reload();
  await panel.waitFor({ timeout: 10_000 });
  await expect.poll(() => rows(), { timeout: 5000 }).toEqual(listed);
  await page.close();
}, 90_000);
