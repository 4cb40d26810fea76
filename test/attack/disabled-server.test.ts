import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { runTroupe, tempTree } from "../support/cli.js";

/* ATTACK: "disabled: true: the server is not started". troupe doctor and troupe agents validate
 * --check-servers started every server of the config, the disabled ones too (unsandboxed). */

let dispose = () => {};
afterEach(() => dispose());

it.each([[["doctor"]], [["agents", "validate", "--check-servers"]]])(
  "troupe %j does not start a disabled server",
  async (args) => {
    const tree = tempTree({
      "config/troupe.yaml": "mcpServersFrom: ../proj/.mcp.json\n",
      "proj/.mcp.json": "",
    });
    dispose = tree.dispose;
    const marker = join(tree.dir, "it-ran");
    const { writeFileSync } = await import("node:fs");
    writeFileSync(
      join(tree.dir, "proj/.mcp.json"),
      JSON.stringify({
        mcpServers: { off: { command: "sh", args: ["-c", `touch ${marker}`], disabled: true } },
      }),
    );
    await runTroupe(["--config", join(tree.dir, "config"), ...args], { cwd: tree.dir });
    expect(existsSync(marker)).toBe(false);
  },
);
