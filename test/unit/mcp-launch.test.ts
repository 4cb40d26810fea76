// biome-ignore-all lint/suspicious/noTemplateCurlyInString: ${workspace} is the config's own placeholder, written as a user writes it
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mcpServerSchema } from "../../src/config/mcp-server-schema.js";
import { type LaunchScope, McpLaunchRefusedError, planLaunch } from "../../src/tools/mcp/mcp-launch.js";
import { tempTree } from "../support/cli.js";

let dir: string;
let dispose = () => {};
let scope: LaunchScope;
beforeEach(() => {
  ({ dir, dispose } = tempTree({ "ws/bin/.keep": "", "config/.keep": "", "tools/.keep": "" }));
  scope = {
    workspace: join(dir, "ws"),
    writable: [join(dir, "ws")],
    configDir: join(dir, "config"),
    spareDir: join(dir, "data/mcp"),
  };
  for (const at of ["tools/server", "ws/bin/server"]) {
    writeFileSync(join(dir, at), "#!/bin/sh\n");
    chmodSync(join(dir, at), 0o755);
  }
});
afterEach(() => dispose());

const entry = (raw: Record<string, unknown>) => mcpServerSchema.parse(raw);
const PATH = "/usr/bin:/bin";

describe("planLaunch", () => {
  it("starts a server in the directory of its file, ${workspace} and ${workspaceFolder} naming the workspace", () => {
    const launch = planLaunch(
      "files",
      {
        ...entry({
          command: "sh",
          args: ["${workspace}", ".", "${workspaceFolder}/x"],
          env: { ROOT: "${workspace}" },
        }),
        dir: join(dir, "config"),
      },
      scope,
      { PATH },
    );
    expect(launch).toMatchObject({
      command: "/usr/bin/sh",
      args: [join(dir, "ws"), ".", join(dir, "ws/x")],
      cwd: join(dir, "config"),
      env: { PATH, ROOT: join(dir, "ws") },
    });
  });

  it("starts one whose file is in the workspace in the spare dir, which it makes", () => {
    const launch = planLaunch("files", { ...entry({ command: "sh" }), dir: join(dir, "ws") }, scope, {
      PATH,
    });
    expect(launch.cwd).toBe(join(dir, "data/mcp"));
  });

  it("keeps no PATH entry an agent may write, by real path, and no relative one", () => {
    symlinkSync(join(dir, "ws/bin"), join(dir, "linked-bin"));
    const path = [
      join(dir, "ws/bin"),
      join(dir, "linked-bin"),
      join(dir, "ws/not-yet"),
      "",
      ".",
      "bin",
      ...PATH.split(":"),
    ];
    const launch = planLaunch("s", entry({ command: "sh" }), scope, { PATH: path.join(":") });
    expect(launch.env.PATH).toBe(PATH);
    expect(launch.leftOut).toEqual(path.slice(0, 6));
  });

  it.each([
    ["its path", () => "${workspace}/bin/server"],
    [
      "a link to it",
      () => {
        symlinkSync(join(dir, "ws/bin/server"), join(dir, "tools/link"));
        return join(dir, "tools/link");
      },
    ],
    ["a path relative to its directory", () => "../ws/bin/server"],
  ])("refuses a command in the workspace named by %s", (_, command) => {
    expect(() =>
      planLaunch("evil", { ...entry({ command: command() }), dir: join(dir, "config") }, scope, { PATH }),
    ).toThrow(McpLaunchRefusedError);
  });

  it("refuses a cwd in the workspace, and an npm or node search path into it", () => {
    const refused = (raw: Record<string, unknown>) => () =>
      planLaunch("evil", entry({ command: "sh", ...raw }), scope, { PATH });
    expect(refused({ cwd: "${workspace}/sub" })).toThrow(
      /its cwd .*\/ws\/sub is inside .*\/ws, which agents may change/,
    );
    expect(refused({ env: { npm_config_prefix: "${workspace}/p" } })).toThrow(/its npm_config_prefix/);
    expect(refused({ env: { NPM_CONFIG_CACHE: join(dir, "ws") } })).toThrow(/its NPM_CONFIG_CACHE/);
    expect(refused({ env: { NODE_PATH: `/usr/lib/node:${join(dir, "ws/lib")}` } })).toThrow(/its NODE_PATH/);
    expect(refused({ env: { npm_config_prefix: join(dir, "tools") } })).not.toThrow();
  });

  it("a sandboxed server may have its command in the workspace: the sandbox holds it", () => {
    const launch = planLaunch(
      "s",
      entry({ command: "${workspace}/bin/server", sandbox: "read-only" }),
      scope,
      { PATH },
    );
    expect(launch.command).toBe(join(dir, "ws/bin/server"));
  });

  it("a writable dir of the daemon's counts too", () => {
    mkdirSync(join(dir, "other/bin"), { recursive: true });
    writeFileSync(join(dir, "other/bin/server"), "#!/bin/sh\n");
    chmodSync(join(dir, "other/bin/server"), 0o755);
    const wider = { ...scope, writable: [...scope.writable, join(dir, "other")] };
    expect(() =>
      planLaunch("evil", entry({ command: join(dir, "other/bin/server") }), wider, { PATH }),
    ).toThrow(McpLaunchRefusedError);
  });

  it("starts a server with the variables of its envFile (relative to its file's directory), its env winning", () => {
    writeFileSync(join(dir, "config/.env"), "TOKEN=from-file\nMODE=file\n");
    const launch = planLaunch(
      "db",
      { ...entry({ command: "sh", envFile: ".env", env: { MODE: "entry" } }), dir: join(dir, "config") },
      scope,
      { PATH },
    );
    expect(launch.env).toMatchObject({ TOKEN: "from-file", MODE: "entry" });
  });

  it("refuses an envFile an agent may write, or one that cannot be read", () => {
    writeFileSync(join(dir, "ws/.env"), "NODE_OPTIONS=--require ./evil.js\n");
    const start = (envFile: string) => () =>
      planLaunch("db", { ...entry({ command: "sh", envFile }), dir: join(dir, "config") }, scope, { PATH });
    expect(start("../ws/.env")).toThrow(
      new McpLaunchRefusedError(
        "db",
        `its envFile ${join(dir, "ws/.env")} is inside ${join(dir, "ws")}, which agents may change; keep it outside`,
      ),
    );
    expect(start("missing.env")).toThrow(/its envFile .*missing\.env cannot be read \(ENOENT\); create it/);
  });
});
