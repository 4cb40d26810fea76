import { expect, it } from "vitest";
import { chromiumPerFile } from "../support/browser.js";
import { runTroupe } from "../support/cli.js";
import { as, consoleDaemons } from "../support/console-daemon.js";
import { daemonProcesses } from "../support/daemon-process.js";
import { EVERYTHING } from "../support/mcp-servers.js";
import { waitFor } from "../support/wait.js";

/*
 * An MCP server's question (elicitation) on the default embedded, credentialed server: put while
 * server-everything's `trigger-elicitation-request` runs in a daemon run, answered once from the web
 * console in Chromium, once from `troupe approve` in another process. The server says what it got.
 */

const { cleanups, follow } = daemonProcesses();
const browser = chromiumPerFile();

const consoleDaemon = consoleDaemons({ cleanups, follow });

const TOOL = "everything__trigger-elicitation-request";

async function daemon() {
  return consoleDaemon(
    {
      flag: "127.0.0.1:0",
      yaml: [
        "mcpServers:",
        "  everything:",
        `    command: ${JSON.stringify(process.execPath)}`,
        `    args: [${JSON.stringify(EVERYTHING)}]`,
        "    autoApprove: [trigger-elicitation-request]",
        "",
      ].join("\n"),
    },
    {
      embedded: true,
      script: [
        { match: as("lead", 1), reply: { toolCalls: [{ name: TOOL, arguments: {} }] }, times: 2 },
        {
          match: as("lead", 2),
          reply: (request) => ({ text: String(request.messages.at(-1)?.content) }),
          times: 2,
        },
      ],
      // The workspace is not the project dir: a server defined in a config inside the workspace is
      // never started (an agent could have written it).
      files: {
        "config/agents/lead.yaml": `name: lead\ndescription: Leads.\ntools: [${TOOL}]\n`,
        "ws/README.md": "# the workspace\n",
      },
    },
  );
}

/** The run's events, as `troupe run --json` printed them. */
const eventsOf = (stdout: string) =>
  stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { type: string; data: Record<string, unknown> });

/** The answer the run ended with. */
function resultOf(events: ReturnType<typeof eventsOf>): string {
  const stopped = events.find((e) => e.type === "agent.stopped");
  return String((stopped?.data as { result?: string } | undefined)?.result);
}

it("a server's question is answered from the web console's form, and from troupe approve --field in another process", async () => {
  const { dir, env, login, config } = await daemon();
  const page = await browser().newPage();
  await page.goto(login);

  // From the page: the form's fields, filled in and sent.
  const first = follow([...config, "run", "-w", "ws", "--json", "--approval", "ask", "ask me"], dir, env);
  await waitFor("the run to start", () => first.stdout().includes('"agent.started"'), 15_000);
  await page.locator('[data-testid="run-row"]').first().locator("a").click();
  const question = page.locator('[data-testid="question"][data-status="pending"]');
  await question.waitFor({ timeout: 15_000 }).catch((error: Error) => {
    throw new Error(`${error.message}\nthe run said: ${first.stdout()}\n${first.stderr()}`);
  });
  await question.getByText("Please provide inputs for the following fields:").waitFor();
  // A wrong value is said on the page, and nothing is sent.
  await question.getByTestId("field-integer").locator("input").fill("500");
  await question.getByTestId("send").click();
  await question.getByTestId("outcome").getByText("integer is at most 100").waitFor({ timeout: 5000 });
  await question.getByTestId("field-integer").locator("input").fill("12");
  await question.getByTestId("field-name").locator("input").fill("Ann Lee");
  await question.getByTestId("field-check").locator("input").check();
  await question.getByTestId("send").click();
  expect(await first.exit).toBe(0);
  const events = eventsOf(first.stdout());
  expect(events.find((e) => e.type === "elicitation.finished")?.data).toMatchObject({
    server: "everything",
    action: "accept",
  });
  const stopped = resultOf(events);
  expect(stopped).toContain("- Name: Ann Lee");
  expect(stopped).toContain("- Agreed to terms: true");
  expect(stopped).toContain("- Favorite Integer: 12");
  await page.close();

  // From another process: troupe approve, the fields as NAME=VALUE.
  const second = follow(
    [...config, "run", "-w", "ws", "--json", "--approval", "ask", "ask me again"],
    dir,
    env,
  );
  let callId = "";
  await waitFor(
    "the question to be listed",
    async () => {
      const listed = await runTroupe([...config, "approvals", "--json"], { cwd: dir, env });
      const rows = (JSON.parse(listed.stdout) as { approvals: Array<{ callId: string; tool: string }> })
        .approvals;
      callId = rows.find((row) => row.tool === "everything__elicitation")?.callId ?? "";
      return callId !== "";
    },
    15_000,
  );
  // Answers that do not fit the form: one line, exit 2, nothing sent.
  const wrong = await runTroupe([...config, "approve", callId, "--allow", "--field", "integer=500"], {
    cwd: dir,
    env,
  });
  expect(wrong.code).toBe(2);
  expect(wrong.stderr).toContain("integer is at most 100: answer with --field NAME=VALUE");
  const answered = await runTroupe(
    [
      ...config,
      "approve",
      callId,
      "--allow",
      "--field",
      "name=Bob",
      "--field",
      "titledSingleSelectEnum=hero-2",
    ],
    { cwd: dir, env },
  );
  expect(answered.stderr).toContain("the MCP server everything asks you:");
  expect(answered.code).toBe(0);
  expect(await second.exit).toBe(0);
  const after = eventsOf(second.stdout());
  const result = resultOf(after);
  expect(result).toContain("- Name: Bob");
  expect(result).toContain('"titledSingleSelectEnum": "hero-2"');
}, 120_000);
